//! Output events and finished completions, copied out of the library's
//! batches so they own their data.
use std::convert::TryFrom;
use std::ffi::CStr;
use std::fmt;
use std::slice;

use pvllm_sys as sys;

use crate::request::TokenId;

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
        let logprobs = if raw.logprobs.is_null() {
            None
        } else {
            let entries = slice_or_empty(raw.logprobs, raw.num_token_ids);
            Some(
                entries
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
        };
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
            // The last field of pvllm_output (since 0.4): there when the
            // library filled the whole struct this crate knows.
            sequence: if raw.struct_size as usize >= std::mem::size_of::<sys::pvllm_output>() {
                raw.sequence
            } else {
                0
            },
        }
    }
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
}
