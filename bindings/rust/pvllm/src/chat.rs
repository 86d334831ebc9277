//! Chat templates: the prompt a model's template makes of a conversation,
//! and requests and completions made from it.
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;

use pvllm_sys as sys;

use crate::config::nul_error;
use crate::engine::Engine;
use crate::error::{read_text, Result};
use crate::output::Completion;
use crate::request::{Request, SamplingParams};

/// Options of [`Engine::apply_chat_template`] (and of
/// [`Tokenizer::apply_chat_template`](crate::Tokenizer::apply_chat_template),
/// [`Engine::chat_request`] and [`Engine::chat`]); the default adds the
/// generation prompt and nothing else.
///
/// ```
/// let options = pvllm::ChatTemplateOptions {
///     chat_template: Some("{{ bos_token }}{% for m in messages %}{{ m.content }}\n{% endfor %}".into()),
///     ..Default::default()
/// };
/// assert!(options.add_generation_prompt);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTemplateOptions {
    /// The tools' function schemas as a JSON array, or `None`.
    pub tools_json: Option<String>,
    /// More template variables as a JSON object, e.g.
    /// `{"enable_thinking": false}`, or `None`.
    pub extra_context_json: Option<String>,
    /// End with the header that opens the assistant's turn.
    pub add_generation_prompt: bool,
    /// A named template of a model that ships several; `None` picks
    /// "tool_use" when tools are given and the model has one, else
    /// "default".
    pub template_name: Option<String>,
    /// A Jinja chat template to render instead of the model's (libpvllm
    /// 0.9), as vLLM's `--chat-template`: for a model that ships none, or
    /// to try another. [`template_name`](Self::template_name) is then
    /// ignored; the special tokens it reads (`bos_token`, `eos_token`)
    /// still come from the model. `None` (the default): the model's. An
    /// empty template is [`Status::InvalidArgument`](crate::Status::InvalidArgument).
    pub chat_template: Option<String>,
}

impl Default for ChatTemplateOptions {
    fn default() -> Self {
        ChatTemplateOptions {
            tools_json: None,
            extra_context_json: None,
            add_generation_prompt: true,
            template_name: None,
            chat_template: None,
        }
    }
}

fn optional_cstring(value: &Option<String>, what: &str) -> Result<Option<CString>> {
    value
        .as_ref()
        .map(|s| CString::new(s.as_str()).map_err(|_| nul_error(what)))
        .transpose()
}

fn ptr_of(value: &Option<CString>) -> *const c_char {
    value.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

/// `pvllm_chat_template_params` and the strings it points to (a CString's
/// heap buffer stays put when it moves).
pub(crate) struct RawChatParams {
    pub(crate) raw: sys::pvllm_chat_template_params,
    _messages: CString,
    _tools: Option<CString>,
    _extra: Option<CString>,
    _name: Option<CString>,
    _template: Option<CString>,
}

impl ChatTemplateOptions {
    pub(crate) fn to_raw(&self, messages_json: &str) -> Result<RawChatParams> {
        let messages = CString::new(messages_json).map_err(|_| nul_error("messages_json"))?;
        let tools = optional_cstring(&self.tools_json, "tools_json")?;
        let extra = optional_cstring(&self.extra_context_json, "extra_context_json")?;
        let name = optional_cstring(&self.template_name, "template_name")?;
        let template = optional_cstring(&self.chat_template, "chat_template")?;
        // SAFETY: a zeroed struct is valid input for its _init, which fills
        // the defaults for sizeof(the struct).
        let mut raw: sys::pvllm_chat_template_params = unsafe { std::mem::zeroed() };
        unsafe {
            sys::pvllm_chat_template_params_init(
                &mut raw,
                std::mem::size_of::<sys::pvllm_chat_template_params>(),
            )
        };
        raw.messages_json = messages.as_ptr();
        raw.tools_json = ptr_of(&tools);
        raw.extra_context_json = ptr_of(&extra);
        raw.add_generation_prompt = u8::from(self.add_generation_prompt);
        raw.template_name = ptr_of(&name);
        raw.chat_template = ptr_of(&template);
        Ok(RawChatParams {
            raw,
            _messages: messages,
            _tools: tools,
            _extra: extra,
            _name: name,
            _template: template,
        })
    }
}

impl Engine {
    /// Renders the model's chat template (pvllm_apply_chat_template) over
    /// `messages_json`, a JSON array of OpenAI-style messages such as
    /// `[{"role": "user", "content": "Hi"}]`. The text usually starts with
    /// the BOS token's text: submit it with
    /// [`Request::add_special_tokens`] off (what
    /// [`chat_request`](Self::chat_request) does), or tokenize it without
    /// adding another.
    ///
    /// Errors: `NotFound` when the model has no chat template (and
    /// `options` gives none), `Unsupported` for a template construct the
    /// renderer does not implement, `InvalidArgument` for malformed JSON or
    /// messages the template rejects (with its message).
    pub fn apply_chat_template(
        &self,
        messages_json: &str,
        options: &ChatTemplateOptions,
    ) -> Result<String> {
        let params = options.to_raw(messages_json)?;
        // SAFETY: the strings `params` points to live until the call
        // returns; `text` has `capacity` writable bytes.
        read_text(256, |text, capacity, len, err| unsafe {
            sys::pvllm_apply_chat_template(self.raw(), &params.raw, text, capacity, len, err)
        })
    }

    /// A request for the assistant's next turn of a conversation: the
    /// prompt is the chat template rendered over `messages_json` (as
    /// [`apply_chat_template`](Self::apply_chat_template)) and is submitted
    /// with [`add_special_tokens`](Request::add_special_tokens) off, since
    /// the template writes its own BOS: the prompt holds it once. Set the
    /// sampling, priority, ... with the `Request` builders, then
    /// [`submit`](Self::submit) or [`stream`](Self::stream) it.
    ///
    /// ```no_run
    /// # fn main() -> pvllm::Result<()> {
    /// use pvllm::{ChatTemplateOptions, Engine, EngineConfig, SamplingParams};
    ///
    /// let engine = Engine::new(&EngineConfig::new("models/llama-3.1-instruct"))?;
    /// let messages = r#"[{"role": "user", "content": "Name a colour."}]"#;
    /// let request = engine
    ///     .chat_request(messages, &ChatTemplateOptions::default())?
    ///     .with_sampling(SamplingParams::greedy(32));
    /// for event in engine.stream(&[request])? {
    ///     print!("{}", event?.text);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn chat_request(
        &self,
        messages_json: &str,
        options: &ChatTemplateOptions,
    ) -> Result<Request> {
        let prompt = self.apply_chat_template(messages_json, options)?;
        Ok(Request::text(prompt).with_add_special_tokens(false))
    }

    /// Generates the assistant's next turn of a conversation:
    /// [`generate`](Self::generate) over
    /// [`chat_request`](Self::chat_request)'s prompt (the rendered
    /// template, with no second BOS), returned as `generate` returns them.
    pub fn chat(
        &self,
        messages_json: &str,
        options: &ChatTemplateOptions,
        params: &SamplingParams,
    ) -> Result<Vec<Completion>> {
        let request = self
            .chat_request(messages_json, options)?
            .with_sampling(params.clone());
        self.generate_request(&request)
    }
}
