//! The engine handle and its calls.
use std::any::Any;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::time::Duration;

use pvllm_sys as sys;

use crate::async_stream::AsyncState;
use crate::config::{nul_error, EngineConfig};
use crate::error::{check, read_ids, read_text, Error, Result, Status};
use crate::output::{Completion, FinishReason, Output, RequestId, TokenLogprobs};
use crate::request::{Delivery, Prompt, Request, SamplingParams, TokenId};
use crate::stream::OutputStream;

/// A loaded model with its KV-cache pool, scheduler and output queues.
///
/// Submit requests from any thread, drive the engine with [`step`](Self::step)
/// and collect events with [`poll`](Self::poll) (every shared request's) or
/// [`poll_request`](Self::poll_request) and [`wait`](Self::wait) (one
/// request's) — or let an [`OutputStream`] or [`generate`](Self::generate)
/// do the loop. The library routes each event to its request, so any number
/// of consumers, one per request, can share an engine. Dropping the engine
/// frees everything; pending outputs are dropped.
pub struct Engine {
    handle: NonNull<sys::pvllm_engine>,
    async_state: AsyncState,
}

// SAFETY (Send): the engine is a heap object with no tie to the thread that
// created it — no thread-local state, and error messages come back through
// the per-call error out-parameter — so it may be used and destroyed on
// another thread.
unsafe impl Send for Engine {}

// SAFETY (Sync): every method takes `&self` and maps to a call the header
// declares safe to make concurrently: submit, abort, detach, poll,
// poll_request, wait, get_stats, tokenize and detokenize are thread-safe,
// also while another thread is inside pvllm_step (or blocked in pvllm_wait);
// pvllm_step itself serialises concurrent calls
// internally ("only one thread may step an engine at a time (concurrent calls
// are serialised)"), so two threads stepping through `&Engine` wait for each
// other instead of racing. The one call that must not overlap anything,
// pvllm_engine_destroy, runs only in `Drop`, which has exclusive ownership,
// so no `wait` can still be blocked in the library when it runs.
// Hence `Arc<Engine>` can be shared by a stepping thread and any number of
// submitting/polling threads.
unsafe impl Sync for Engine {}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: the handle came from pvllm_engine_create and `drop` has
        // the only reference left.
        unsafe { sys::pvllm_engine_destroy(self.handle.as_ptr()) }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("handle", &self.handle)
            .finish()
    }
}

/// A snapshot of the engine's counters, taken after the latest step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Sequences in the running set.
    pub num_running: i32,
    /// Sequences waiting, including just submitted ones.
    pub num_waiting: i32,
    /// Blocks in the KV pool.
    pub num_blocks_total: i32,
    /// Blocks held by sequences.
    pub num_blocks_used: i32,
    /// Free blocks.
    pub num_blocks_free: i32,
    /// Unused blocks that still hold reusable prefix K/V.
    pub num_blocks_cached: i32,
    /// Used blocks / total blocks.
    pub kv_utilization: f32,
    /// KV slots reserved by sequences but not holding a token yet.
    pub reserved_unused_slots: i64,
    /// Hit blocks / looked-up blocks.
    pub prefix_cache_hit_rate: f32,
    /// Prefix-cache lookups that found their block.
    pub prefix_cache_hits: i64,
    /// Prefix-cache lookups.
    pub prefix_cache_queries: i64,
    /// Sequences preempted (their blocks freed, recomputed later).
    pub num_preemptions: i64,
    /// Prefill tokens fed to the model.
    pub num_prompt_tokens_processed: i64,
    /// Tokens sampled.
    pub num_generation_tokens: i64,
    /// Prefill skipped thanks to the prefix cache.
    pub num_cached_prompt_tokens: i64,
    /// Steps run.
    pub num_steps: i64,
    /// Requests finished, whatever the reason.
    pub num_requests_finished: i64,
    /// Slots holding computed K/V, over the distinct blocks of running
    /// sequences (0 from a library older than this field).
    pub num_kv_tokens_stored: i64,
    /// Slots reserved over the same blocks; stored / reserved is the KV
    /// utilization the memory benchmarks report.
    pub num_kv_slots_reserved: i64,
    /// Sequences that admission refused at least once for lack of KV
    /// blocks (they waited; nothing was dropped).
    pub num_seqs_queued_for_memory: i64,
    /// Blocks copied (copy-on-write, and contiguous-mode forks).
    pub num_block_copies: i64,
    /// Cached prefix blocks reclaimed for new use (0 before 0.5).
    pub num_prefix_cache_evictions: i64,
    /// Wall time of the steps that ran a batch, over the latest 1024 of
    /// them, in milliseconds: median (0 before the first, or before 0.5).
    pub step_time_p50_ms: f32,
    /// Their 99th percentile.
    pub step_time_p99_ms: f32,
    /// Their maximum.
    pub step_time_max_ms: f32,
    /// Preemptions that swapped the victim's K/V to the host
    /// ([`num_preemptions`](Self::num_preemptions) counts both kinds).
    pub num_preemptions_by_swap: i64,
    /// Blocks copied to the swap space.
    pub num_blocks_swapped_out: i64,
    /// Blocks copied back.
    pub num_blocks_swapped_in: i64,
    /// Bytes moved both ways.
    pub num_swap_bytes: i64,
    /// Context positions attention read, over every step: each computed
    /// sequence's whole context after its step, or the last
    /// `sliding_window` of it (libpvllm 0.8; 0 with an older library).
    pub num_kv_tokens_attended: i64,
}

