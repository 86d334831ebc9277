package pvllm_test

// Each Stream reads its own request's events from the library (per-request
// delivery, pvllm_wait, pvllm_poll_request) and ends on the library's
// request-finished flag. These tests hold that to the cases a router in the
// package used to carry: many readers at once, readers that never read,
// parallel samples, aborts from elsewhere, and Close under all of them.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// checkComplete checks the events of one request read to the channel's
// close: all its own, every sample finished once, the request finished
// once and last, `tokens` in total.
func checkComplete(id uint64, events []pvllm.Output, samples, tokens int) error {
	finals := make([]int, samples)
	got, requestFinished := 0, 0
	for i, o := range events {
		if o.RequestID != id {
			return fmt.Errorf("request %d: an event of request %d", id, o.RequestID)
		}
		if o.Index < 0 || o.Index >= samples {
			return fmt.Errorf("request %d: sample index %d", id, o.Index)
		}
		got += len(o.TokenIDs)
		if o.FinishReason != pvllm.FinishNone {
			finals[o.Index]++
		}
		if o.RequestFinished {
			requestFinished++
			if i != len(events)-1 {
				return fmt.Errorf("request %d: %d events after RequestFinished", id, len(events)-1-i)
			}
		}
	}
	for k, n := range finals {
		if n != 1 {
			return fmt.Errorf("request %d: sample %d finished %d times", id, k, n)
		}
	}
	if requestFinished != 1 {
		return fmt.Errorf("request %d: RequestFinished %d times", id, requestFinished)
	}
	if tokens >= 0 && got != tokens {
		return fmt.Errorf("request %d: %d tokens, want %d", id, got, tokens)
	}
	return nil
}

func readAll(s *pvllm.Stream) []pvllm.Output {
	var events []pvllm.Output
	for o := range s.Events() {
		events = append(events, o)
	}
	return events
}

// runReaders submits `readers` requests from as many goroutines (reader i
// asks for 5 + i%spread tokens in 1 + i%3 samples) and checks that each
// gets exactly its own events.
func runReaders(ctx context.Context, t *testing.T, eng *pvllm.Engine, readers, spread int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			params := exactly(5 + i%spread)
			params.N = 1 + i%3
			params.Temperature = 0.8
			s, err := eng.Submit(ctx, pvllm.Request{Prompt: fmt.Sprintf("reader %d", i), Params: params})
			if err != nil {
				errs <- err
				return
			}
			if err := checkComplete(s.ID(), readAll(s), params.N, params.N*params.MaxTokens); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestManyReadersEachGetTheirOwnRequestOnce(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	const readers = 12
	runReaders(ctx, t, eng, readers, 7)
}

// A reader that never reads leaves its events in the library: other
// requests finish, and all of its events are still there afterwards.
func TestUnreadStreamKeepsItsEventsAndStallsNobody(t *testing.T) {
	eng := newEngine(t, func(c *pvllm.Config) { c.StreamBuffer = 1 })
	ctx := testContext(t)
	params := exactly(30)
	params.N = 2
	params.Temperature = 0.8
	idle, err := eng.Submit(ctx, pvllm.Request{Prompt: "idle", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := eng.Generate(ctx, "busy", exactly(20+i))
			if err != nil || len(res.Samples[0].TokenIDs) != 20+i {
				t.Errorf("busy request %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if err := checkComplete(idle.ID(), readAll(idle), 2, 60); err != nil {
		t.Error(err)
	}
}

func TestAbortFromAnotherGoroutineEndsTheStream(t *testing.T) {
	eng := newLongEngine(t)
	params := exactly(longRequest)
	params.N = 2
	params.Temperature = 0.8
	s, err := eng.Submit(testContext(t), pvllm.Request{Prompt: "long", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	first := <-s.Events()
	go func() {
		if err := s.Abort(); err != nil {
			t.Errorf("Abort: %v", err)
		}
	}()
	events := append([]pvllm.Output{first}, readAll(s)...)
	if err := checkComplete(s.ID(), events, 2, -1); err != nil {
		t.Fatal(err)
	}
	if last := events[len(events)-1]; last.FinishReason != pvllm.FinishAbort {
		t.Errorf("last event %v, want abort", last.FinishReason)
	}
}

// Close returns while nobody reads: it aborts the requests and waits only
// for their last events to leave the library, not for the readers. The
// streams then hand over what they hold and close.
func TestCloseDoesNotWaitForReaders(t *testing.T) {
	eng, err := pvllm.New(pvllm.Config{ModelPath: tinyModel(t), NumThreads: 1, StreamBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	var streams []*pvllm.Stream
	for i := 0; i < 3; i++ {
		s, err := eng.Submit(context.Background(), pvllm.Request{Prompt: "x", Params: exactly(300)})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	first := <-streams[0].Events() // running
	closed := make(chan struct{})
	go func() {
		eng.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for readers that never read")
	}
	for i, s := range streams {
		events := readAll(s)
		if i == 0 {
			events = append([]pvllm.Output{first}, events...)
		}
		if err := checkComplete(s.ID(), events, 1, -1); err != nil {
			t.Error(err)
		}
		last := events[len(events)-1]
		if !last.RequestFinished || last.FinishReason == pvllm.FinishNone {
			t.Errorf("stream %d ended with %+v", i, last)
		}
		if last.FinishReason == pvllm.FinishAbort && !errors.Is(last.Err, pvllm.ErrClosed) {
			t.Errorf("stream %d: abort without ErrClosed: %v", i, last.Err)
		}
	}
	if _, err := eng.Submit(context.Background(), pvllm.Request{Prompt: "x", Params: exactly(1)}); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
}
