package main

import (
	"net/http"
)

// The fields /tokenize and /detokenize honour, in vLLM's shapes.
var (
	tokenizeFields = fieldPolicy{honoured: []string{"model", "prompt", "messages",
		"add_special_tokens", "add_generation_prompt", "chat_template_kwargs",
		"return_token_strs"}}
	detokenizeFields = fieldPolicy{honoured: []string{"model", "tokens"}}
)

type tokenizeResponse struct {
	Count       int       `json:"count"`
	MaxModelLen int       `json:"max_model_len"`
	Tokens      []int32   `json:"tokens"`
	TokenStrs   *[]string `json:"token_strs"`
}

// tokenize serves POST /tokenize: {"prompt": text} is encoded as a
// completion prompt is (BOS first unless add_special_tokens is false);
// {"messages": [...]} as a chat prompt is (the template's rendering,
// nothing added unless add_special_tokens is true).
func (s *server) tokenize(w http.ResponseWriter, r *http.Request) {
	b, aerr := readBody(w, r, s.opts.maxBodyBytes(), s.opts.readTimeout)
	if aerr == nil {
		aerr = tokenizeFields.check(b)
	}
	var model string
	if aerr == nil {
		_, aerr = b.decode("model", &model)
	}
	if aerr == nil {
		aerr = s.checkModel(model)
	}
	var strs bool
	if aerr == nil {
		_, aerr = b.decode("return_token_strs", &strs)
	}
	var ids []int32
	if aerr == nil {
		ids, aerr = s.tokenizeBody(b)
	}
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	resp := tokenizeResponse{Count: len(ids), MaxModelLen: s.maxModelLen, Tokens: ids}
	if strs {
		out := make([]string, len(ids))
		for i, id := range ids {
			if i == 0 {
				out[i], _ = s.eng.Detokenize([]int32{id})
			} else {
				out[i] = s.tokenText(ids[i-1], id)
			}
		}
		resp.TokenStrs = &out
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *server) tokenizeBody(b body) ([]int32, *apiError) {
	switch {
	case b.has("prompt") && b.has("messages"):
		return nil, invalidRequest("messages", "give 'prompt' or 'messages', not both")
	case b.has("messages"):
		addSpecial := false
		if _, err := b.decode("add_special_tokens", &addSpecial); err != nil {
			return nil, err
		}
		messages, opts, aerr := parseChat(b)
		if aerr != nil {
			return nil, aerr
		}
		p, aerr := s.renderChat(messages, &opts)
		if aerr != nil || !addSpecial {
			return p.ids, aerr
		}
		bos, err := s.eng.Tokenize("", true)
		if err != nil {
			return nil, engineError(err, nil)
		}
		return append(bos, p.ids...), nil
	case b.has("prompt"):
		if b.has("add_generation_prompt") || b.has("chat_template_kwargs") {
			return nil, invalidRequest("add_generation_prompt",
				"'add_generation_prompt' and 'chat_template_kwargs' go with 'messages'")
		}
		var text string
		if _, err := b.decode("prompt", &text); err != nil {
			return nil, err
		}
		addSpecial := true
		if _, err := b.decode("add_special_tokens", &addSpecial); err != nil {
			return nil, err
		}
		ids, err := s.eng.Tokenize(text, addSpecial)
		if err != nil {
			return nil, engineError(err, nil)
		}
		return ids, nil
	}
	return nil, invalidRequest("prompt", "'prompt' or 'messages' is required")
}

// detokenize serves POST /detokenize: {"tokens": [...]} -> {"prompt": text}.
func (s *server) detokenize(w http.ResponseWriter, r *http.Request) {
	b, aerr := readBody(w, r, s.opts.maxBodyBytes(), s.opts.readTimeout)
	if aerr == nil {
		aerr = detokenizeFields.check(b)
	}
	var model string
	if aerr == nil {
		_, aerr = b.decode("model", &model)
	}
	if aerr == nil {
		aerr = s.checkModel(model)
	}
	var ids []int32
	if aerr == nil {
		var ok bool
		if ok, aerr = b.decode("tokens", &ids); aerr == nil && !ok {
			aerr = invalidRequest("tokens", "'tokens' is required")
		}
	}
	if aerr == nil {
		for _, id := range ids {
			if id < 0 || int(id) >= s.vocabSize {
				aerr = invalidRequest("tokens", "token id %d is outside the vocabulary (0..%d)",
					id, s.vocabSize-1)
				break
			}
		}
	}
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	text, err := s.eng.Detokenize(ids)
	if err != nil {
		s.fail(w, r, engineError(err, nil))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text})
}