/// The closure of [`Engine::with_progress`] and a panic it raised, if any
/// (a panic must not unwind through the C library).
struct ProgressState<F> {
    callback: F,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

unsafe extern "C" fn progress_trampoline<F: FnMut(f32, &str)>(
    fraction: f32,
    stage: *const c_char,
    user_data: *mut c_void,
) {
    let state = &mut *(user_data as *mut ProgressState<F>);
    if state.panic.is_some() {
        return;
    }
    let stage = if stage.is_null() {
        ""
    } else {
        CStr::from_ptr(stage).to_str().unwrap_or("")
    };
    let callback = &mut state.callback;
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| callback(fraction, stage))) {
        state.panic = Some(payload);
    }
}

impl Engine {
    /// Loads the model and tokenizer and allocates the KV pool.
    ///
    /// Fails with [`Status::NotFound`] when there is no model at the path,
    /// [`Status::InvalidArgument`] for a setting out of range,
    /// [`Status::CorruptModel`], [`Status::Unsupported`],
    /// [`Status::OutOfMemory`] and the other statuses of
    /// `pvllm_engine_create`; the message says which file or setting.
    pub fn new(config: &EngineConfig) -> Result<Engine> {
        Self::create(config, None)
    }

    /// Like [`new`](Self::new), calling `progress(fraction, stage)` while
    /// the model loads (on this thread, before this returns). A panic in
    /// `progress` is caught at the C boundary and resumed here.
    pub fn with_progress<F: FnMut(f32, &str)>(
        config: &EngineConfig,
        progress: F,
    ) -> Result<Engine> {
        let mut state = ProgressState {
            callback: progress,
            panic: None,
        };
        let user_data = &mut state as *mut ProgressState<F> as *mut c_void;
        let result = Self::create(config, Some((progress_trampoline::<F>, user_data)));
        if let Some(payload) = state.panic.take() {
            drop(result);
            panic::resume_unwind(payload);
        }
        result
    }

    fn create(
        config: &EngineConfig,
        progress: Option<(
            unsafe extern "C" fn(f32, *const c_char, *mut c_void),
            *mut c_void,
        )>,
    ) -> Result<Engine> {
        let abi = abi_version();
        if abi != sys::PVLLM_ABI_VERSION {
            return Err(Error::new(
                Status::Unsupported,
                format!(
                    "libpvllm has ABI version {} but this crate was built for {}",
                    abi,
                    sys::PVLLM_ABI_VERSION
                ),
            ));
        }
        // Per-request delivery and request_finished are since 0.2.
        let needed = sys::PVLLM_VERSION_MAJOR * 10000 + sys::PVLLM_VERSION_MINOR * 100;
        if version_number() < needed {
            return Err(Error::new(
                Status::Unsupported,
                format!(
                    "libpvllm {} is older than the {}.{} this crate was built for",
                    version(),
                    sys::PVLLM_VERSION_MAJOR,
                    sys::PVLLM_VERSION_MINOR
                ),
            ));
        }
        let mut params = config.to_raw()?;
        if let Some((callback, user_data)) = progress {
            params.raw.progress = Some(callback);
            params.raw.progress_user_data = user_data;
        }
        let mut handle: *mut sys::pvllm_engine = ptr::null_mut();
        // SAFETY: params and the strings it points to live across the call.
        check(|err| unsafe { sys::pvllm_engine_create(&params.raw, &mut handle, err) })?;
        NonNull::new(handle)
            .map(|handle| Engine {
                handle,
                async_state: AsyncState::default(),
            })
            .ok_or_else(|| {
                Error::new(
                    Status::Internal,
                    "pvllm_engine_create returned OK and no engine",
                )
            })
    }

