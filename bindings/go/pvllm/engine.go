package pvllm

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Engine is a loaded model with its KV cache and scheduler. All methods are
// safe for concurrent use.
//
// Two goroutines serve an engine:
//
//   - the step loop calls pvllm_step while any request is unfinished and
//     otherwise sleeps on a channel that Submit and aborts signal;
//   - the dispatcher wakes after each step, drains pvllm_poll and hands each
//     event to the Stream of its request.
//
// Neither ever waits for a consumer: a Stream queues events that its channel
// cannot take yet (see Stream), so a slow reader delays only itself.
//
// Close releases the engine; a finalizer calls it for an Engine that became
// unreachable, but call Close yourself: the model and KV pool are large.
type Engine struct {
	e *engine
}

// engine is the part the background goroutines reference, so that the
// Engine wrapper can become unreachable and be finalized.
type engine struct {
	// mu guards h: every C call holds a read lock; Close takes the write
	// lock to destroy h, so destruction never overlaps another call, as
	// pvllm_engine_destroy requires. Lock order: mu before streamsMu.
	mu sync.RWMutex
	h  *cEngine // nil once closed

	// streamsMu serialises pvllm_submit + registration against
	// pvllm_poll + routing, so that no event can be polled before its
	// request's Stream is registered.
	streamsMu sync.Mutex
	streams   map[uint64]*Stream

	wakeStep     chan struct{} // capacity 1: "there may be work"
	wakeDispatch chan struct{} // capacity 1: "there may be events"
	quit         chan struct{}
	wg           sync.WaitGroup
	closeOnce    sync.Once

	streamBuffer int

	stepErrMu sync.Mutex
	stepErr   error // the latest pvllm_step failure, for Err
}

// New loads the model described by cfg and starts the engine's goroutines.
func New(cfg Config) (*Engine, error) {
	if got := ABIVersion(); got != BuiltABIVersion {
		return nil, &Error{Status: StatusUnsupported, Message: fmt.Sprintf(
			"libpvllm has ABI version %d, this package was built for %d", got, BuiltABIVersion)}
	}
	h, err := engineCreate(&cfg)
	if err != nil {
		return nil, err
	}
	e := &engine{
		h:            h,
		streams:      make(map[uint64]*Stream),
		wakeStep:     make(chan struct{}, 1),
		wakeDispatch: make(chan struct{}, 1),
		quit:         make(chan struct{}),
		streamBuffer: cfg.StreamBuffer,
	}
	if e.streamBuffer <= 0 {
		e.streamBuffer = 64
	}
	e.wg.Add(2)
	go e.stepLoop()
	go e.dispatchLoop()
	eng := &Engine{e: e}
	runtime.SetFinalizer(eng, func(eng *Engine) { eng.e.close() })
	return eng, nil
}

// Close stops the engine's goroutines, ends every unfinished request with a
// FinishAbort event whose Err is ErrClosed, and frees the engine. It waits
// for a step in progress to end. Calling it again does nothing; every other
// method returns ErrClosed afterwards.
func (eng *Engine) Close() error {
	runtime.SetFinalizer(eng, nil)
	eng.e.close()
	return nil
}

func (e *engine) close() {
	e.closeOnce.Do(func() {
		close(e.quit)
		e.wg.Wait()
		e.drain() // deliver what the last step produced
		e.mu.Lock()
		engineDestroy(e.h)
		e.h = nil
		e.mu.Unlock()
		e.streamsMu.Lock()
		for id, s := range e.streams {
			s.closeWith(ErrClosed)
			delete(e.streams, id)
		}
		e.streamsMu.Unlock()
	})
}

// Submit queues a request and returns the Stream of its events. When ctx is
// cancelled before the request finishes, the request is aborted (its
// samples end with FinishAbort). Submit fails with an *Error for a request
// the library rejects (StatusInvalidArgument names the field) and with
// ErrClosed after Close.
func (eng *Engine) Submit(ctx context.Context, req Request) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := eng.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return nil, ErrClosed
	}
	e.streamsMu.Lock()
	id, err := submit(e.h, &req)
	if err != nil {
		e.streamsMu.Unlock()
		return nil, err
	}
	s := newStream(eng, ctx, id, req.Params.N, e.streamBuffer)
	e.streams[id] = s
	e.streamsMu.Unlock()
	signal(e.wakeStep)
	go s.pump()
	return s, nil
}

// Generate submits one prompt and waits for all its samples. On a
// cancelled ctx it returns what was generated so far with ctx.Err(); when a
// sample failed it returns the result with that sample's error.
func (eng *Engine) Generate(ctx context.Context, prompt string, params SamplingParams) (*Result, error) {
	s, err := eng.Submit(ctx, Request{Prompt: prompt, Params: params})
	if err != nil {
		return nil, err
	}
	return s.Collect()
}

// Stats returns a snapshot of the engine's counters.
func (eng *Engine) Stats() (Stats, error) {
	e := eng.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return Stats{}, ErrClosed
	}
	return getStats(e.h)
}

// Tokenize encodes text with the model's tokenizer, with BOS first when
// addBOS is set (as a text prompt is).
func (eng *Engine) Tokenize(text string, addBOS bool) ([]int32, error) {
	e := eng.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return nil, ErrClosed
	}
	return tokenize(e.h, text, addBOS)
}

// Detokenize decodes token ids into text.
func (eng *Engine) Detokenize(ids []int32) (string, error) {
	e := eng.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return "", ErrClosed
	}
	return detokenize(e.h, ids)
}

// Err returns the latest failure of a step (pvllm_step returned INTERNAL or
// OUT_OF_MEMORY; the affected requests ended with FinishError), or nil.
func (eng *Engine) Err() error {
	eng.e.stepErrMu.Lock()
	defer eng.e.stepErrMu.Unlock()
	return eng.e.stepErr
}

// abort asks the library to abort a request. NotFound (already finished)
// and ErrClosed are expected races and reported as such.
func (e *engine) abort(id uint64) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return ErrClosed
	}
	err := abort(e.h, id)
	signal(e.wakeStep) // the abort is applied by the next step
	return err
}

// signal wakes the goroutine that receives on ch without ever blocking;
// with capacity 1, signals coalesce and none is lost.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (e *engine) stepLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.quit:
			return
		case <-e.wakeStep:
		}
		for {
			select {
			case <-e.quit:
				return
			default:
			}
			e.mu.RLock()
			n, err := step(e.h)
			e.mu.RUnlock()
			signal(e.wakeDispatch)
			if err != nil {
				e.stepErrMu.Lock()
				e.stepErr = err
				e.stepErrMu.Unlock()
				// The failed requests got FinishError events; do not spin
				// if the engine keeps failing.
				time.Sleep(time.Millisecond)
			}
			if n == 0 {
				break
			}
		}
	}
}

func (e *engine) dispatchLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.quit:
			return
		case <-e.wakeDispatch:
			e.drain()
		}
	}
}

// drain polls every pending event and routes it to its Stream.
func (e *engine) drain() {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return
	}
	e.streamsMu.Lock()
	defer e.streamsMu.Unlock()
	outs, err := poll(e.h)
	if err != nil {
		// pvllm_poll fails only for NULL arguments; nothing to route.
		return
	}
	for _, o := range outs {
		s := e.streams[o.RequestID]
		if s == nil {
			continue
		}
		if s.deliver(o) {
			delete(e.streams, o.RequestID)
		}
	}
}
