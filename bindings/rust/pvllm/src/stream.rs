//! An iterator that drives the engine and yields its requests' events.
use std::collections::VecDeque;

use crate::engine::Engine;
use crate::error::{Error, Result, Status};
use crate::output::{Output, RequestId};
use crate::request::{Delivery, Request};

/// Yields the output events of the requests submitted through it, stepping
/// the [`Engine`] when none is waiting, until each request's last event
/// ([`Output::request_finished`]).
///
/// The requests are submitted with [`Delivery::PerRequest`] and the stream
/// takes their events from the library with
/// [`Engine::poll_request`]: it sees nothing of other requests, and nothing
/// else takes its events — neither [`Engine::poll`] nor another stream, on
/// this thread or another. Several streams may share an engine (each steps
/// it when it has nothing to yield; steps are serialised by the library),
/// and a stream that is not read holds back only its own requests' events.
///
/// A failed step is yielded as an `Err`, after which the stream ends.
/// Dropping a stream before it ends aborts its unfinished requests and
/// drops their remaining events ([`Engine::detach`]).
///
/// ```no_run
/// # fn main() -> pvllm::Result<()> {
/// use std::io::Write;
/// use pvllm::{Engine, EngineConfig, Request, SamplingParams};
///
/// let engine = Engine::new(&EngineConfig::new("models/llama"))?;
/// let request = Request::text("Once upon a time").with_sampling(SamplingParams::greedy(64));
/// for event in engine.stream(&[request])? {
///     print!("{}", event?.text);
///     std::io::stdout().flush().ok();
/// }
/// # Ok(()) }
/// ```
pub struct OutputStream<'e> {
    engine: &'e Engine,
    ids: Vec<RequestId>,
    /// Requests whose last event has not been taken yet, in submission order.
    open: Vec<RequestId>,
    queue: VecDeque<Output>,
    failed: bool,
}

impl<'e> OutputStream<'e> {
    pub(crate) fn new(engine: &'e Engine) -> Self {
        OutputStream {
            engine,
            ids: Vec::new(),
            open: Vec::new(),
            queue: VecDeque::new(),
            failed: false,
        }
    }

    /// Submits one more request and follows it. On failure the stream's
    /// other requests are left as they are.
    pub fn submit(&mut self, request: &Request) -> Result<RequestId> {
        let id = self.engine.submit_with(request, Delivery::PerRequest)?;
        self.ids.push(id);
        self.open.push(id);
        Ok(id)
    }

    /// The ids of the requests this stream follows, in submission order.
    pub fn request_ids(&self) -> &[RequestId] {
        &self.ids
    }

    /// Whether every followed request has delivered its last event to this
    /// stream (some may still wait in the stream's queue).
    pub fn is_finished(&self) -> bool {
        self.open.is_empty()
    }

    /// The engine this stream drives.
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// Moves the events the library holds for the open requests into the
    /// queue.
    fn take_pending(&mut self) -> Result<()> {
        let engine = self.engine;
        let queue = &mut self.queue;
        let mut result = Ok(());
        self.open.retain(|&id| {
            if result.is_err() {
                return true;
            }
            match engine.poll_request(id) {
                Ok(events) => {
                    let over = events.iter().any(|e| e.request_finished);
                    queue.extend(events);
                    !over
                }
                Err(e) => {
                    result = Err(if e.status() == Status::NotFound {
                        Error::new(
                            Status::NotFound,
                            format!(
                                "request {} ended without its last event reaching this stream \
                                 (another consumer took or detached it): {}",
                                id,
                                e.message()
                            ),
                        )
                    } else {
                        e
                    });
                    true
                }
            }
        });
        result
    }
}

impl Iterator for OutputStream<'_> {
    type Item = Result<Output>;

    fn next(&mut self) -> Option<Result<Output>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(Ok(event));
            }
            if self.failed || self.open.is_empty() {
                return None;
            }
            // What another thread's step made comes first; step only when
            // nothing is waiting.
            let stepped = match self.take_pending() {
                Ok(()) if !self.queue.is_empty() || self.open.is_empty() => continue,
                Ok(()) => self.engine.step().map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = stepped.and_then(|()| self.take_pending()) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

impl Drop for OutputStream<'_> {
    fn drop(&mut self) {
        for &id in &self.open {
            // NotFound: it finished meanwhile, or its events are gone already.
            let _ = self.engine.abort(id);
            let _ = self.engine.detach(id);
        }
    }
}