    pub(crate) fn raw(&self) -> *mut sys::pvllm_engine {
        self.handle.as_ptr()
    }

    pub(crate) fn async_state(&self) -> &AsyncState {
        &self.async_state
    }

    /// Queues a request; its outputs come through [`poll`](Self::poll) (or
    /// [`poll_request`](Self::poll_request)) as the engine steps. Safe from
    /// any thread, also while another steps.
    ///
    /// Fails with [`Status::InvalidArgument`] for an empty prompt, a token
    /// id outside the vocabulary, sampling out of range, a prompt longer
    /// than the context or `n` above `max_num_seqs`; a failed submit changes
    /// nothing.
    pub fn submit(&self, request: &Request) -> Result<RequestId> {
        self.submit_with(request, Delivery::Shared)
    }

    /// Like [`submit`](Self::submit), choosing who may take the request's
    /// events: with [`Delivery::PerRequest`] only
    /// [`poll_request`](Self::poll_request) on its id does, never
    /// [`poll`](Self::poll), so an engine-wide poller elsewhere cannot take
    /// them from the request's own consumer.
    pub fn submit_with(&self, request: &Request, delivery: Delivery) -> Result<RequestId> {
        self.submit_raw(request, |raw| raw.delivery = delivery.to_raw())
    }

    /// Submits a request whose events go to `handler(event, user_data)`
    /// (pvllm_request.on_output); `user_data` must stay valid until the
    /// handler has seen the last event or the engine is gone.
    pub(crate) fn submit_handled(
        &self,
        request: &Request,
        handler: unsafe extern "C" fn(*const sys::pvllm_output, *mut c_void),
        user_data: *mut c_void,
    ) -> Result<RequestId> {
        self.submit_raw(request, |raw| {
            raw.on_output = Some(handler);
            raw.on_output_user_data = user_data;
        })
    }

    fn submit_raw(
        &self,
        request: &Request,
        route: impl FnOnce(&mut sys::pvllm_request),
    ) -> Result<RequestId> {
        let sampling = request.sampling.to_raw()?;
        let text;
        // SAFETY: pvllm_request_init fills every field.
        let mut raw = unsafe {
            let mut raw = std::mem::MaybeUninit::<sys::pvllm_request>::zeroed();
            sys::pvllm_request_init(raw.as_mut_ptr(), std::mem::size_of::<sys::pvllm_request>());
            raw.assume_init()
        };
        match &request.prompt {
            Prompt::Text(t) => {
                text = CString::new(t.as_str()).map_err(|_| nul_error("the prompt"))?;
                raw.prompt_text = text.as_ptr();
            }
            Prompt::Tokens(ids) => {
                raw.prompt_token_ids = if ids.is_empty() {
                    ptr::null()
                } else {
                    ids.as_ptr()
                };
                raw.num_prompt_token_ids = ids.len();
            }
        }
        raw.sampling = &sampling.raw;
        raw.priority = request.priority;
        raw.add_special_tokens = u8::from(request.add_special_tokens);
        route(&mut raw);
        let mut id = 0u64;
        // SAFETY: every pointer in `raw` outlives the call; the library
        // copies what it keeps.
        check(|err| unsafe { sys::pvllm_submit(self.raw(), &raw, &mut id, err) })?;
        Ok(RequestId(id))
    }

    /// Runs one scheduler iteration (admit, one forward pass, sample, queue
    /// events) and returns the number of requests not yet finished.
    ///
    /// Concurrent calls are serialised by the library. An `Err` with
    /// [`Status::Internal`] or [`Status::OutOfMemory`] means the engine
    /// itself failed: the affected requests end with
    /// [`FinishReason::Error`] events and the others keep their work.
    pub fn step(&self) -> Result<usize> {
        let mut unfinished: i32 = 0;
        // SAFETY: a live handle and a valid out-pointer.
        self.async_state.stepping(|| {
            check(|err| unsafe { sys::pvllm_step(self.raw(), &mut unfinished, err) })
        })?;
        Ok(unfinished.max(0) as usize)
    }

