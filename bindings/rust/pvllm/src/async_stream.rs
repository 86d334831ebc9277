//! One request's events as an asynchronous stream, fed by the library's
//! per-request output handler (`pvllm_request.on_output`, since 0.5). It
//! needs no async runtime: any executor can poll it.
use std::collections::VecDeque;
use std::future::Future;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use pvllm_sys as sys;

use crate::engine::Engine;
use crate::error::Result;
use crate::output::{Output, RequestId};

/// What one request's handler feeds and its stream reads.
pub(crate) struct HandlerShared {
    events: Mutex<VecDeque<Output>>,
    waker: Mutex<Option<Waker>>,
    /// The last event arrived: the library never calls the handler again.
    done: AtomicBool,
}

/// The engine's side of its async streams: who is stepping, the streams
/// waiting for that step to end, and the handlers the library may still
/// call (each is freed once its last event came, or with the engine).
#[derive(Default)]
pub(crate) struct AsyncState {
    steppers: AtomicUsize,
    parked: Mutex<Vec<Waker>>,
    live: Mutex<Vec<Arc<HandlerShared>>>,
}

/// A poisoned lock only means a panic elsewhere; the data is still whole.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AsyncState {
    /// Runs one step, marking it for the streams that find nothing to read:
    /// they wait for it instead of stepping too, and are woken when it ends.
    pub(crate) fn stepping<T>(&self, step: impl FnOnce() -> T) -> T {
        self.steppers.fetch_add(1, Ordering::SeqCst);
        let result = step();
        self.steppers.fetch_sub(1, Ordering::SeqCst);
        let parked = std::mem::take(&mut *lock(&self.parked));
        for waker in parked {
            waker.wake();
        }
        result
    }

    /// A new handler the library may call until its last event.
    fn register(&self) -> Arc<HandlerShared> {
        let shared = Arc::new(HandlerShared {
            events: Mutex::new(VecDeque::new()),
            waker: Mutex::new(None),
            done: AtomicBool::new(false),
        });
        let mut live = lock(&self.live);
        live.retain(|h| !h.done.load(Ordering::Acquire));
        live.push(Arc::clone(&shared));
        shared
    }

    fn unregister(&self, shared: &Arc<HandlerShared>) {
        lock(&self.live).retain(|h| !Arc::ptr_eq(h, shared));
    }
}

/// The library's handler: copies the event and wakes the stream. Runs on
/// the thread inside pvllm_step (or pvllm_submit), one call at a time per
/// request; nothing may unwind into the library.
unsafe extern "C" fn on_output(output: *const sys::pvllm_output, user_data: *mut c_void) {
    // SAFETY: user_data is the HandlerShared the engine keeps alive until
    // `done` is set, which is the last thing this does.
    let shared = &*(user_data as *const HandlerShared);
    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        if let Some(raw) = output.as_ref() {
            let event = Output::from_raw(raw);
            let last = event.request_finished;
            lock(&shared.events).push_back(event);
            if let Some(waker) = lock(&shared.waker).take() {
                waker.wake();
            }
            if last {
                shared.done.store(true, Ordering::Release);
            }
        }
    }));
}

/// One request's output events as an asynchronous stream, from
/// [`Engine::stream_async`]. Await [`next`](Self::next) until it gives
/// `None`, after the request's last event; with the crate's `futures`
/// feature it is also a `futures::Stream`.
///
/// The library hands the request's events to this stream's handler as
/// steps make them; nothing else can take them. When no event is waiting
/// and no thread is stepping the engine, polling steps it once on the
/// polling thread (a step takes milliseconds: on a multi-threaded executor,
/// either accept that or keep a thread stepping the engine, and the streams
/// then only wait and are woken). A failed step is yielded as an `Err`,
/// after which the stream ends. Dropping the stream before the end aborts
/// the request.
///
/// ```no_run
/// # fn main() -> pvllm::Result<()> {
/// # async fn run(engine: &pvllm::Engine) -> pvllm::Result<()> {
/// use pvllm::{Request, SamplingParams};
///
/// let request = Request::text("Once upon a time").with_sampling(SamplingParams::greedy(64));
/// let mut stream = engine.stream_async(&request)?;
/// while let Some(event) = stream.next().await {
///     print!("{}", event?.text);
/// }
/// # Ok(()) }
/// # Ok(()) }
/// ```
pub struct AsyncOutputStream<'e> {
    engine: &'e Engine,
    id: RequestId,
    shared: Arc<HandlerShared>,
    ended: bool,
}

impl<'e> AsyncOutputStream<'e> {
    /// The request's id.
    pub fn request_id(&self) -> RequestId {
        self.id
    }

