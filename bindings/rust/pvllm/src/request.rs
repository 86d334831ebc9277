//! What to generate: the prompt and its sampling parameters.
use std::convert::TryFrom;
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;

use pvllm_sys as sys;

use crate::config::nul_error;
use crate::error::{Error, Result, Status};

/// A token id of the model's vocabulary.
pub type TokenId = i32;

/// Sampling settings for one request; every field of
/// `pvllm_sampling_params`. `Default` takes the library's defaults
/// (temperature 1, max_tokens 16, n 1, everything else off).
///
/// ```
/// let params = pvllm::SamplingParams {
///     temperature: 0.0,
///     max_tokens: 32,
///     stop: vec!["\n".to_string()],
///     ..Default::default()
/// };
/// assert_eq!(params.n, 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// 0 = greedy.
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 = off.
    pub top_k: u32,
    /// Nucleus sampling in (0, 1]; 1 = off.
    pub top_p: f32,
    /// Drop tokens below `min_p` times the best one's probability; 0 = off.
    pub min_p: f32,
    /// > 0; 1 = off.
    pub repetition_penalty: f32,
    /// Subtracted once from every token already generated; 0 = off.
    pub presence_penalty: f32,
    /// Subtracted per occurrence of a token already generated; 0 = off.
    pub frequency_penalty: f32,
    /// Tokens to generate at most, >= 1.
    pub max_tokens: u32,
    /// Extra tokens that end generation.
    pub stop_token_ids: Vec<TokenId>,
    /// Strings that end generation; they are not part of the output.
    pub stop: Vec<String>,
    /// Do not stop at EOS (nor at the model's extra stop ids).
    pub ignore_eos: bool,
    /// `None`: no log-probabilities; `Some(0)`: the chosen token's;
    /// `Some(k)`: plus the k most likely alternatives (k <= 20).
    pub logprobs: Option<u32>,
    /// A fixed seed for reproducible sampling; `None` draws a random one.
    pub seed: Option<u64>,
    /// Parallel samples of the same prompt.
    pub n: u32,
    /// Prompt logprobs (libpvllm 0.5): `Some(0)` each prompt token's
    /// logprob (all but the first), `Some(k)` plus the top k (k <= 20). They
    /// come with the request's first event
    /// ([`Output::prompt_logprobs`](crate::Output::prompt_logprobs)).
    pub prompt_logprobs: Option<u32>,
    /// Beam search with this many beams (1..10; 0 = off, libpvllm 0.5): the
    /// best `n` hypotheses come back as samples, best first, each in one
    /// event with its [`score`](crate::Output::score). Temperature must be 0
    /// and the other shaping off.
    pub beam_width: u32,
    /// A hypothesis scores its logprob sum / length^length_penalty.
    pub length_penalty: f32,
    /// When beam search stops.
    pub early_stopping: EarlyStopping,
    /// Structured output (libpvllm 0.6): the generated text matches this
    /// constraint; `None` (the default) leaves it free. See [`Constraint`].
    pub constraint: Option<Constraint>,
    /// Options of the JSON constraints (libpvllm 0.11): whitespace between
    /// tokens, members a schema does not list, members in any order. The
    /// default is compact JSON with the listed members only, in the order
    /// the schema lists them. See [`JsonOptions`].
    pub json_options: JsonOptions,
}

/// How [`Constraint::JsonSchema`] and [`Constraint::JsonObject`] read JSON
/// (`pvllm_sampling_params.constraint_flags`, libpvllm 0.11). Set on a
/// request without a JSON constraint, an option is refused at submit with
/// [`Status::InvalidArgument`].
///
/// ```
/// use pvllm::{Constraint, JsonOptions, SamplingParams};
/// let params = SamplingParams::greedy(64)
///     .with_constraint(Constraint::JsonObject)
///     .with_json_options(JsonOptions {
///         whitespace: true,
///         ..Default::default()
///     });
/// assert!(params.json_options.whitespace);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct JsonOptions {
    /// JSON's whitespace (space, tab, newline, carriage return) between
    /// tokens, as in pretty-printed JSON; `false`: compact JSON.
    pub whitespace: bool,
    /// JSON schemas: members the schema does not list may follow the listed
    /// ones wherever its `additionalProperties` (or `patternProperties`)
    /// allows them, as JSON Schema reads it; `false`: an object whose schema
    /// lists properties gets only those. Any object takes any member
    /// already, so [`Constraint::JsonObject`] is unchanged by it.
    pub unlisted_properties: bool,
    /// JSON schemas: an object's members may come in any order, each at most
    /// once and the required ones present, as JSON Schema reads objects;
    /// `false`: in the order the schema lists them. Any object takes its
    /// members in any order already, so [`Constraint::JsonObject`] is
    /// unchanged by it.
    pub any_order: bool,
}

