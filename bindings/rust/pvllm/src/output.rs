//! Output events and finished completions, copied out of the library's
//! batches so they own their data.
use std::convert::TryFrom;
use std::ffi::CStr;
use std::fmt;
use std::slice;

use pvllm_sys as sys;

use crate::request::TokenId;

/// Whether a `pvllm_output` of `size` bytes holds `field`
/// (PVLLM_STRUCT_HAS): the library fills only the fields its caller's
/// struct_size covers, and an older library knows fewer.
macro_rules! has_field {
    ($size:expr, $field:ident) => {
        // SAFETY: addr_of! computes the field's address without reading it.
        $size >= field_end(|base| unsafe { std::ptr::addr_of!((*base).$field) })
    };
}

/// A request's id, unique within its engine (never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub(crate) u64);

impl RequestId {
    /// An id from its raw value (for example one kept from [`get`](Self::get)).
    pub fn new(raw: u64) -> RequestId {
        RequestId(raw)
    }

    /// The raw id the C API uses.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a sample ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// EOS, a stop token or a stop string.
    Stop,
    /// `max_tokens` or the context length.
    Length,
    /// [`Engine::abort`](crate::Engine::abort).
    Abort,
    /// The engine failed; see [`Output::error_message`].
    Error,
    /// A reason newer than this crate.
    Unknown(i32),
}

impl FinishReason {
    /// The library's constant name, e.g. `"PVLLM_FINISH_STOP"`
    /// (`pvllm_finish_reason_to_string`).
    pub fn name(self) -> &'static str {
        let raw = match self {
            FinishReason::Stop => sys::pvllm_finish_reason_PVLLM_FINISH_STOP as i32,
            FinishReason::Length => sys::pvllm_finish_reason_PVLLM_FINISH_LENGTH as i32,
            FinishReason::Abort => sys::pvllm_finish_reason_PVLLM_FINISH_ABORT as i32,
            FinishReason::Error => sys::pvllm_finish_reason_PVLLM_FINISH_ERROR as i32,
            FinishReason::Unknown(raw) => raw,
        };
        // SAFETY: a static NUL-terminated string for every value, never NULL.
        unsafe { CStr::from_ptr(sys::pvllm_finish_reason_to_string(raw)) }
            .to_str()
            .unwrap_or("PVLLM_FINISH_UNKNOWN")
    }

    /// `None` for PVLLM_FINISH_NONE (still generating).
    pub(crate) fn from_raw(raw: i32) -> Option<FinishReason> {
        let value = match u32::try_from(raw) {
            Ok(value) => value,
            Err(_) => return Some(FinishReason::Unknown(raw)),
        };
        match value {
            sys::pvllm_finish_reason_PVLLM_FINISH_NONE => None,
            sys::pvllm_finish_reason_PVLLM_FINISH_STOP => Some(FinishReason::Stop),
            sys::pvllm_finish_reason_PVLLM_FINISH_LENGTH => Some(FinishReason::Length),
            sys::pvllm_finish_reason_PVLLM_FINISH_ABORT => Some(FinishReason::Abort),
            sys::pvllm_finish_reason_PVLLM_FINISH_ERROR => Some(FinishReason::Error),
            _ => Some(FinishReason::Unknown(raw)),
        }
    }
}

/// A candidate token and its log-probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Logprob {
    /// The token.
    pub token_id: TokenId,
    /// Its log-probability.
    pub logprob: f32,
}

/// The log-probability of one generated token, with the most likely
/// alternatives (best first) when the request asked for them.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    /// The chosen token.
    pub token_id: TokenId,
    /// Its log-probability under the raw model distribution.
    pub logprob: f32,
    /// The most likely alternatives, best first.
    pub top: Vec<Logprob>,
}

/// One event from [`Engine::poll`](crate::Engine::poll),
/// [`Engine::poll_request`](crate::Engine::poll_request) or an
/// [`OutputStream`](crate::OutputStream): the new tokens of one sample of
/// one request. Every sample ends with exactly one event whose
/// `finish_reason` is `Some`, and the request's very last event has
/// `request_finished` set.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The request the event belongs to.
    pub request_id: RequestId,
    /// 0..n-1.
    pub sample_index: u32,
    /// New tokens since this sample's previous event.
    pub token_ids: Vec<TokenId>,
    /// Their text (never a broken UTF-8 character).
    pub text: String,
    /// `None` while the sample is still generating.
    pub finish_reason: Option<FinishReason>,
    /// One entry per token of `token_ids` when the request asked for
    /// log-probabilities.
    pub logprobs: Option<Vec<TokenLogprobs>>,
    /// The engine's message when `finish_reason` is `Some(Error)`.
    pub error_message: Option<String>,
    /// The request's last event: all of its samples have finished and
    /// nothing more will come for it.
    pub request_finished: bool,
    /// The event's place among its request's events (all samples): 0, 1,
    /// 2, ... in the order the engine made them. Sorting events that
    /// several threads took by it restores that order. 0 with a library
    /// older than 0.4, which does not number events.
    pub sequence: u64,
    /// On the request's first event when it asked for prompt
    /// log-probabilities ([`SamplingParams::prompt_logprobs`](crate::SamplingParams::prompt_logprobs)):
    /// entry `i` for prompt token `i + 1`. `None` otherwise.
    pub prompt_logprobs: Option<Vec<TokenLogprobs>>,
    /// Beam search: the hypothesis' score (summed log-probability over
    /// `length^length_penalty`); 0 otherwise.
    pub score: f64,
    /// On the request's last event: its timing and token counts. `None` on
    /// other events and with a library older than 0.5.
    pub metrics: Option<RequestMetrics>,
}

