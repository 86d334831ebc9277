package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"pvllm.dev/pvllm/pvllm"
)

// completionRequest is the body of POST /v1/completions. Optional fields
// are pointers so that "absent" keeps the OpenAI default.
type completionRequest struct {
	Model             string          `json:"model"`
	Prompt            json.RawMessage `json:"prompt"`
	MaxTokens         *int            `json:"max_tokens"`
	Temperature       *float32        `json:"temperature"`
	TopP              *float32        `json:"top_p"`
	TopK              *int            `json:"top_k"` // extension
	MinP              *float32        `json:"min_p"` // extension
	N                 *int            `json:"n"`
	Stop              json.RawMessage `json:"stop"`
	Seed              *int64          `json:"seed"`
	Logprobs          *int            `json:"logprobs"`
	Stream            bool            `json:"stream"`
	StreamOptions     *streamOptions  `json:"stream_options"`
	PresencePenalty   *float32        `json:"presence_penalty"`
	FrequencyPenalty  *float32        `json:"frequency_penalty"`
	RepetitionPenalty *float32        `json:"repetition_penalty"` // extension
	IgnoreEOS         bool            `json:"ignore_eos"`         // extension
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// prompt is one entry of the request's prompt: text, or token ids.
type prompt struct {
	text string
	ids  []int32 // non-nil for a token prompt
}

type completionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     *choiceLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// choiceLogprobs is the legacy completions logprobs object.
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
	Usage   *usage             `json:"usage,omitempty"`
}

// apiError is an OpenAI-style error, written as {"error": {...}}.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func invalidRequest(param, format string, args ...interface{}) *apiError {
	e := &apiError{status: http.StatusBadRequest, Type: "invalid_request_error",
		Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// decodeError turns a JSON decoding failure into a 400 naming the field.
func decodeError(err error) *apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return invalidRequest(typeErr.Field, "'%s' must be a %s, got a JSON %s",
			typeErr.Field, typeErr.Type, typeErr.Value)
	}
	return invalidRequest("", "the request body is not valid JSON: %v", err)
}

// parsePrompts accepts a string, an array of strings, an array of token ids
// or an array of arrays of token ids.
func parsePrompts(raw json.RawMessage) ([]prompt, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalidRequest("prompt", "'prompt' is required")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []prompt{{text: one}}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) > 0 {
		ps := make([]prompt, len(texts))
		for i, t := range texts {
			ps[i] = prompt{text: t}
		}
		return ps, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []prompt{{ids: ids}}, nil
	}
	var idLists [][]int32
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) > 0 {
		ps := make([]prompt, len(idLists))
		for i, l := range idLists {
			if len(l) == 0 {
				return nil, invalidRequest("prompt", "'prompt' %d is an empty token list", i)
			}
			ps[i] = prompt{ids: l}
		}
		return ps, nil
	}
	return nil, invalidRequest("prompt",
		"'prompt' must be a string, a non-empty array of strings, or token ids")
}

func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many, nil
	}
	return nil, invalidRequest("stop", "'stop' must be a string or an array of strings")
}

// samplingParams maps the request onto pvllm's parameters. Range checks are
// the library's: a value it rejects comes back from Submit as
// StatusInvalidArgument and becomes a 400 through engineError.
func (r *completionRequest) samplingParams(stop []string) pvllm.SamplingParams {
	p := pvllm.DefaultSamplingParams()
	p.MaxTokens = 16 // OpenAI's default
	if r.MaxTokens != nil {
		p.MaxTokens = *r.MaxTokens
	}
	if r.Temperature != nil {
		p.Temperature = *r.Temperature
	}
	if r.TopP != nil {
		p.TopP = *r.TopP
	}
	if r.TopK != nil {
		p.TopK = *r.TopK
	}
	if r.MinP != nil {
		p.MinP = *r.MinP
	}
	if r.N != nil {
		p.N = *r.N
	}
	if r.PresencePenalty != nil {
		p.PresencePenalty = *r.PresencePenalty
	}
	if r.FrequencyPenalty != nil {
		p.FrequencyPenalty = *r.FrequencyPenalty
	}
	if r.RepetitionPenalty != nil {
		p.RepetitionPenalty = *r.RepetitionPenalty
	}
	if r.Seed != nil {
		seed := uint64(*r.Seed)
		p.Seed = &seed
	}
	if r.Logprobs != nil {
		p.Logprobs = *r.Logprobs
	}
	p.Stop = stop
	p.IgnoreEOS = r.IgnoreEOS
	return p
}

var (
	// "sampling params: top_p must be in (0, 1], got 2.000000"
	samplingField = regexp.MustCompile(`sampling params: ([a-z_]+)`)
)

// engineError maps a pvllm failure to an HTTP error; rejected parameters
// become a 400 naming the parameter the library named.
func engineError(err error) *apiError {
	if errors.Is(err, pvllm.ErrClosed) {
		return &apiError{status: http.StatusServiceUnavailable, Type: "server_error",
			Message: "the engine is shutting down"}
	}
	var perr *pvllm.Error
	if errors.As(err, &perr) && perr.Status == pvllm.StatusInvalidArgument {
		param := ""
		switch m := perr.Message; {
		case samplingField.MatchString(m):
			param = samplingField.FindStringSubmatch(m)[1]
			if param == "stop_token_ids" {
				param = "stop"
			}
		case strings.HasPrefix(m, "n = "):
			param = "n"
		case strings.Contains(m, "prompt"):
			param = "prompt"
		}
		return invalidRequest(param, "%s", perr.Message)
	}
	return &apiError{status: http.StatusInternalServerError, Type: "server_error",
		Message: err.Error()}
}

func finishReason(r pvllm.FinishReason) *string {
	if r == pvllm.FinishNone {
		return nil
	}
	s := r.String()
	return &s
}
