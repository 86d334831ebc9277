package pvllm

import (
	"context"
	"strings"
	"sync"
)

// Stream delivers the events of one request. Events() is closed after the
// last sample's final event.
//
// Delivery policy: the dispatcher appends events to the stream's own queue
// and never blocks; a per-stream goroutine moves them into the channel (of
// capacity Config.StreamBuffer). So a slow consumer never stalls the step
// loop or other requests; its backlog is held in Go memory and is bounded
// by the request itself (at most max_tokens events per sample, plus the
// final one). Nothing is dropped while the request's context is live.
//
// Once the context is done the request is aborted, and from then on a full
// channel gives way: the oldest buffered event is discarded to make room.
// The final FinishAbort event therefore always arrives, the channel is
// always closed, and a consumer that stopped reading leaks nothing.
type Stream struct {
	eng *Engine // keeps the engine alive while the stream is open
	id  uint64
	ctx context.Context
	ch  chan Output

	mu        sync.Mutex
	queue     []Output
	finished  []bool // per sample
	remaining int
	done      bool          // every sample has its final event queued
	wake      chan struct{} // capacity 1
}

func newStream(eng *Engine, ctx context.Context, id uint64, n, buffer int) *Stream {
	return &Stream{
		eng:       eng,
		id:        id,
		ctx:       ctx,
		ch:        make(chan Output, buffer),
		finished:  make([]bool, n),
		remaining: n,
		wake:      make(chan struct{}, 1),
	}
}

// ID returns the library's request id.
func (s *Stream) ID() uint64 { return s.id }

// Events returns the channel of the request's events, closed after every
// sample finished.
func (s *Stream) Events() <-chan Output { return s.ch }

// Abort asks the engine to abort the request; its samples end with
// FinishAbort events. Aborting a finished request returns an error with
// StatusNotFound.
func (s *Stream) Abort() error { return s.eng.e.abort(s.id) }

// deliver queues one event (called by the dispatcher) and reports whether
// it was the request's last.
func (s *Stream) deliver(o Output) bool {
	s.mu.Lock()
	s.queue = append(s.queue, o)
	if o.FinishReason != FinishNone && o.Index >= 0 && o.Index < len(s.finished) &&
		!s.finished[o.Index] {
		s.finished[o.Index] = true
		s.remaining--
	}
	s.done = s.remaining == 0
	done := s.done
	s.mu.Unlock()
	signal(s.wake)
	return done
}

// closeWith ends every unfinished sample with a FinishAbort event carrying
// err (the engine closed under the request).
func (s *Stream) closeWith(err error) {
	s.mu.Lock()
	for i, f := range s.finished {
		if !f {
			s.finished[i] = true
			s.queue = append(s.queue, Output{RequestID: s.id, Index: i,
				FinishReason: FinishAbort, Err: err})
		}
	}
	s.remaining = 0
	s.done = true
	s.mu.Unlock()
	signal(s.wake)
}

// pump moves queued events into the channel and turns a cancelled context
// into an abort. It is the only sender on s.ch.
func (s *Stream) pump() {
	defer close(s.ch)
	ctxDone := s.ctx.Done()
	cancelled := false
	cancel := func() {
		cancelled = true
		ctxDone = nil
		_ = s.eng.e.abort(s.id) // NotFound: it finished meanwhile
	}
	for {
		s.mu.Lock()
		batch, done := s.queue, s.done
		s.queue = nil
		s.mu.Unlock()
		for _, o := range batch {
			if !cancelled {
				select {
				case s.ch <- o:
					continue
				case <-ctxDone:
					cancel()
				}
			}
			s.sendDroppingOldest(o)
		}
		if done {
			return
		}
		select {
		case <-s.wake:
		case <-ctxDone:
			cancel()
		}
	}
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
}

// Result is a finished request: one Sample per sample index.
type Result struct {
	RequestID uint64
	Samples   []Sample
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
	res := &Result{RequestID: s.id, Samples: make([]Sample, len(s.finished))}
	texts := make([]strings.Builder, len(res.Samples))
	for o := range s.ch {
		if o.Index < 0 || o.Index >= len(res.Samples) {
			continue
		}
		smp := &res.Samples[o.Index]
		texts[o.Index].WriteString(o.Text)
		smp.TokenIDs = append(smp.TokenIDs, o.TokenIDs...)
		smp.Logprobs = append(smp.Logprobs, o.Logprobs...)
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
