//! An iterator that drives the engine and yields output events.
use std::collections::{HashMap, VecDeque};

use crate::engine::Engine;
use crate::error::Result;
use crate::output::{Output, RequestId};
use crate::request::Request;

/// Steps an [`Engine`] and yields its output events until every request
/// submitted through the stream has finished (every sample has had its
/// final event).
///
/// Polling drains the engine's whole queue, so events of requests submitted
/// elsewhere are yielded too — check [`Output::request_id`] when several
/// producers share an engine. A step that fails is yielded as an `Err`, after
/// which the stream ends. Dropping a stream before it ends aborts its
/// unfinished requests.
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
    /// Samples per request that have not had their final event yet.
    unfinished: HashMap<RequestId, u32>,
    queue: VecDeque<Output>,
    failed: bool,
}

impl<'e> OutputStream<'e> {
    pub(crate) fn new(engine: &'e Engine) -> Self {
        OutputStream {
            engine,
            ids: Vec::new(),
            unfinished: HashMap::new(),
            queue: VecDeque::new(),
            failed: false,
        }
    }

    /// Submits one more request and follows it. On failure the stream's
    /// other requests are left as they are.
    pub fn submit(&mut self, request: &Request) -> Result<RequestId> {
        let id = self.engine.submit(request)?;
        self.ids.push(id);
        self.unfinished.insert(id, request.sampling.n.max(1));
        Ok(id)
    }

    /// The ids of the requests this stream follows, in submission order.
    pub fn request_ids(&self) -> &[RequestId] {
        &self.ids
    }

    /// Whether every followed request has finished.
    pub fn is_finished(&self) -> bool {
        self.unfinished.is_empty()
    }

    /// The engine this stream drives.
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    fn note(&mut self, event: &Output) {
        if !event.is_finished() {
            return;
        }
        if let Some(samples) = self.unfinished.get_mut(&event.request_id) {
            *samples = samples.saturating_sub(1);
            if *samples == 0 {
                self.unfinished.remove(&event.request_id);
            }
        }
    }
}

impl Iterator for OutputStream<'_> {
    type Item = Result<Output>;

    fn next(&mut self) -> Option<Result<Output>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(Ok(event));
            }
            if self.failed || self.unfinished.is_empty() {
                return None;
            }
            let num_unfinished = match self.engine.step() {
                Ok(n) => n,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            let events = match self.engine.poll() {
                Ok(events) => events,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            if events.is_empty() && num_unfinished == 0 {
                // Nothing left to run, yet some of our requests never
                // reported their end: another poller took their events.
                // Stop rather than step an idle engine forever.
                self.failed = true;
                return None;
            }
            for event in &events {
                self.note(event);
            }
            self.queue.extend(events);
        }
    }
}

impl Drop for OutputStream<'_> {
    fn drop(&mut self) {
        for id in self.unfinished.keys() {
            // An id that finished meanwhile gives NotFound: nothing to do.
            let _ = self.engine.abort(*id);
        }
    }
}
