package pvllm

import (
	"context"
	"runtime/cgo"
	"strings"
	"sync"
)

// waitSliceMs bounds one pvllm_wait of a Stream on a library older than 0.5
// (see Stream.poll). Waits end as soon as the request has events, and
// cancellation and Close both end in events (an abort), so the bound is
// only a backstop.
const waitSliceMs = 1000

// Stream delivers the events of one request. Events() is closed after the
// request's last event (Output.RequestFinished).
//
// The library hands each of the request's events to an output handler
// (pvllm_request.on_output) on the thread that runs the step; the handler
// copies it into the Stream's queue, which has no bound, and wakes the
// Stream's goroutine, which sends the queue on the channel (of capacity
// Config.StreamBuffer). A waiting Stream is a goroutine blocked on Go
// channels, not an OS thread blocked in C, so thousands of them cost
// little. A slow or absent reader holds back only its own request's
// delivery: the handler never blocks, so the step loop and every other
// request go on. Nothing is dropped while the request's context is live.
//
// Once the context is done the request is aborted, and from then on a full
// channel gives way: the oldest buffered event is discarded to make room.
// The final FinishAbort event therefore always arrives, the channel is
// always closed, and a consumer that stopped reading leaks nothing.
type Stream struct {
	eng *Engine // keeps the engine alive while the stream is open
	id  uint64
	n   int // samples
	ctx context.Context
	ch  chan Output

	// handle is the cgo.Handle the output handler finds the Stream by; 0
	// when the library is older than 0.5 and Stream.poll feeds the queue.
	handle cgo.Handle

	// mu guards pending: the events handed over and not yet taken by pump.
	// arrived (capacity 1) wakes pump after each handover.
	mu      sync.Mutex
	pending []Output
	arrived chan struct{}
}

func newStream(eng *Engine, ctx context.Context, n, buffer int) *Stream {
	return &Stream{
		eng:     eng,
		n:       n,
		ctx:     ctx,
		ch:      make(chan Output, buffer),
		arrived: make(chan struct{}, 1),
	}
}

// ID returns the library's request id.
func (s *Stream) ID() uint64 { return s.id }

// Events returns the channel of the request's events, closed after its last
// event.
func (s *Stream) Events() <-chan Output { return s.ch }

// Abort asks the engine to abort the request; its samples end with
// FinishAbort events. Aborting a finished request returns an error with
// StatusNotFound.
func (s *Stream) Abort() error { return s.eng.e.abort(s.id) }

// deliver queues events the library handed over and wakes pump. It runs
// inside pvllm_step or pvllm_submit (the output handler), so it only takes
// the Stream's own lock, briefly, and never blocks: Submit may hold the
// engine's locks around the very call it runs in.
func (s *Stream) deliver(outs ...Output) {
	if s.eng.e.isClosing() {
		for i := range outs {
			if outs[i].FinishReason == FinishAbort {
				outs[i].Err = ErrClosed
			}
		}
	}
	s.mu.Lock()
	s.pending = append(s.pending, outs...)
	s.mu.Unlock()
	signal(s.arrived)
}

// take returns the events handed over since the last take; last reports
// that the request's last event is among them.
func (s *Stream) take() (outs []Output, last bool) {
	s.mu.Lock()
	outs, s.pending = s.pending, nil
	s.mu.Unlock()
	for i := range outs {
		last = last || outs[i].RequestFinished
	}
	return outs, last
}

// pump moves the request's events from the queue into the channel and
// turns a cancelled context into an abort. It is the only sender on s.ch.
// It takes every event as soon as it is handed over, reader or not, so
// that Close, which waits for each request's last event, never waits for a
// reader.
func (s *Stream) pump() {
	defer close(s.ch)
	e := s.eng.e
	var queue []Output
	inLibrary := true // the request's last event has not been handed over yet
	ctxDone := s.ctx.Done()
	cancelled := false
	for {
		if inLibrary {
			outs, last := s.take()
			queue = append(queue, outs...)
			if last {
				inLibrary = false
				s.done()
			}
		}
		if cancelled {
			for _, o := range queue {
				s.sendDroppingOldest(o)
			}
			queue = nil
		}
		if !inLibrary && len(queue) == 0 {
			return
		}
		var send chan<- Output
		var next Output
		if len(queue) > 0 {
			send, next = s.ch, queue[0]
		}
		var arrived <-chan struct{}
		if inLibrary {
			arrived = s.arrived
		}
		select {
		case send <- next:
			queue = queue[1:]
		case <-arrived:
		case <-ctxDone:
			cancelled, ctxDone = true, nil
			if inLibrary {
				_ = e.abort(s.id) // NotFound: it finished meanwhile
			}
		}
	}
}

