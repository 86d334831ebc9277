package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// chatFields: what POST /v1/chat/completions honours, and the OpenAI
// fields it implements only at their "off" value.
var chatFields = fieldPolicy{
	honoured: append([]string{"messages", "max_tokens", "max_completion_tokens", "logprobs",
		"top_logprobs", "chat_template_kwargs", "add_generation_prompt"}, samplingFields...),
	offOnly: map[string]offValue{
		"logit_bias":          offEmptyObject,
		"tools":               offEmptyArray,
		"tool_choice":         offString("none", "auto"),
		"parallel_tool_calls": offAnyBool,
		"functions":           offEmptyArray,
		"function_call":       offString("none", "auto"),
		"store":               offFalse,
		"metadata":            offEmptyObject,
		"service_tier":        offString("auto", "default"),
		"modalities":          offJSON(`["text"]`),
		"audio":               offNull,
		"prediction":          offNull,
		"reasoning_effort":    offNull,
		"web_search_options":  offNull,
	},
}

type chatMessageOut struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *chatLogprobs  `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *usage            `json:"usage"`
}

// chatCompletions serves POST /v1/chat/completions: the chat template
// (--chat-template, else the model's) renders the messages; the rest is a
// completion of that prompt.
func (s *server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	b, g, aerr := s.readGeneration(w, r, chatFields)
	budget := 0 // as many as the context holds
	if aerr == nil {
		budget, aerr = maxTokens(b, 0, "max_completion_tokens", "max_tokens")
	}
	if aerr == nil {
		aerr = chatLogprobsParams(b, &g)
	}
	var messages []byte
	var tmpl pvllm.ChatTemplateOptions
	if aerr == nil {
		messages, tmpl, aerr = parseChat(b)
	}
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	release, aerr := s.admit(r.Context())
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	defer release()

	p, aerr := s.renderChat(messages, &tmpl)
	if aerr == nil {
		budget, aerr = s.checkContext(len(p.ids), budget, "max_completion_tokens")
	}
	if aerr == nil {
		aerr = s.checkCallSize([]prompt{p}, g.params.N, budget)
	}
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	g.params.MaxTokens = budget
	s.serveCall(w, r, s.newCall("chat", "chatcmpl", arrival, g), []prompt{p},
		(*call).streamChat, (*call).chatAll)
}

// chatLogprobsParams reads logprobs (a boolean) and top_logprobs (the
// alternatives per token, which needs logprobs).
func chatLogprobsParams(b body, g *generationRequest) *apiError {
	var want bool
	if _, err := b.decode("logprobs", &want); err != nil {
		return err
	}
	top := 0
	hasTop, err := b.decode("top_logprobs", &top)
	if err != nil {
		return err
	}
	if hasTop && !want {
		return invalidRequest("top_logprobs", "'top_logprobs' needs 'logprobs' to be true")
	}
	if top < 0 {
		return invalidRequest("top_logprobs", "'top_logprobs' must be at least 0, got %d", top)
	}
	if want {
		g.params.Logprobs = top
	}
	return nil
}

// parseChat checks the messages and returns them as the template takes
// them: content parts joined into one string, "developer" as "system".
func parseChat(b body) ([]byte, pvllm.ChatTemplateOptions, *apiError) {
	var opts pvllm.ChatTemplateOptions
	var msgs []map[string]json.RawMessage
	if ok, err := b.decode("messages", &msgs); err != nil {
		return nil, opts, err
	} else if !ok || len(msgs) == 0 {
		return nil, opts, invalidRequest("messages", "'messages' must be a non-empty array")
	}
	for i, m := range msgs {
		if aerr := normalizeMessage(i, m); aerr != nil {
			return nil, opts, aerr
		}
	}
	if b.has("chat_template_kwargs") {
		var kw map[string]json.RawMessage
		if _, err := b.decode("chat_template_kwargs", &kw); err != nil {
			return nil, opts, err
		}
		opts.ExtraContext = string(b["chat_template_kwargs"])
	}
	addPrompt := true
	if _, err := b.decode("add_generation_prompt", &addPrompt); err != nil {
		return nil, opts, err
	}
	opts.NoGenerationPrompt = !addPrompt
	out, err := json.Marshal(msgs)
	if err != nil {
		return nil, opts, serverError("messages: %v", err)
	}
	return out, opts, nil
}

var chatRoles = map[string]string{"system": "system", "developer": "system", "user": "user",
	"assistant": "assistant", "tool": "tool"}

func normalizeMessage(i int, m map[string]json.RawMessage) *apiError {
	at := func(field string) string { return fmt.Sprintf("messages[%d].%s", i, field) }
	var role string
	if err := json.Unmarshal(m["role"], &role); err != nil || role == "" {
		return invalidRequest(at("role"), "'%s' must be a string", at("role"))
	}
	mapped, ok := chatRoles[role]
	if !ok {
		return invalidRequest(at("role"), "'%s' is '%s'; the roles are system, developer, "+
			"user, assistant and tool", at("role"), role)
	}
	m["role"], _ = json.Marshal(mapped)
	raw, present := m["content"]
	if !present || string(raw) == "null" {
		if role == "assistant" {
			return nil // an assistant turn may hold only tool calls
		}
		return invalidRequest(at("content"), "'%s' is required", at("content"))
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return nil
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return invalidRequest(at("content"), "'%s' must be a string or an array of parts",
			at("content"))
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		var kind, t string
		json.Unmarshal(p["type"], &kind)
		if kind != "text" {
			field := fmt.Sprintf("messages[%d].content[%d].type", i, j)
			return withCode(invalidRequest(field, "'%s' is '%s'; this server takes text parts only",
				field, kind), "unsupported_parameter")
		}
		if err := json.Unmarshal(p["text"], &t); err != nil {
			field := fmt.Sprintf("messages[%d].content[%d].text", i, j)
			return invalidRequest(field, "'%s' must be a string", field)
		}
		texts = append(texts, t)
	}
	m["content"], _ = json.Marshal(strings.Join(texts, "\n"))
	return nil
}

// renderChat renders the chat template (--chat-template, else the
// model's) over the messages into the request that continues them
// (pvllm's ChatRequest: the text, submitted without adding special tokens,
// since templates write their own BOS). The text's ids, tokenized the same
// way, count for usage and the limits before it is submitted.
func (s *server) renderChat(messages []byte, opts *pvllm.ChatTemplateOptions) (prompt, *apiError) {
	var o pvllm.ChatTemplateOptions
	if opts != nil {
		o = *opts
	}
	o.ChatTemplate = s.opts.chatTemplate
	req, err := s.eng.ChatRequest(string(messages), &o)
	if err != nil {
		var perr *pvllm.Error
		if errors.As(err, &perr) {
			switch perr.Status {
			case pvllm.StatusNotFound:
				return prompt{}, withCode(invalidRequest("messages", "%s; use /v1/completions, "+
					"put a chat_template.jinja in the model's folder, or start the server with "+
					"--chat-template FILE", perr.Message), "chat_template_not_found")
			case pvllm.StatusInvalidArgument:
				return prompt{}, invalidRequest("messages", "the chat template refused the "+
					"messages: %s", perr.Message)
			case pvllm.StatusUnsupported:
				return prompt{}, serverError("the chat template uses what pvllm does not "+
					"render: %s", perr.Message)
			}
		}
		return prompt{}, engineError(err, nil)
	}
	ids, err := s.eng.Tokenize(req.Prompt, false)
	if err != nil {
		return prompt{}, engineError(err, nil)
	}
	if len(ids) == 0 {
		return prompt{}, invalidRequest("messages", "the chat template made an empty prompt")
	}
	return prompt{req: req, ids: ids}, nil
}

func (c *call) chatAll(ctx context.Context, w http.ResponseWriter) {
	err := c.run(ctx, func(ch *choice, o pvllm.Output) error {
		ch.text.WriteString(o.Text)
		ch.logprobs = append(ch.logprobs, o.Logprobs...)
		return nil
	})
	if err != nil {
		return // the client is gone
	}
	if aerr := c.failure(); aerr != nil {
		writeError(w, aerr)
		return
	}
	u := c.usage()
	resp := chatResponse{ID: c.id, Object: "chat.completion", Created: c.created,
		Model: c.s.model, Usage: &u, Choices: make([]chatChoice, len(c.choices))}
	for i, ch := range c.choices {
		cc := chatChoice{Index: ch.index, FinishReason: finishReason(ch.finish),
			Message: chatMessageOut{Role: "assistant", Content: ch.text.String()}}
		if c.req.params.Logprobs >= 0 {
			cc.Logprobs = c.s.chatLogprobs(ch.logprobs, ch.prevToken)
		}
		resp.Choices[i] = cc
	}
	writeJSON(w, http.StatusOK, resp)
}

func (c *call) streamChat(ctx context.Context, w http.ResponseWriter) {
	sw := newEventWriter(w)
	chunk := func(cc ...chatChunkChoice) chatChunk {
		if cc == nil {
			cc = []chatChunkChoice{}
		}
		return chatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created,
			Model: c.s.model, Choices: cc}
	}
	empty := ""
	for _, ch := range c.choices {
		if sw.data(chunk(chatChunkChoice{Index: ch.index,
			Delta: chatDelta{Role: "assistant", Content: &empty}})) != nil {
			return
		}
	}
	err := c.run(ctx, func(ch *choice, o pvllm.Output) error {
		if o.FinishReason == pvllm.FinishError || o.FinishReason == pvllm.FinishAbort {
			return sw.error(c.failure())
		}
		if o.Text != "" || len(o.TokenIDs) > 0 {
			text := o.Text
			cc := chatChunkChoice{Index: ch.index, Delta: chatDelta{Content: &text}}
			if c.req.params.Logprobs >= 0 {
				cc.Logprobs = c.s.chatLogprobs(o.Logprobs, ch.prevToken)
			}
			if n := len(o.TokenIDs); n > 0 {
				ch.prevToken = o.TokenIDs[n-1]
			}
			if err := sw.data(chunk(cc)); err != nil {
				return err
			}
		}
		if o.FinishReason != pvllm.FinishNone {
			return sw.data(chunk(chatChunkChoice{Index: ch.index,
				FinishReason: finishReason(o.FinishReason)}))
		}
		return nil
	})
	if err != nil {
		return
	}
	if c.req.includeUsage {
		u := c.usage()
		final := chunk()
		final.Usage = &u
		if sw.data(final) != nil {
			return
		}
	}
	sw.done()
}
