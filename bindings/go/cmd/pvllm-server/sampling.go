package main

import (
	"encoding/json"

	"pvllm.dev/pvllm/pvllm"
)

// samplingFields are the sampling fields both generation endpoints honour:
// OpenAI's, then pvllm's extensions (as vLLM spells them).
var samplingFields = []string{
	"model", "n", "temperature", "top_p", "presence_penalty", "frequency_penalty", "seed",
	"stop", "stream", "stream_options", "user",
	"top_k", "min_p", "repetition_penalty", "ignore_eos", "stop_token_ids",
	"response_format", "guided_regex", "guided_choice", "guided_grammar",
}

// generationRequest is what both endpoints share once parsed.
type generationRequest struct {
	model         string
	params        pvllm.SamplingParams
	stream        bool
	includeUsage  bool
	user          string
	choicesPerJob int // n
	// constraintField names the field that set params.Constraint
	// ("response_format.json_schema.schema", "guided_regex", ...): a
	// refusal of the constraint by the library names it. "" = none.
	constraintField string
}

// parseSampling reads the shared fields. Range checks beyond the JSON kinds
// are the library's: a value it refuses comes back from Submit as a 400
// naming the field (engineError).
func parseSampling(b body) (generationRequest, *apiError) {
	g := generationRequest{params: pvllm.DefaultSamplingParams()}
	p := &g.params
	floats := []struct {
		name string
		dst  *float32
	}{
		{"temperature", &p.Temperature}, {"top_p", &p.TopP},
		{"presence_penalty", &p.PresencePenalty}, {"frequency_penalty", &p.FrequencyPenalty},
		{"min_p", &p.MinP}, {"repetition_penalty", &p.RepetitionPenalty},
	}
	for _, f := range floats {
		if _, err := b.decode(f.name, f.dst); err != nil {
			return g, err
		}
	}
	if _, err := b.decode("model", &g.model); err != nil {
		return g, err
	}
	if _, err := b.decode("top_k", &p.TopK); err != nil {
		return g, err
	}
	if p.TopK == -1 {
		p.TopK = 0 // vLLM's spelling of "off"
	}
	if _, err := b.decode("n", &p.N); err != nil {
		return g, err
	}
	if p.N < 1 {
		return g, invalidRequest("n", "'n' must be at least 1, got %d", p.N)
	}
	g.choicesPerJob = p.N
	var seed int64
	if ok, err := b.decode("seed", &seed); err != nil {
		return g, err
	} else if ok {
		s := uint64(seed)
		p.Seed = &s
	}
	if _, err := b.decode("ignore_eos", &p.IgnoreEOS); err != nil {
		return g, err
	}
	if _, err := b.decode("stop_token_ids", &p.StopTokenIDs); err != nil {
		return g, err
	}
	if _, err := b.decode("user", &g.user); err != nil {
		return g, err
	}
	if err := parseConstraint(b, &g); err != nil {
		return g, err
	}
	stop, err := parseStop(b)
	if err != nil {
		return g, err
	}
	p.Stop = stop
	if _, err := b.decode("stream", &g.stream); err != nil {
		return g, err
	}
	if b.has("stream_options") {
		if !g.stream {
			return g, invalidRequest("stream_options",
				"'stream_options' is only allowed when 'stream' is true")
		}
		var opts map[string]json.RawMessage
		if _, err := b.decode("stream_options", &opts); err != nil {
			return g, err
		}
		for name := range opts {
			if name != "include_usage" {
				return g, withCode(invalidRequest("stream_options."+name,
					"Unrecognized request argument supplied: stream_options.%s", name),
					"unsupported_parameter")
			}
		}
		if _, err := body(opts).decode("include_usage", &g.includeUsage); err != nil {
			err.Param = strPtr("stream_options.include_usage")
			return g, err
		}
	}
	return g, nil
}

// parseStop accepts a string or an array of non-empty strings.
func parseStop(b body) ([]string, *apiError) {
	if !b.has("stop") {
		return nil, nil
	}
	var one string
	if json.Unmarshal(b["stop"], &one) == nil {
		if one == "" {
			return nil, invalidRequest("stop", "'stop' must not be an empty string")
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(b["stop"], &many); err != nil {
		return nil, invalidRequest("stop", "'stop' must be a string or an array of strings")
	}
	for _, s := range many {
		if s == "" {
			return nil, invalidRequest("stop", "'stop' must not hold an empty string")
		}
	}
	return many, nil
}

// maxTokens reads the token budget: field (max_tokens, or for chat
// max_completion_tokens, which wins) when given, else def.
func maxTokens(b body, def int, fields ...string) (int, *apiError) {
	for _, f := range fields {
		var v int
		ok, err := b.decode(f, &v)
		if err != nil {
			return 0, err
		}
		if ok {
			if v < 1 {
				return 0, invalidRequest(f, "'%s' must be at least 1, got %d", f, v)
			}
			return v, nil
		}
	}
	return def, nil
}