/// A request's timing, in seconds from its submission, and its token
/// counts, carried by its last event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestMetrics {
    /// Until the first step that ran any of its tokens.
    pub time_queued: f64,
    /// Until the end of the step that made its first token; 0 if none.
    pub time_to_first_token: f64,
    /// Mean gap between its token-making steps after the first; 0 with
    /// fewer than two.
    pub time_per_output_token: f64,
    /// Until the end of its last step.
    pub e2e_latency: f64,
    /// Tokens in its prompt.
    pub num_prompt_tokens: i64,
    /// Prompt tokens computed, recomputation after preemption included.
    pub num_prefill_tokens: i64,
    /// Prompt tokens the prefix cache spared.
    pub num_cached_prompt_tokens: i64,
    /// Tokens generated over all its samples.
    pub num_generated_tokens: i64,
}

impl Output {
    /// Whether this is the sample's last event (see also
    /// [`request_finished`](Self::request_finished) for the request's).
    pub fn is_finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Copies one event out of a batch.
    ///
    /// # Safety
    /// `raw` must be an event of a live `pvllm_output_batch`.
    pub(crate) unsafe fn from_raw(raw: &sys::pvllm_output) -> Output {
        let token_ids = slice_or_empty(raw.token_ids, raw.num_token_ids).to_vec();
        let text = String::from_utf8_lossy(slice_or_empty(raw.text as *const u8, raw.text_len))
            .into_owned();
        let logprobs = copy_logprobs(raw.logprobs, raw.num_token_ids);
        let size = raw.struct_size as usize;
        let finish_reason = FinishReason::from_raw(raw.finish_reason);
        let error_message =
            if finish_reason == Some(FinishReason::Error) && !raw.error_message.is_null() {
                Some(
                    CStr::from_ptr(raw.error_message)
                        .to_string_lossy()
                        .into_owned(),
                )
            } else {
                None
            };
        Output {
            request_id: RequestId(raw.request_id),
            sample_index: raw.sample_index.max(0) as u32,
            token_ids,
            text,
            finish_reason,
            logprobs,
            error_message,
            // Engine::new refuses a library older than 0.2, so the field is
            // there (struct_size covers it).
            request_finished: raw.request_finished != 0,
            // Since 0.4; the library fills the fields its struct_size covers.
            sequence: if has_field!(size, sequence) {
                raw.sequence
            } else {
                0
            },
            prompt_logprobs: if has_field!(size, num_prompt_logprobs) {
                copy_logprobs(raw.prompt_logprobs, raw.num_prompt_logprobs)
            } else {
                None
            },
            score: if has_field!(size, score) {
                raw.score
            } else {
                0.0
            },
            metrics: if has_field!(size, num_generated_tokens) && raw.request_finished != 0 {
                Some(RequestMetrics {
                    time_queued: raw.time_queued,
                    time_to_first_token: raw.time_to_first_token,
                    time_per_output_token: raw.time_per_output_token,
                    e2e_latency: raw.e2e_latency,
                    num_prompt_tokens: raw.num_prompt_tokens,
                    num_prefill_tokens: raw.num_prefill_tokens,
                    num_cached_prompt_tokens: raw.num_cached_prompt_tokens,
                    num_generated_tokens: raw.num_generated_tokens,
                })
            } else {
                None
            },
        }
    }
}

/// The end of a field of `pvllm_output`: its offset plus its size.
fn field_end<T>(field: fn(*const sys::pvllm_output) -> *const T) -> usize {
    let probe = std::mem::MaybeUninit::<sys::pvllm_output>::uninit();
    let base = probe.as_ptr();
    field(base) as usize - base as usize + std::mem::size_of::<T>()
}

/// Copies a C array of per-token log-probabilities; `None` for NULL.
unsafe fn copy_logprobs(
    data: *const sys::pvllm_token_logprobs,
    len: usize,
) -> Option<Vec<TokenLogprobs>> {
    if data.is_null() {
        return None;
    }
    Some(
        slice_or_empty(data, len)
            .iter()
            .map(|e| TokenLogprobs {
                token_id: e.token_id,
                logprob: e.logprob,
                top: slice_or_empty(e.top, e.num_top)
                    .iter()
                    .map(|l| Logprob {
                        token_id: l.token_id,
                        logprob: l.logprob,
                    })
                    .collect(),
            })
            .collect(),
    )
}

/// A slice over a C array; empty for NULL.
unsafe fn slice_or_empty<'a, T>(data: *const T, len: usize) -> &'a [T] {
    if data.is_null() || len == 0 {
        &[]
    } else {
        slice::from_raw_parts(data, len)
    }
}

/// One finished sample of [`Engine::generate`](crate::Engine::generate):
/// all its events joined.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// 0..n-1.
    pub sample_index: u32,
    /// Every generated token.
    pub token_ids: Vec<TokenId>,
    /// Their text.
    pub text: String,
    /// Why the sample ended.
    pub finish_reason: FinishReason,
    /// Per token, when the request asked for log-probabilities.
    pub logprobs: Option<Vec<TokenLogprobs>>,
    /// The engine's message when `finish_reason` is `Error`.
    pub error_message: Option<String>,
    /// Beam search: the hypothesis' score; 0 otherwise.
    pub score: f64,
    /// The request's prompt log-probabilities when it asked for them (the
    /// same for every sample).
    pub prompt_logprobs: Option<Vec<TokenLogprobs>>,
    /// The request's timing and token counts (the same for every sample).
    pub metrics: Option<RequestMetrics>,
}
