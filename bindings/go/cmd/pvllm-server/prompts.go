package main

import (
	"encoding/json"

	"pvllm.dev/pvllm/pvllm"
)

// promptInput is one entry of a completions prompt: text, or token ids.
type promptInput struct {
	text string
	ids  []int32 // non-nil for a token prompt
}

// parsePrompts accepts a string, an array of strings, an array of token ids
// or an array of arrays of token ids; none may be empty.
func parsePrompts(b body) ([]promptInput, *apiError) {
	if !b.has("prompt") {
		return nil, invalidRequest("prompt", "'prompt' is required")
	}
	raw := b["prompt"]
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, invalidRequest("prompt", "'prompt' is empty")
		}
		return []promptInput{{text: one}}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) > 0 {
		ps := make([]promptInput, len(texts))
		for i, t := range texts {
			if t == "" {
				return nil, invalidRequest("prompt", "'prompt' %d is empty", i)
			}
			ps[i] = promptInput{text: t}
		}
		return ps, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []promptInput{{ids: ids}}, nil
	}
	var idLists [][]int32
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) > 0 {
		ps := make([]promptInput, len(idLists))
		for i, l := range idLists {
			if len(l) == 0 {
				return nil, invalidRequest("prompt", "'prompt' %d is an empty token list", i)
			}
			ps[i] = promptInput{ids: l}
		}
		return ps, nil
	}
	return nil, invalidRequest("prompt",
		"'prompt' must be a non-empty string, array of strings, array of token ids, "+
			"or array of such arrays")
}

// prompt is one engine request of a call: what to submit (less the call's
// sampling params) and its prompt's token ids, which count for usage and
// the limits and start the token strings of logprobs.
type prompt struct {
	req pvllm.Request
	ids []int32
}

// promptIDs tokenizes a text prompt as the engine would (BOS first) and
// submits the ids; token prompts are taken as given (the engine checks
// them at submit).
func (s *server) promptIDs(p promptInput) (prompt, *apiError) {
	if p.ids != nil {
		for _, id := range p.ids {
			if id < 0 || int(id) >= s.vocabSize {
				return prompt{}, invalidRequest("prompt", "token id %d is outside the "+
					"vocabulary (0..%d)", id, s.vocabSize-1)
			}
		}
		return prompt{req: pvllm.Request{PromptTokens: p.ids}, ids: p.ids}, nil
	}
	ids, err := s.eng.Tokenize(p.text, true)
	if err != nil {
		return prompt{}, engineError(err, nil)
	}
	return prompt{req: pvllm.Request{PromptTokens: ids}, ids: ids}, nil
}