    /// Whether the request's last event has been yielded.
    pub fn is_finished(&self) -> bool {
        self.ended
    }

    /// The next event, `None` after the last.
    pub fn next(&mut self) -> Next<'_, 'e> {
        Next { stream: self }
    }

    /// Polls for the next event (the shape of `futures::Stream::poll_next`).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Output>>> {
        let state = self.engine.async_state();
        loop {
            if let Some(event) = lock(&self.shared.events).pop_front() {
                self.ended |= event.request_finished;
                return Poll::Ready(Some(Ok(event)));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            *lock(&self.shared.waker) = Some(cx.waker().clone());
            if !lock(&self.shared.events).is_empty() {
                continue;
            }
            if state.steppers.load(Ordering::SeqCst) > 0 {
                // Parked before the check: a step ending after it wakes us.
                lock(&state.parked).push(cx.waker().clone());
                if state.steppers.load(Ordering::SeqCst) > 0 {
                    return Poll::Pending;
                }
                continue;
            }
            if let Err(e) = self.engine.step() {
                self.ended = true;
                return Poll::Ready(Some(Err(e)));
            }
        }
    }
}

impl Drop for AsyncOutputStream<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // NotFound: it finished meanwhile. Its last event still goes to
            // the handler, which the engine keeps until then.
            let _ = self.engine.abort(self.id);
        }
    }
}

/// With the `futures` feature, the stream is a `futures::Stream` (it is
/// `Unpin`), for `StreamExt` and the executors that take streams.
#[cfg(feature = "futures")]
impl futures_core::Stream for AsyncOutputStream<'_> {
    type Item = Result<Output>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Output>>> {
        AsyncOutputStream::poll_next(&mut self, cx)
    }
}

#[cfg(feature = "futures")]
impl futures_core::FusedStream for AsyncOutputStream<'_> {
    fn is_terminated(&self) -> bool {
        self.ended && lock(&self.shared.events).is_empty()
    }
}

/// The future of [`AsyncOutputStream::next`].
pub struct Next<'s, 'e> {
    stream: &'s mut AsyncOutputStream<'e>,
}

impl Future for Next<'_, '_> {
    type Output = Option<Result<Output>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.stream.poll_next(cx)
    }
}

impl Engine {
    /// Submits a request whose events go to the returned stream as the
    /// engine steps (see [`AsyncOutputStream`]). Fails as
    /// [`submit`](Self::submit) does; a library older than 0.5 cannot hand
    /// events to a handler and is refused at [`Engine::new`].
    pub fn stream_async(&self, request: &crate::Request) -> Result<AsyncOutputStream<'_>> {
        let state = self.async_state();
        let shared = state.register();
        let user_data = Arc::as_ptr(&shared) as *mut c_void;
        match self.submit_handled(request, on_output, user_data) {
            Ok(id) => Ok(AsyncOutputStream {
                engine: self,
                id,
                shared,
                ended: false,
            }),
            Err(e) => {
                state.unregister(&shared);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::lock;
    use crate::{Engine, EngineConfig, Request, SamplingParams};

    fn engine() -> Engine {
        let config = EngineConfig::random_weights("tiny")
            .num_threads(1)
            .kv_cache_bytes(8 << 20);
        Engine::new(&config).expect("a random-weights engine")
    }

    fn request(max_tokens: u32) -> Request {
        Request::tokens(vec![1, 5, 6, 7]).with_sampling(SamplingParams {
            ignore_eos: true,
            ..SamplingParams::greedy(max_tokens)
        })
    }

    /// A handler whose request is unfinished lives as long as the engine
    /// (the library may still call it), and goes with it.
    #[test]
    fn an_unfinished_handler_is_freed_with_the_engine() {
        let engine = engine();
        let mut stream = engine.stream_async(&request(50)).unwrap();
        let first = futures_executor::block_on(stream.next()).unwrap().unwrap();
        assert!(!first.request_finished);
        let handler = Arc::downgrade(&stream.shared);
        drop(stream);
        assert!(
            handler.upgrade().is_some(),
            "freed while the library may call it"
        );
        drop(engine);
        assert!(handler.upgrade().is_none(), "the engine did not free it");
    }

    /// A finished request's handler is let go at the next registration.
    #[test]
    fn a_finished_handler_is_let_go() {
        let engine = engine();
        let mut stream = engine.stream_async(&request(3)).unwrap();
        while let Some(event) = futures_executor::block_on(stream.next()) {
            event.unwrap();
        }
        let handler = Arc::downgrade(&stream.shared);
        drop(stream);
        let _next = engine.stream_async(&request(1)).unwrap();
        assert!(handler.upgrade().is_none(), "a finished handler was kept");
        assert_eq!(lock(&engine.async_state().live).len(), 1);
    }
}
