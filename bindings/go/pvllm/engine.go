package pvllm

import (
	"context"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
)

// Engine is a loaded model with its KV cache and scheduler. All methods are
// safe for concurrent use.
//
// One goroutine, the step loop, calls pvllm_step while any request is
// unfinished and otherwise sleeps on a channel that Submit and aborts
// signal. The library hands each event to its request's output handler
// inside the step, and the handler queues it on that request's Stream (see
// Stream): the library routes every event to its request, so the package
// has no dispatcher, and no Stream holds an OS thread while it waits.
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
	// pvllm_engine_destroy requires. Lock order: streamsMu before mu, and a
	// Stream's mu after both (the output handler takes it inside submit and
	// step calls).
	mu sync.RWMutex
	h  *cEngine // nil once closed

	// streamsMu guards streams and closing. Submit checks closing and
	// registers its Stream under it, so every request Close does not refuse
	// is in streams when Close aborts them.
	streamsMu sync.Mutex
	streams   map[uint64]*Stream // requests whose last event has not been handed over
	closing   bool
	closingCh chan struct{} // closed when Close starts

	// handlers: the library calls output handlers (0.5 and later); without
	// them each Stream waits in pvllm_wait (Stream.poll).
	handlers bool

	pumps     sync.WaitGroup // Streams whose last event has not been handed over
	wakeStep  chan struct{}  // capacity 1: "there may be work"
	quit      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once

	streamBuffer int

	stepErrMu sync.Mutex
	stepErr   error // the latest pvllm_step failure, for Err
}

// New loads the model described by cfg and starts the engine's step loop.
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
		closingCh:    make(chan struct{}),
		wakeStep:     make(chan struct{}, 1),
		quit:         make(chan struct{}),
		loopDone:     make(chan struct{}),
		streamBuffer: cfg.StreamBuffer,
		handlers:     useOutputHandlers(),
	}
	if e.streamBuffer <= 0 {
		e.streamBuffer = 64
	}
	go e.stepLoop()
	eng := &Engine{e: e}
	runtime.SetFinalizer(eng, func(eng *Engine) { eng.e.close() })
	return eng, nil
}

// Close aborts every unfinished request (their samples end with FinishAbort
// events whose Err is ErrClosed), waits until every Stream has taken its
// request's last event from the library, stops the step loop and frees the
// engine. Streams then deliver what they hold and close their channels.
// Calling it again does nothing; every other method returns ErrClosed
// afterwards.
func (eng *Engine) Close() error {
	runtime.SetFinalizer(eng, nil)
	eng.e.close()
	return nil
}

func (e *engine) close() {
	e.closeOnce.Do(func() {
		e.streamsMu.Lock()
		e.closing = true
		close(e.closingCh)
		live := make([]uint64, 0, len(e.streams))
		for id := range e.streams {
			live = append(live, id)
		}
		e.streamsMu.Unlock()
		for _, id := range live {
			_ = e.abort(id) // NotFound: it finished meanwhile
		}
		// The step loop applies the aborts; each Stream takes its last
		// event as it is handed over, without waiting for its reader.
		e.pumps.Wait()
		close(e.quit)
		<-e.loopDone
		e.mu.Lock()
		engineDestroy(e.h)
		e.h = nil
		e.mu.Unlock()
	})
}

func (e *engine) isClosing() bool {
	select {
	case <-e.closingCh:
		return true
	default:
		return false
	}
}

// forget drops a Stream whose last event was handed over.
func (e *engine) forget(id uint64) {
	e.streamsMu.Lock()
	delete(e.streams, id)
	e.streamsMu.Unlock()
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
	e.streamsMu.Lock()
	defer e.streamsMu.Unlock()
	if e.closing {
		return nil, ErrClosed
	}
	s := newStream(eng, ctx, req.Params.N, e.streamBuffer)
	if e.handlers {
		s.handle = cgo.NewHandle(s)
	}
	// The handler may run before submit returns (for events a step on
	// another goroutine made meanwhile): it only takes the Stream's lock.
	e.mu.RLock()
	id, err := submit(e.h, &req, s.handle)
	e.mu.RUnlock()
	if err != nil {
		if s.handle != 0 {
			s.handle.Delete() // a failed submit registers no handler
		}
		return nil, err
	}
	s.id = id
	e.streams[id] = s
	e.pumps.Add(1)
	signal(e.wakeStep)
	if !e.handlers {
		go s.poll()
	}
	go s.pump()
	return s, nil
}

// useOutputHandlers says whether engines deliver through output handlers:
// the library has them (0.5) and no test asked for the older path.
func useOutputHandlers() bool {
	return VersionNumber() >= versionOutputHandlers && !forceWaitDelivery
}

// forceWaitDelivery makes new engines deliver as with a library older than
// 0.5 (pvllm_wait per Stream); only tests set it.
var forceWaitDelivery bool

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
	defer close(e.loopDone)
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