// done lets go of the request once its last event has been handed over:
// the library calls the handler no more.
func (s *Stream) done() {
	if s.handle != 0 {
		s.handle.Delete()
	}
	e := s.eng.e
	e.forget(s.id)
	e.pumps.Done()
}

// poll feeds the queue from the library for a library older than 0.5,
// which has no output handlers: it waits in pvllm_wait (holding an OS
// thread meanwhile) and takes the events with pvllm_poll_request, until
// the last one.
func (s *Stream) poll() {
	e := s.eng.e
	for {
		outs, last := s.fetch(e)
		if len(outs) > 0 {
			s.deliver(outs...)
		}
		if last {
			return
		}
	}
}

func (s *Stream) fetch(e *engine) (outs []Output, last bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		// Close destroys the engine only after every Stream's last event,
		// so this is a backstop, not a path.
		return []Output{{RequestID: s.id, FinishReason: FinishAbort, Err: ErrClosed,
			RequestFinished: true}}, true
	}
	ready, err := wait(e.h, s.id, waitSliceMs)
	if err == nil && ready {
		outs, err = pollRequest(e.h, s.id)
	}
	if err != nil {
		// The library lost track of the request (nothing else takes its
		// events, so this would be a bug): end the stream with the reason.
		return []Output{{RequestID: s.id, FinishReason: FinishError, Err: err,
			RequestFinished: true}}, true
	}
	for i := range outs {
		last = last || outs[i].RequestFinished
	}
	return outs, last
}

// sendDroppingOldest sends without blocking, discarding the oldest buffered
// event when the channel is full. Only pump sends, so after one receive
// there is room.
func (s *Stream) sendDroppingOldest(o Output) {
	for {
		select {
		case s.ch <- o:
			return
		default:
		}
		select {
		case <-s.ch:
		default:
		}
	}
}

// Sample is one finished sample of a request.
type Sample struct {
	Index        int
	Text         string
	TokenIDs     []int32
	FinishReason FinishReason
	Logprobs     []TokenLogprobs // nil unless requested
	Err          error           // set with FinishError (or ErrClosed)
	Score        float64         // beam search: the hypothesis' score
}

// Result is a finished request: one Sample per sample index.
type Result struct {
	RequestID      uint64
	Samples        []Sample
	PromptLogprobs []TokenLogprobs // when the request asked for them
	Metrics        *RequestMetrics // from its last event (libpvllm 0.5)
}

// Text returns the first sample's text.
func (r *Result) Text() string {
	if len(r.Samples) == 0 {
		return ""
	}
	return r.Samples[0].Text
}

// Collect reads the stream to its end and assembles the samples. It returns
// the stream context's error when the request was aborted because of it,
// otherwise the first sample's error, if any.
func (s *Stream) Collect() (*Result, error) {
	res := &Result{RequestID: s.id, Samples: make([]Sample, s.n)}
	texts := make([]strings.Builder, len(res.Samples))
	for o := range s.ch {
		if o.Index < 0 || o.Index >= len(res.Samples) {
			continue
		}
		smp := &res.Samples[o.Index]
		texts[o.Index].WriteString(o.Text)
		smp.TokenIDs = append(smp.TokenIDs, o.TokenIDs...)
		smp.Logprobs = append(smp.Logprobs, o.Logprobs...)
		if o.PromptLogprobs != nil {
			res.PromptLogprobs = o.PromptLogprobs
		}
		if o.Metrics != nil {
			res.Metrics = o.Metrics
		}
		if o.Score != 0 {
			smp.Score = o.Score
		}
		if o.FinishReason != FinishNone {
			smp.FinishReason = o.FinishReason
			smp.Err = o.Err
		}
	}
	var err error
	for i := range res.Samples {
		res.Samples[i].Index = i
		res.Samples[i].Text = texts[i].String()
		if err == nil {
			err = res.Samples[i].Err
		}
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		for _, smp := range res.Samples {
			if smp.FinishReason == FinishAbort {
				return res, ctxErr
			}
		}
	}
	return res, err
}
