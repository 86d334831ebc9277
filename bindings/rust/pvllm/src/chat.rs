//! Chat templates: the prompt a model's template makes of a conversation.
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;

use pvllm_sys as sys;

use crate::config::nul_error;
use crate::engine::Engine;
use crate::error::{read_text, Result};

/// Options of [`Engine::apply_chat_template`]; the default adds the
/// generation prompt and nothing else.
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
}

impl Default for ChatTemplateOptions {
    fn default() -> Self {
        ChatTemplateOptions {
            tools_json: None,
            extra_context_json: None,
            add_generation_prompt: true,
            template_name: None,
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

impl Engine {
    /// Renders the model's chat template (pvllm_apply_chat_template) over
    /// `messages_json`, a JSON array of OpenAI-style messages such as
    /// `[{"role": "user", "content": "Hi"}]`. The text usually starts with
    /// the BOS token's text: tokenize it without adding another.
    ///
    /// Errors: `NotFound` when the model has no chat template,
    /// `Unsupported` for a template construct the renderer does not
    /// implement, `InvalidArgument` for malformed JSON or messages the
    /// template rejects (with its message).
    pub fn apply_chat_template(
        &self,
        messages_json: &str,
        options: &ChatTemplateOptions,
    ) -> Result<String> {
        let messages = CString::new(messages_json).map_err(|_| nul_error("messages_json"))?;
        let tools = optional_cstring(&options.tools_json, "tools_json")?;
        let extra = optional_cstring(&options.extra_context_json, "extra_context_json")?;
        let name = optional_cstring(&options.template_name, "template_name")?;
        // SAFETY: a zeroed struct is valid input for its _init, which fills
        // the defaults for sizeof(the struct).
        let mut params: sys::pvllm_chat_template_params = unsafe { std::mem::zeroed() };
        unsafe {
            sys::pvllm_chat_template_params_init(
                &mut params,
                std::mem::size_of::<sys::pvllm_chat_template_params>(),
            )
        };
        params.messages_json = messages.as_ptr();
        params.tools_json = ptr_of(&tools);
        params.extra_context_json = ptr_of(&extra);
        params.add_generation_prompt = options.add_generation_prompt as u8;
        params.template_name = ptr_of(&name);
        // SAFETY: the strings `params` points to live until the call
        // returns; `text` has `capacity` writable bytes.
        read_text(256, |text, capacity, len, err| unsafe {
            sys::pvllm_apply_chat_template(self.raw(), &params, text, capacity, len, err)
        })
    }
}