impl JsonOptions {
    fn to_raw(self) -> u32 {
        let mut flags = 0;
        if self.whitespace {
            flags |= sys::pvllm_constraint_flag_PVLLM_CONSTRAINT_JSON_WHITESPACE;
        }
        if self.unlisted_properties {
            flags |= sys::pvllm_constraint_flag_PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES;
        }
        if self.any_order {
            flags |= sys::pvllm_constraint_flag_PVLLM_CONSTRAINT_JSON_ANY_ORDER;
        }
        flags as u32
    }
}

impl Default for SamplingParams {
    fn default() -> Self {
        let raw = init_sampling();
        SamplingParams {
            temperature: raw.temperature,
            top_k: raw.top_k.max(0) as u32,
            top_p: raw.top_p,
            min_p: raw.min_p,
            repetition_penalty: raw.repetition_penalty,
            presence_penalty: raw.presence_penalty,
            frequency_penalty: raw.frequency_penalty,
            max_tokens: raw.max_tokens.max(0) as u32,
            stop_token_ids: Vec::new(),
            stop: Vec::new(),
            ignore_eos: raw.ignore_eos != 0,
            logprobs: u32::try_from(raw.logprobs).ok(),
            seed: if raw.has_seed != 0 {
                Some(raw.seed)
            } else {
                None
            },
            n: raw.n.max(1) as u32,
            prompt_logprobs: u32::try_from(raw.prompt_logprobs).ok(),
            beam_width: raw.beam_width.max(0) as u32,
            length_penalty: raw.length_penalty,
            early_stopping: EarlyStopping::from_raw(raw.early_stopping),
            constraint: None,
            json_options: JsonOptions::default(),
        }
    }
}

/// What the generated text must match (`pvllm_constraint_kind`, libpvllm
/// 0.6): each draw is limited to the tokens that can continue a match, and
/// end-of-sequence only once the text is complete; a constraint that allows
/// nothing more ends the sample with [`FinishReason::Stop`]. A text cut short
/// by `max_tokens` or a stop string is a prefix of a match.
///
/// The constraint is compiled when the request is submitted: a malformed
/// one is a [`Status::InvalidArgument`] error whose message says where it
/// goes wrong, one that uses something the library does not implement a
/// [`Status::Unsupported`] naming it. It needs the model's tokenizer and
/// cannot be combined with beam search.
///
/// ```
/// use pvllm::{Constraint, SamplingParams};
/// let params = SamplingParams::greedy(64).with_constraint(Constraint::JsonSchema(
///     r#"{"type": "object", "properties": {"name": {"type": "string"}},
///         "required": ["name"], "additionalProperties": false}"#
///         .to_string(),
/// ));
/// assert!(params.constraint.is_some());
/// let yes_no = Constraint::Choice(vec!["yes".into(), "no".into()]);
/// # let _ = yes_no;
/// ```
///
/// [`FinishReason::Stop`]: crate::FinishReason::Stop
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Constraint {
    /// JSON that validates against this JSON schema, compact unless
    /// [`JsonOptions::whitespace`] (the keywords the library implements are
    /// listed in docs/structured-output.md).
    JsonSchema(String),
    /// Any JSON object, compact unless [`JsonOptions::whitespace`].
    JsonObject,
    /// A GBNF grammar (rules `name ::= ...`; the text starts at `root`).
    Grammar(String),
    /// A regular expression the whole text matches.
    Regex(String),
    /// The text is exactly one of these strings.
    Choice(Vec<String>),
}