    /// Takes every pending output event of the requests submitted with
    /// [`Delivery::Shared`] (every [`submit`](Self::submit)). Safe from any
    /// thread; each event is delivered to exactly one poller.
    pub fn poll(&self) -> Result<Vec<Output>> {
        self.poll_max(0)
    }

    /// Takes up to `max_events` pending events (0 = all).
    pub fn poll_max(&self, max_events: usize) -> Result<Vec<Output>> {
        let mut batch = Batch(ptr::null_mut());
        // SAFETY: a live handle and a valid out-pointer; `Batch` frees it.
        check(|err| unsafe { sys::pvllm_poll(self.raw(), max_events, &mut batch.0, err) })?;
        Ok(batch.outputs())
    }

    /// Takes the pending events of one request, whatever its delivery,
    /// oldest first; empty when it is running and has made nothing new.
    /// Never blocks (see [`wait`](Self::wait)). [`Status::NotFound`] once
    /// the request is over and its last event taken (by this or another
    /// consumer), or after [`detach`](Self::detach).
    pub fn poll_request(&self, id: RequestId) -> Result<Vec<Output>> {
        self.poll_request_max(id, 0)
    }

    /// Takes up to `max_events` of one request's pending events (0 = all).
    pub fn poll_request_max(&self, id: RequestId, max_events: usize) -> Result<Vec<Output>> {
        let mut batch = Batch(ptr::null_mut());
        // SAFETY: a live handle and a valid out-pointer; `Batch` frees it.
        check(|err| unsafe {
            sys::pvllm_poll_request(self.raw(), id.0, max_events, &mut batch.0, err)
        })?;
        Ok(batch.outputs())
    }

