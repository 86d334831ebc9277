package pvllm_test

import (
	"context"
	"errors"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// A library older than 0.5 has no output handlers: each Stream then waits
// in pvllm_wait and takes its events with pvllm_poll_request. The same
// guarantees hold on that path: every reader gets its own request's events
// once, cancellation aborts, and Close ends what runs.
func TestWaitDeliveryForOlderLibraries(t *testing.T) {
	pvllm.SetWaitDelivery(true)
	eng := newLongEngine(t)
	pvllm.SetWaitDelivery(false)
	if pvllm.UsesOutputHandlers(eng) || !pvllm.UsesOutputHandlers(newEngine(t)) {
		t.Fatal("SetWaitDelivery does not pick the delivery")
	}
	ctx := testContext(t)

	runReaders(ctx, t, eng, 8, 4)

	cctx, cancel := context.WithCancel(ctx)
	s, err := eng.Submit(cctx, pvllm.Request{Prompt: "Hello", Params: exactly(longRequest)})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Events()
	cancel()
	if res, err := s.Collect(); !errors.Is(err, context.Canceled) ||
		res.Samples[0].FinishReason != pvllm.FinishAbort {
		t.Errorf("cancelled: %v, finish %v; want context.Canceled, abort", err, res.Samples[0].FinishReason)
	}

	s, err = eng.Submit(ctx, pvllm.Request{Prompt: "Hello", Params: exactly(longRequest)})
	if err != nil {
		t.Fatal(err)
	}
	first := <-s.Events()
	eng.Close()
	events := append([]pvllm.Output{first}, readAll(s)...)
	if err := checkComplete(s.ID(), events, 1, -1); err != nil {
		t.Error(err)
	}
	if last := events[len(events)-1]; last.FinishReason != pvllm.FinishAbort || !errors.Is(last.Err, pvllm.ErrClosed) {
		t.Errorf("closed: last event %+v, want abort with ErrClosed", last)
	}
}
