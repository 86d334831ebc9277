package pvllm

// Chat templates: the prompt a model's chat template makes of a
// conversation (pvllm_apply_chat_template), and requests that continue it.

/*
#include <stdlib.h>
#include <pvllm/pvllm.h>
*/
import "C"

import (
	"context"
	"strings"
	"unsafe"
)

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
	// ChatTemplate, when set, is a Jinja chat template rendered instead of
	// the model's (pvllm_chat_template_params.chat_template, libpvllm 0.9;
	// vLLM's --chat-template): for a model that ships none, or to try
	// another. TemplateName is then ignored; the special tokens it reads
	// (bos_token, eos_token) still come from the model. An older library
	// would render the model's template instead, so it is refused there
	// (StatusUnsupported).
	ChatTemplate string
}

// cChatTemplateParams fills p from messagesJSON and opts (nil: the zero
// value) in C memory; free releases it. Engines and Tokenizers render
// through it.
func cChatTemplateParams(messagesJSON string, opts *ChatTemplateOptions,
	p *C.pvllm_chat_template_params) (free func(), err error) {
	if opts == nil {
		opts = &ChatTemplateOptions{}
	}
	if opts.ChatTemplate != "" {
		if VersionNumber() < versionChatTemplateText {
			return nil, &Error{Status: StatusUnsupported, Message: "chat template options: " +
				"ChatTemplate: libpvllm " + Version() + " is older than 0.9"}
		}
		// A C string would end at the NUL and render part of the template.
		if strings.IndexByte(opts.ChatTemplate, 0) >= 0 {
			return nil, &Error{Status: StatusInvalidArgument,
				Message: "chat template options: ChatTemplate holds a NUL byte"}
		}
	}
	C.pvllm_chat_template_params_init(p, C.size_t(unsafe.Sizeof(*p)))
	var strs []*C.char
	cstr := func(s string) *C.char {
		c := C.CString(s)
		strs = append(strs, c)
		return c
	}
	optional := func(s string) *C.char {
		if s == "" {
			return nil
		}
		return cstr(s)
	}
	p.messages_json = cstr(messagesJSON)
	p.tools_json = optional(opts.Tools)
	p.extra_context_json = optional(opts.ExtraContext)
	p.template_name = optional(opts.TemplateName)
	p.chat_template = optional(opts.ChatTemplate)
	if opts.NoGenerationPrompt {
		p.add_generation_prompt = 0
	}
	return func() {
		for _, s := range strs {
			C.free(unsafe.Pointer(s))
		}
	}, nil
}

// ApplyChatTemplate renders the model's chat template over messagesJSON, a
// JSON array of OpenAI-style messages such as
// `[{"role": "user", "content": "Hi"}]`; opts may be nil. The text usually
// starts with the BOS token's text: submit it with NoAddSpecialTokens (as
// ChatRequest does), or tokenize it without adding another.
// Errors carry StatusNotFound when the model has no template,
// StatusUnsupported for a construct the renderer does not implement, and
// StatusInvalidArgument for malformed JSON or messages the template rejects.
func (eng *Engine) ApplyChatTemplate(messagesJSON string, opts *ChatTemplateOptions) (string, error) {
	var params C.pvllm_chat_template_params
	free, err := cChatTemplateParams(messagesJSON, opts, &params)
	if err != nil {
		return "", err
	}
	defer free()
	e := eng.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return "", ErrClosed
	}
	return readText(256, func(buf *C.char, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status {
		return C.pvllm_apply_chat_template(e.h, &params, buf, capacity, n, cerr)
	})
}

// ChatRequest renders messagesJSON with the model's chat template (opts may
// be nil; see ApplyChatTemplate) and returns the request that continues the
// conversation: Prompt is the rendered text and NoAddSpecialTokens is set,
// because the template wrote the BOS itself, so the prompt starts with
// exactly one. Params are DefaultSamplingParams(); set them, and Priority,
// then Submit it to stream the answer.
func (eng *Engine) ChatRequest(messagesJSON string, opts *ChatTemplateOptions) (Request, error) {
	prompt, err := eng.ApplyChatTemplate(messagesJSON, opts)
	if err != nil {
		return Request{}, err
	}
	return Request{Prompt: prompt, NoAddSpecialTokens: true, Params: DefaultSamplingParams()}, nil
}

// Chat continues a conversation, as Generate continues a prompt: it renders
// messagesJSON with the chat template (ChatRequest; opts may be nil),
// generates with params and waits for all samples.
func (eng *Engine) Chat(ctx context.Context, messagesJSON string, opts *ChatTemplateOptions,
	params SamplingParams) (*Result, error) {
	req, err := eng.ChatRequest(messagesJSON, opts)
	if err != nil {
		return nil, err
	}
	req.Params = params
	s, err := eng.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.Collect()
}
