package pvllm_test

import (
	"bufio"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// osThreads returns the process's threads (/proc/self/status) and the
// threads the Go runtime has created so far (the threadcreate profile,
// which only grows, so it also catches a peak that came and went).
func osThreads(t *testing.T) (live, created int) {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "Threads:") {
			live, err = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Threads:")))
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return live, pprof.Lookup("threadcreate").Count()
}

// A Stream waiting for its request's events is a goroutine on a channel,
// not an OS thread blocked in the library: a thousand streams waiting on
// unfinished requests add no more than a handful of threads, and then
// each gets all of its own events.
func TestThousandWaitingStreamsAddFewThreads(t *testing.T) {
	// One sequence at a time: while the blocker runs, every other request
	// waits in the queue, unfinished.
	eng := newLongEngine(t, func(c *pvllm.Config) { c.MaxNumSeqs = 1 })
	ctx := testContext(t)
	ref, err := eng.Generate(ctx, "The cat", exactly(6))
	if err != nil {
		t.Fatal(err)
	}
	blocker, err := eng.Submit(ctx, pvllm.Request{Prompt: "Hi", Params: exactly(longRequest)})
	if err != nil {
		t.Fatal(err)
	}
	<-blocker.Events() // running
	liveBefore, createdBefore := osThreads(t)

	const numStreams = 1000
	results := make(chan error, numStreams)
	for i := 0; i < numStreams; i++ {
		s, err := eng.Submit(ctx, pvllm.Request{Prompt: "The cat", Params: exactly(6)})
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		go func(s *pvllm.Stream) {
			events := readAll(s)
			err := checkComplete(s.ID(), events, 1, 6)
			if err == nil {
				var tokens []int32
				for _, o := range events {
					tokens = append(tokens, o.TokenIDs...)
				}
				if fmt.Sprint(tokens) != fmt.Sprint(ref.Samples[0].TokenIDs) {
					err = fmt.Errorf("request %d: tokens %v, alone %v", s.ID(), tokens,
						ref.Samples[0].TokenIDs)
				}
			}
			results <- err
		}(s)
	}
	// Give the runtime time to start the threads that blocked waits would
	// need (it hands a P on from a thread blocked in C after ~20 µs).
	time.Sleep(100 * time.Millisecond)
	liveAfter, createdAfter := osThreads(t)
	st, err := eng.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.NumWaiting < numStreams/2 {
		t.Fatalf("only %d requests wait behind the blocker: the count proves nothing", st.NumWaiting)
	}
	t.Logf("%d requests waiting; threads: %d live before, %d after; %d created before, %d after",
		st.NumWaiting, liveBefore, liveAfter, createdBefore, createdAfter)
	if liveAfter-liveBefore > 16 || createdAfter-createdBefore > 16 {
		t.Errorf("%d waiting streams took %d more live threads and %d more created threads; "+
			"want at most 16", numStreams, liveAfter-liveBefore, createdAfter-createdBefore)
	}

	if err := blocker.Abort(); err != nil {
		t.Fatal(err)
	}
	if res, _ := blocker.Collect(); res.Samples[0].FinishReason != pvllm.FinishAbort {
		t.Errorf("blocker: finish %v, want abort", res.Samples[0].FinishReason)
	}
	for i := 0; i < numStreams; i++ {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
}
