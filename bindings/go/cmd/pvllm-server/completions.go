package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// completionsFields: what POST /v1/completions honours, and the OpenAI
// fields it implements only at their "off" value.
var completionsFields = fieldPolicy{
	honoured: append([]string{"prompt", "max_tokens", "logprobs", "best_of"}, samplingFields...),
	offOnly: map[string]offValue{
		"echo":       offFalse,
		"suffix":     offEmptyString,
		"logit_bias": offEmptyObject,
	},
}

type completionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     *choiceLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// choiceLogprobs is the completions endpoint's logprobs object.
type choiceLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage"`
}

// completions serves POST /v1/completions.
func (s *server) completions(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	b, g, aerr := s.readGeneration(w, r, completionsFields)
	budget := 16 // OpenAI's default for completions
	if aerr == nil {
		budget, aerr = maxTokens(b, budget, "max_tokens")
	}
	if aerr == nil {
		aerr = completionsExtras(b, &g)
	}
	var prompts []promptInput
	if aerr == nil {
		prompts, aerr = parsePrompts(b)
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

	ps := make([]prompt, len(prompts))
	for i, p := range prompts {
		if ps[i], aerr = s.promptIDs(p); aerr == nil {
			_, aerr = s.checkContext(len(ps[i].ids), budget, "max_tokens")
		}
		if aerr != nil {
			s.fail(w, r, aerr)
			return
		}
	}
	if aerr = s.checkCallSize(ps, g.params.N, budget); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	g.params.MaxTokens = budget
	s.serveCall(w, r, s.newCall("completions", "cmpl", arrival, g), ps,
		(*call).streamCompletion, (*call).completeAll)
}

// completionsExtras reads the completions-only fields: logprobs (an
// integer: the top alternatives per token) and best_of, honoured when it
// equals n (the choices returned are all the choices made).
func completionsExtras(b body, g *generationRequest) *apiError {
	var lp int
	if ok, err := b.decode("logprobs", &lp); err != nil {
		return err
	} else if ok {
		if lp < 0 {
			return invalidRequest("logprobs", "'logprobs' must be at least 0, got %d", lp)
		}
		g.params.Logprobs = lp
	}
	var bestOf int
	if ok, err := b.decode("best_of", &bestOf); err != nil {
		return err
	} else if ok && bestOf != g.params.N {
		return withCode(invalidRequest("best_of", "'best_of' is supported only equal to n (%d): "+
			"this server returns every choice it makes", g.params.N), "unsupported_parameter")
	}
	return nil
}

func (c *call) completionChoice(ch *choice, o *pvllm.Output, text string) completionChoice {
	cc := completionChoice{Text: text, Index: ch.index}
	if o != nil {
		cc.FinishReason = finishReason(o.FinishReason)
		if c.req.params.Logprobs >= 0 {
			cc.Logprobs = c.s.completionLogprobs(o.Logprobs, ch.prevToken, ch.textBytes)
		}
	}
	return cc
}

func (c *call) completeAll(ctx context.Context, w http.ResponseWriter) {
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
	resp := completionResponse{ID: c.id, Object: "text_completion", Created: c.created,
		Model: c.s.model, Usage: &u, Choices: make([]completionChoice, len(c.choices))}
	for i, ch := range c.choices {
		cc := completionChoice{Text: ch.text.String(), Index: ch.index,
			FinishReason: finishReason(ch.finish)}
		if c.req.params.Logprobs >= 0 {
			cc.Logprobs = c.s.completionLogprobs(ch.logprobs, ch.prevToken, 0)
		}
		resp.Choices[i] = cc
	}
	writeJSON(w, http.StatusOK, resp)
}

func (c *call) streamCompletion(ctx context.Context, w http.ResponseWriter) {
	sw := newEventWriter(w)
	chunk := func(choices []completionChoice, u *usage) completionResponse {
		return completionResponse{ID: c.id, Object: "text_completion", Created: c.created,
			Model: c.s.model, Choices: choices, Usage: u}
	}
	err := c.run(ctx, func(ch *choice, o pvllm.Output) error {
		if o.FinishReason == pvllm.FinishError || o.FinishReason == pvllm.FinishAbort {
			return sw.error(c.failure())
		}
		if o.Text == "" && len(o.TokenIDs) == 0 && o.FinishReason == pvllm.FinishNone {
			return nil
		}
		cc := c.completionChoice(ch, &o, o.Text)
		ch.textBytes += len(o.Text)
		if n := len(o.TokenIDs); n > 0 {
			ch.prevToken = o.TokenIDs[n-1]
		}
		return sw.data(chunk([]completionChoice{cc}, nil))
	})
	if err != nil {
		return
	}
	if c.req.includeUsage {
		u := c.usage()
		if sw.data(chunk([]completionChoice{}, &u)) != nil {
			return
		}
	}
	sw.done()
}

// writeJSON writes v as the response body.
func writeJSON(w http.ResponseWriter, status int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