impl Constraint {
    fn kind(&self) -> sys::pvllm_constraint_kind {
        match self {
            Constraint::JsonSchema(_) => sys::pvllm_constraint_kind_PVLLM_CONSTRAINT_JSON_SCHEMA,
            Constraint::JsonObject => sys::pvllm_constraint_kind_PVLLM_CONSTRAINT_JSON_OBJECT,
            Constraint::Grammar(_) => sys::pvllm_constraint_kind_PVLLM_CONSTRAINT_GRAMMAR,
            Constraint::Regex(_) => sys::pvllm_constraint_kind_PVLLM_CONSTRAINT_REGEX,
            Constraint::Choice(_) => sys::pvllm_constraint_kind_PVLLM_CONSTRAINT_CHOICE,
        }
    }

    /// The text and the name used in a NUL-byte error, for the kinds that
    /// carry one.
    fn text(&self) -> Option<(&str, &'static str)> {
        match self {
            Constraint::JsonSchema(s) => Some((s, "the JSON schema")),
            Constraint::Grammar(s) => Some((s, "the grammar")),
            Constraint::Regex(s) => Some((s, "the regular expression")),
            Constraint::JsonObject | Constraint::Choice(_) => None,
        }
    }
}

/// When beam search stops (`pvllm_early_stopping`), as Hugging Face's
/// `early_stopping` False, True and "never".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EarlyStopping {
    /// When no live beam can beat the worst finished hypothesis at the
    /// current length.
    #[default]
    Heuristic,
    /// As soon as `beam_width` hypotheses are finished.
    True,
    /// As `Heuristic`, over the longest length a beam may reach.
    Never,
}

impl EarlyStopping {
    fn from_raw(raw: i32) -> EarlyStopping {
        match raw as u32 {
            sys::pvllm_early_stopping_PVLLM_EARLY_STOPPING_TRUE => EarlyStopping::True,
            sys::pvllm_early_stopping_PVLLM_EARLY_STOPPING_NEVER => EarlyStopping::Never,
            _ => EarlyStopping::Heuristic,
        }
    }

    fn to_raw(self) -> i32 {
        (match self {
            EarlyStopping::Heuristic => sys::pvllm_early_stopping_PVLLM_EARLY_STOPPING_HEURISTIC,
            EarlyStopping::True => sys::pvllm_early_stopping_PVLLM_EARLY_STOPPING_TRUE,
            EarlyStopping::Never => sys::pvllm_early_stopping_PVLLM_EARLY_STOPPING_NEVER,
        }) as i32
    }
}

impl SamplingParams {
    /// Greedy decoding (temperature 0) of at most `max_tokens` tokens.
    pub fn greedy(max_tokens: u32) -> Self {
        SamplingParams {
            temperature: 0.0,
            max_tokens,
            ..Default::default()
        }
    }

    /// Sets the structured-output constraint (libpvllm 0.6).
    pub fn with_constraint(mut self, constraint: Constraint) -> Self {
        self.constraint = Some(constraint);
        self
    }

    /// Sets the JSON constraints' options (libpvllm 0.11).
    pub fn with_json_options(mut self, options: JsonOptions) -> Self {
        self.json_options = options;
        self
    }