    /// Blocks until request `id` has events to take, or `timeout` passes
    /// (`None`: no limit; it is rounded up to whole milliseconds). `Ok(true)`:
    /// [`poll_request`](Self::poll_request) now returns events, or the
    /// request's last event was taken elsewhere while this waited;
    /// `Ok(false)`: the timeout passed. [`Status::NotFound`] as
    /// `poll_request`. Events appear when a [`step`](Self::step) returns, so
    /// another thread must be stepping.
    pub fn wait(&self, id: RequestId, timeout: Option<Duration>) -> Result<bool> {
        let timeout_ms = match timeout {
            None => sys::PVLLM_WAIT_INFINITE,
            Some(t) => {
                let ms = (t.as_nanos() + 999_999) / 1_000_000;
                i32::try_from(ms).unwrap_or(i32::MAX)
            }
        };
        // SAFETY: a live handle; `Drop` cannot run while `&self` is borrowed.
        match check(|err| unsafe { sys::pvllm_wait(self.raw(), id.0, timeout_ms, err) }) {
            Ok(()) => Ok(true),
            Err(e) if e.status() == Status::Timeout => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Stops delivering a request's events: those pending are dropped now,
    /// later ones as they come. The request runs on; [`abort`](Self::abort)
    /// it first to stop it. [`Status::NotFound`] as
    /// [`poll_request`](Self::poll_request).
    pub fn detach(&self, id: RequestId) -> Result<()> {
        // SAFETY: a live handle.
        check(|err| unsafe { sys::pvllm_detach(self.raw(), id.0, err) })
    }

    /// Aborts a request in any state; each of its samples ends with a
    /// [`FinishReason::Abort`] event. [`Status::NotFound`] for an unknown or
    /// already finished id.
    pub fn abort(&self, id: RequestId) -> Result<()> {
        // SAFETY: a live handle.
        check(|err| unsafe { sys::pvllm_abort(self.raw(), id.0, err) })
    }

    /// The engine's counters after the latest step.
    pub fn stats(&self) -> Result<Stats> {
        // SAFETY: init fills struct_size and the fields it knows; fields a
        // older library does not know stay zeroed and are not written.
        let mut s = unsafe {
            let mut s = std::mem::MaybeUninit::<sys::pvllm_stats>::zeroed();
            sys::pvllm_stats_init(s.as_mut_ptr(), std::mem::size_of::<sys::pvllm_stats>());
            s.assume_init()
        };
        // SAFETY: a live handle and an initialised struct.
        check(|err| unsafe { sys::pvllm_get_stats(self.raw(), &mut s, err) })?;
        Ok(Stats {
            num_running: s.num_running,
            num_waiting: s.num_waiting,
            num_blocks_total: s.num_blocks_total,
            num_blocks_used: s.num_blocks_used,
            num_blocks_free: s.num_blocks_free,
            num_blocks_cached: s.num_blocks_cached,
            kv_utilization: s.kv_utilization,
            reserved_unused_slots: s.reserved_unused_slots,
            prefix_cache_hit_rate: s.prefix_cache_hit_rate,
            prefix_cache_hits: s.prefix_cache_hits,
            prefix_cache_queries: s.prefix_cache_queries,
            num_preemptions: s.num_preemptions,
            num_prompt_tokens_processed: s.num_prompt_tokens_processed,
            num_generation_tokens: s.num_generation_tokens,
            num_cached_prompt_tokens: s.num_cached_prompt_tokens,
            num_steps: s.num_steps,
            num_requests_finished: s.num_requests_finished,
            num_kv_tokens_stored: s.num_kv_tokens_stored,
            num_kv_slots_reserved: s.num_kv_slots_reserved,
            num_seqs_queued_for_memory: s.num_seqs_queued_for_memory,
            num_block_copies: s.num_block_copies,
            num_prefix_cache_evictions: s.num_prefix_cache_evictions,
            step_time_p50_ms: s.step_time_p50_ms,
            step_time_p99_ms: s.step_time_p99_ms,
            step_time_max_ms: s.step_time_max_ms,
            num_preemptions_by_swap: s.num_preemptions_by_swap,
            num_blocks_swapped_out: s.num_blocks_swapped_out,
            num_blocks_swapped_in: s.num_blocks_swapped_in,
            num_swap_bytes: s.num_swap_bytes,
            num_kv_tokens_attended: s.num_kv_tokens_attended,
        })
    }

    /// Encodes text with the model's tokenizer, with the special tokens it
    /// adds around a text (BOS for Llama-style tokenizers) when `add_bos`.
    pub fn tokenize(&self, text: &str, add_bos: bool) -> Result<Vec<TokenId>> {
        let text = CString::new(text).map_err(|_| nul_error("the text"))?;
        // Tokens rarely outnumber bytes; the library reports the size it
        // needs when the guess is short, and the second call then fits.
        let guess = text.as_bytes().len() + 2;
        // SAFETY: `ids` has `capacity` writable entries.
        read_ids(guess, |ids, capacity, needed, err| unsafe {
            sys::pvllm_tokenize(
                self.raw(),
                text.as_ptr(),
                u8::from(add_bos),
                ids,
                capacity,
                needed,
                err,
            )
        })
    }

    /// Decodes token ids into text. [`Status::InvalidArgument`] for an id
    /// outside the vocabulary.
    pub fn detokenize(&self, ids: &[TokenId]) -> Result<String> {
        // SAFETY: `text` has `capacity` writable bytes; `ids` is read only
        // during the call.
        read_text(ids.len() * 8, |text, capacity, len, err| unsafe {
            sys::pvllm_detokenize(
                self.raw(),
                if ids.is_empty() {
                    ptr::null()
                } else {
                    ids.as_ptr()
                },
                ids.len(),
                text,
                capacity,
                len,
                err,
            )
        })
    }

    /// An empty [`OutputStream`]; add requests with
    /// [`OutputStream::submit`].
    pub fn output_stream(&self) -> OutputStream<'_> {
        OutputStream::new(self)
    }

    /// Submits `requests` and returns a stream that steps the engine and
    /// yields output events until all of them have finished. If one submit
    /// fails, the ones already queued are aborted and the error returned.
    pub fn stream(&self, requests: &[Request]) -> Result<OutputStream<'_>> {
        let mut stream = OutputStream::new(self);
        for request in requests {
            stream.submit(request)?;
        }
        Ok(stream)
    }

