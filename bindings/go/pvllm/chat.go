package pvllm

// Chat templates: the prompt a model's chat template makes of a
// conversation (pvllm_apply_chat_template).

/*
#include <stdlib.h>
#include <pvllm/pvllm.h>
*/
import "C"

import "unsafe"

// ChatTemplateOptions are the optional parts of ApplyChatTemplate; the zero
// value adds the generation prompt and nothing else.
type ChatTemplateOptions struct {
	// Tools is a JSON array of tool schemas; "" = none.
	Tools string
	// ExtraContext is a JSON object of more template variables, e.g.
	// `{"enable_thinking": false}`; "" = none.
	ExtraContext string
	// NoGenerationPrompt leaves out the header that opens the assistant's
	// turn.
	NoGenerationPrompt bool
	// TemplateName picks a named template of a model that ships several;
	// "" = "tool_use" when Tools is set and the model has one, else
	// "default".
	TemplateName string
}

// ApplyChatTemplate renders the model's chat template over messagesJSON, a
// JSON array of OpenAI-style messages such as
// `[{"role": "user", "content": "Hi"}]`; opts may be nil. The text usually
// starts with the BOS token's text: tokenize it without adding another.
// Errors carry StatusNotFound when the model has no template,
// StatusUnsupported for a construct the renderer does not implement, and
// StatusInvalidArgument for malformed JSON or messages the template rejects.
func (eng *Engine) ApplyChatTemplate(messagesJSON string, opts *ChatTemplateOptions) (string, error) {
	if opts == nil {
		opts = &ChatTemplateOptions{}
	}
	e := eng.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return "", ErrClosed
	}
	var params C.pvllm_chat_template_params
	C.pvllm_chat_template_params_init(&params, C.size_t(unsafe.Sizeof(params)))
	params.messages_json = C.CString(messagesJSON)
	defer C.free(unsafe.Pointer(params.messages_json))
	optional := func(s string) *C.char {
		if s == "" {
			return nil
		}
		return C.CString(s)
	}
	params.tools_json = optional(opts.Tools)
	defer C.free(unsafe.Pointer(params.tools_json))
	params.extra_context_json = optional(opts.ExtraContext)
	defer C.free(unsafe.Pointer(params.extra_context_json))
	params.template_name = optional(opts.TemplateName)
	defer C.free(unsafe.Pointer(params.template_name))
	if opts.NoGenerationPrompt {
		params.add_generation_prompt = 0
	}
	return readText(256, func(buf *C.char, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status {
		return C.pvllm_apply_chat_template(e.h, &params, buf, capacity, n, cerr)
	})
}