    pub(crate) fn to_raw(&self) -> Result<RawSampling> {
        let stop: Vec<CString> = self
            .stop
            .iter()
            .map(|s| CString::new(s.as_str()).map_err(|_| nul_error("a stop string")))
            .collect::<Result<_>>()?;
        let stop_ptrs: Vec<*const c_char> = stop.iter().map(|s| s.as_ptr()).collect();
        let stop_token_ids = self.stop_token_ids.clone();
        let mut raw = init_sampling();
        raw.temperature = self.temperature;
        raw.top_k = to_i32("top_k", self.top_k)?;
        raw.top_p = self.top_p;
        raw.min_p = self.min_p;
        raw.repetition_penalty = self.repetition_penalty;
        raw.presence_penalty = self.presence_penalty;
        raw.frequency_penalty = self.frequency_penalty;
        raw.max_tokens = to_i32("max_tokens", self.max_tokens)?;
        raw.stop_token_ids = if stop_token_ids.is_empty() {
            ptr::null()
        } else {
            stop_token_ids.as_ptr()
        };
        raw.num_stop_token_ids = stop_token_ids.len();
        raw.stop = if stop_ptrs.is_empty() {
            ptr::null()
        } else {
            stop_ptrs.as_ptr()
        };
        raw.num_stop = stop_ptrs.len();
        raw.ignore_eos = u8::from(self.ignore_eos);
        raw.logprobs = match self.logprobs {
            Some(k) => to_i32("logprobs", k)?,
            None => -1,
        };
        raw.has_seed = u8::from(self.seed.is_some());
        raw.seed = self.seed.unwrap_or(0);
        raw.n = to_i32("n", self.n)?;
        raw.prompt_logprobs = match self.prompt_logprobs {
            Some(k) => i64::from(k),
            None => -1,
        };
        raw.beam_width = to_i32("beam_width", self.beam_width)?;
        raw.length_penalty = self.length_penalty;
        raw.early_stopping = self.early_stopping.to_raw();
        let mut constraint = None;
        let mut choices = Vec::new();
        let mut choice_ptrs = Vec::new();
        if let Some(c) = &self.constraint {
            if let Some((text, what)) = c.text() {
                constraint = Some(CString::new(text).map_err(|_| nul_error(what))?);
            }
            if let Constraint::Choice(list) = c {
                choices = list
                    .iter()
                    .map(|s| CString::new(s.as_str()).map_err(|_| nul_error("a choice")))
                    .collect::<Result<_>>()?;
                choice_ptrs = choices.iter().map(|s| s.as_ptr()).collect();
            }
            raw.constraint_kind = c.kind() as i32;
        }
        raw.constraint = constraint.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        raw.choices = if choice_ptrs.is_empty() {
            ptr::null()
        } else {
            choice_ptrs.as_ptr()
        };
        raw.num_choices = choice_ptrs.len();
        raw.constraint_flags = self.json_options.to_raw();
        Ok(RawSampling {
            raw,
            _stop_token_ids: stop_token_ids,
            _stop: stop,
            _stop_ptrs: stop_ptrs,
            _constraint: constraint,
            _choices: choices,
            _choice_ptrs: choice_ptrs,
        })
    }
}

/// `pvllm_sampling_params` and the buffers its pointers refer to (a Vec's
/// heap buffer stays put when the Vec moves).
pub(crate) struct RawSampling {
    pub(crate) raw: sys::pvllm_sampling_params,
    _stop_token_ids: Vec<TokenId>,
    _stop: Vec<CString>,
    _stop_ptrs: Vec<*const c_char>,
    _constraint: Option<CString>,
    _choices: Vec<CString>,
    _choice_ptrs: Vec<*const c_char>,
}

fn init_sampling() -> sys::pvllm_sampling_params {
    // SAFETY: pvllm_sampling_params_init fills every field.
    unsafe {
        let mut raw = std::mem::MaybeUninit::<sys::pvllm_sampling_params>::zeroed();
        sys::pvllm_sampling_params_init(
            raw.as_mut_ptr(),
            std::mem::size_of::<sys::pvllm_sampling_params>(),
        );
        raw.assume_init()
    }
}

pub(crate) fn to_i32(name: &str, value: u32) -> Result<i32> {
    i32::try_from(value).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("{} = {} is out of range", name, value),
        )
    })
}

/// A prompt: text (tokenized by the engine, with the special tokens its
/// tokenizer adds unless [`Request::add_special_tokens`] is off) or token
/// ids used as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// UTF-8 text.
    Text(String),
    /// Token ids of the model's vocabulary.
    Tokens(Vec<TokenId>),
}