    /// Generates the completions of one prompt: submits it, steps the
    /// engine until every sample has finished and returns them ordered by
    /// sample index. It takes only its own request's events, so other
    /// consumers of the engine, on this thread or others, lose nothing.
    pub fn generate(
        &self,
        prompt: impl Into<Prompt>,
        params: &SamplingParams,
    ) -> Result<Vec<Completion>> {
        let request = Request {
            prompt: prompt.into(),
            sampling: params.clone(),
            priority: 0,
            add_special_tokens: true,
        };
        self.generate_request(&request)
    }

    /// [`generate`](Self::generate) for a whole [`Request`] (priority and
    /// `add_special_tokens` included).
    pub(crate) fn generate_request(&self, request: &Request) -> Result<Vec<Completion>> {
        let mut stream = self.stream(std::slice::from_ref(request))?;
        let id = stream.request_ids()[0];
        let mut samples: Vec<Option<Completion>> = Vec::new();
        let mut prompt_logprobs = None;
        let mut metrics = None;
        for event in &mut stream {
            let event = event?;
            let index = event.sample_index as usize;
            if samples.len() <= index {
                samples.resize(index + 1, None);
            }
            let sample = samples[index].get_or_insert_with(|| Completion {
                sample_index: event.sample_index,
                token_ids: Vec::new(),
                text: String::new(),
                finish_reason: FinishReason::Unknown(0),
                logprobs: None,
                error_message: None,
                score: 0.0,
                prompt_logprobs: None,
                metrics: None,
            });
            sample.token_ids.extend_from_slice(&event.token_ids);
            sample.text.push_str(&event.text);
            if let Some(logprobs) = event.logprobs {
                sample
                    .logprobs
                    .get_or_insert_with(Vec::<TokenLogprobs>::new)
                    .extend(logprobs);
            }
            if event.prompt_logprobs.is_some() {
                prompt_logprobs = event.prompt_logprobs;
            }
            if event.metrics.is_some() {
                metrics = event.metrics;
            }
            if let Some(reason) = event.finish_reason {
                sample.finish_reason = reason;
                sample.error_message = event.error_message;
                sample.score = event.score;
            }
        }
        for sample in samples.iter_mut().flatten() {
            sample.prompt_logprobs = prompt_logprobs.clone();
            sample.metrics = metrics;
        }
        if !stream.is_finished() || samples.iter().any(|s| s.is_none()) {
            return Err(Error::new(
                Status::Internal,
                format!("request {} stopped producing events before it finished", id),
            ));
        }
        Ok(samples.into_iter().flatten().collect())
    }
}

/// A batch from pvllm_poll / pvllm_poll_request, freed on drop.
struct Batch(*mut sys::pvllm_output_batch);

impl Batch {
    /// Copies every event out of the batch.
    fn outputs(&self) -> Vec<Output> {
        // SAFETY: the batch is live (or NULL: size 0); events are valid until
        // it is freed, after the copy.
        unsafe {
            let size = sys::pvllm_output_batch_size(self.0);
            let mut outputs = Vec::with_capacity(size);
            for i in 0..size {
                if let Some(event) = sys::pvllm_output_batch_get(self.0, i).as_ref() {
                    outputs.push(Output::from_raw(event));
                }
            }
            outputs
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: a batch from the library, or NULL (a no-op).
        unsafe { sys::pvllm_output_batch_free(self.0) }
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Prompt {
        Prompt::Text(text.to_string())
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Prompt {
        Prompt::Text(text)
    }
}

impl From<Vec<TokenId>> for Prompt {
    fn from(ids: Vec<TokenId>) -> Prompt {
        Prompt::Tokens(ids)
    }
}

impl From<&[TokenId]> for Prompt {
    fn from(ids: &[TokenId]) -> Prompt {
        Prompt::Tokens(ids.to_vec())
    }
}

/// The library's version, `"MAJOR.MINOR.PATCH"`.
pub fn version() -> &'static str {
    // SAFETY: a static NUL-terminated string, never freed.
    unsafe { CStr::from_ptr(sys::pvllm_version()) }
        .to_str()
        .unwrap_or("")
}

/// The library's version as `MAJOR * 10000 + MINOR * 100 + PATCH`.
pub fn version_number() -> u32 {
    // SAFETY: no arguments, no state.
    unsafe { sys::pvllm_version_number() }
}

/// The loaded library's ABI version; [`Engine::new`] refuses a library
/// whose ABI differs from [`ABI_VERSION`](crate::ABI_VERSION).
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, no state.
    unsafe { sys::pvllm_abi_version() }
}
