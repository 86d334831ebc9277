package pvllm

import (
	"context"
	"strings"
)

// waitSliceMs bounds one pvllm_wait of a Stream. Waits end as soon as the
// request has events, and cancellation and Close both end in events (an
// abort), so the bound is only a backstop.
const waitSliceMs = 1000

// Stream delivers the events of one request. Events() is closed after the
// request's last event (Output.RequestFinished).
//
// The request is submitted for per-request delivery, and a goroutine per
// Stream reads its events from the library (pvllm_wait, then
// pvllm_poll_request) and sends them on the channel (of capacity
// Config.StreamBuffer). A slow or absent reader holds back only its own
// request: its events wait in the library, which keeps each request's apart,
// while the step loop and every other request go on. Nothing is dropped
// while the request's context is live.
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
	// fetched is closed once the last event has left the library.
	fetched chan struct{}
}

func newStream(eng *Engine, ctx context.Context, id uint64, n, buffer int) *Stream {
	return &Stream{
		eng:     eng,
		id:      id,
		n:       n,
		ctx:     ctx,
		ch:      make(chan Output, buffer),
		fetched: make(chan struct{}),
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

// watch turns a cancelled context into an abort, which ends the request
// with FinishAbort events that pump then delivers.
func (s *Stream) watch() {
	select {
	case <-s.ctx.Done():
		_ = s.eng.e.abort(s.id) // NotFound: it finished meanwhile
	case <-s.fetched:
	}
}

// pump moves the request's events from the library into the channel. It is
// the only sender on s.ch.
func (s *Stream) pump() {
	defer close(s.ch)
	e := s.eng.e
	var queue []Output
	inLibrary := true // the request's last event has not been fetched yet
	ctxDone := s.ctx.Done()
	cancelled := false
	for {
		// Fetch when there is nothing to send, and during Close without
		// waiting for the reader: Close waits for every last event.
		if inLibrary && (len(queue) == 0 || e.isClosing()) {
			outs, last := s.fetch()
			queue = append(queue, outs...)
			if last {
				inLibrary = false
				close(s.fetched)
				e.forget(s.id)
				e.pumps.Done()
			}
			continue
		}
		if len(queue) == 0 {
			return
		}
		if cancelled {
			s.sendDroppingOldest(queue[0])
			queue = queue[1:]
			continue
		}
		var closing <-chan struct{}
		if inLibrary {
			closing = e.closingCh
		}
		select {
		case s.ch <- queue[0]:
			queue = queue[1:]
		case <-ctxDone:
			cancelled, ctxDone = true, nil
		case <-closing:
		}
	}
}

// fetch waits for the request's next events and takes them from the
// library; last reports that the request's last event is among them.
func (s *Stream) fetch() (outs []Output, last bool) {
	e := s.eng.e
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
	closing := e.isClosing()
	for i := range outs {
		if closing && outs[i].FinishReason == FinishAbort {
			outs[i].Err = ErrClosed
		}
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