/// One request: a prompt, its sampling parameters, a priority (lower
/// values are served first and preempted last; default 0) and whether a
/// text prompt gets the tokenizer's special tokens (default yes).
///
/// ```
/// use pvllm::{Request, SamplingParams};
/// let request = Request::text("Once upon a time")
///     .with_sampling(SamplingParams::greedy(20))
///     .with_priority(-1);
/// let from_ids = Request::tokens(vec![1, 415, 2501]);
/// // A prompt that already holds its BOS, as a chat template writes it.
/// let rendered = Request::text("<s>[USER] Hi\n[BOT]").with_add_special_tokens(false);
/// assert!(request.add_special_tokens && !rendered.add_special_tokens);
/// # let _ = from_ids;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// What to continue.
    pub prompt: Prompt,
    /// How to sample.
    pub sampling: SamplingParams,
    /// Lower values are served first and preempted last.
    pub priority: i32,
    /// `true` (the default): a [`Prompt::Text`] is tokenized with the
    /// special tokens the tokenizer adds around a text (BOS for
    /// Llama-style tokenizers, nothing for Qwen's), as Hugging Face's
    /// `add_special_tokens`. `false`: none are added; special tokens
    /// written in the text still count. Turn it off for a prompt rendered
    /// by a chat template, which writes its own BOS (or use
    /// [`Engine::chat_request`](crate::Engine::chat_request)). Ignored for
    /// [`Prompt::Tokens`] (libpvllm 0.9).
    pub add_special_tokens: bool,
}

impl Request {
    /// A text prompt with default sampling.
    pub fn text(text: impl Into<String>) -> Request {
        Request {
            prompt: Prompt::Text(text.into()),
            sampling: SamplingParams::default(),
            priority: 0,
            add_special_tokens: true,
        }
    }

    /// A token-id prompt with default sampling.
    pub fn tokens(ids: impl Into<Vec<TokenId>>) -> Request {
        Request {
            prompt: Prompt::Tokens(ids.into()),
            sampling: SamplingParams::default(),
            priority: 0,
            add_special_tokens: true,
        }
    }

    /// Replaces the sampling parameters.
    pub fn with_sampling(mut self, sampling: SamplingParams) -> Request {
        self.sampling = sampling;
        self
    }

    /// Sets the priority.
    pub fn with_priority(mut self, priority: i32) -> Request {
        self.priority = priority;
        self
    }

    /// Sets [`add_special_tokens`](Self::add_special_tokens): `false` for a
    /// text that already holds its BOS (a rendered chat template).
    pub fn with_add_special_tokens(mut self, add_special_tokens: bool) -> Request {
        self.add_special_tokens = add_special_tokens;
        self
    }
}

/// Who may take a request's output events (`pvllm_delivery`): see
/// [`Engine::submit_with`](crate::Engine::submit_with).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Delivery {
    /// Any poller: [`Engine::poll`](crate::Engine::poll) (every shared
    /// request's events) and [`Engine::poll_request`](crate::Engine::poll_request)
    /// on this id, whoever comes first. What [`Engine::submit`](crate::Engine::submit)
    /// uses.
    #[default]
    Shared,
    /// Only [`Engine::poll_request`](crate::Engine::poll_request) and
    /// [`Engine::wait`](crate::Engine::wait) on this id: `Engine::poll` never
    /// returns its events. What an [`OutputStream`](crate::OutputStream) uses.
    PerRequest,
}

impl Delivery {
    pub(crate) fn to_raw(self) -> i64 {
        match self {
            Delivery::Shared => i64::from(sys::pvllm_delivery_PVLLM_DELIVERY_SHARED),
            Delivery::PerRequest => i64::from(sys::pvllm_delivery_PVLLM_DELIVERY_PER_REQUEST),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_options_become_constraint_flag_bits() {
        let flags = |options: JsonOptions| {
            SamplingParams::greedy(8)
                .with_constraint(Constraint::JsonObject)
                .with_json_options(options)
                .to_raw()
                .unwrap()
                .raw
                .constraint_flags
        };
        assert_eq!(flags(JsonOptions::default()), 0);
        let any_order = JsonOptions {
            any_order: true,
            ..Default::default()
        };
        assert_eq!(
            flags(any_order),
            sys::pvllm_constraint_flag_PVLLM_CONSTRAINT_JSON_ANY_ORDER
        );
        let all = JsonOptions {
            whitespace: true,
            unlisted_properties: true,
            any_order: true,
        };
        assert_eq!(flags(all), 1 | 2 | 4);
    }
}
