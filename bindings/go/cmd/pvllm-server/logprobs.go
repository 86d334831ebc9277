package main

import (
	"fmt"
	"strings"

	"pvllm.dev/pvllm/pvllm"
)

// tokenText is what decoding id after prev adds to the text, so a token's
// leading space survives (decoding it alone would drop it). A token that is
// part of a character split over several byte tokens reads U+FFFD.
func (s *server) tokenText(prev, id int32) string {
	before, err1 := s.eng.Detokenize([]int32{prev})
	after, err2 := s.eng.Detokenize([]int32{prev, id})
	if err1 == nil && err2 == nil && strings.HasPrefix(after, before) {
		return after[len(before):]
	}
	if t, err := s.eng.Detokenize([]int32{id}); err == nil {
		return t
	}
	return fmt.Sprintf("<%d>", id)
}

// completionLogprobs builds the completions logprobs object for tokens that
// follow the token prev; offsets count bytes of the choice's text from
// offset.
func (s *server) completionLogprobs(lps []pvllm.TokenLogprobs, prev int32, offset int) *choiceLogprobs {
	out := &choiceLogprobs{Tokens: []string{}, TokenLogprobs: []float32{},
		TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	for _, lp := range lps {
		tok := s.tokenText(prev, lp.TokenID)
		out.Tokens = append(out.Tokens, tok)
		out.TokenLogprobs = append(out.TokenLogprobs, lp.Logprob)
		top := make(map[string]float32, len(lp.Top))
		for _, alt := range lp.Top {
			top[s.tokenText(prev, alt.TokenID)] = alt.Logprob
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(tok)
		prev = lp.TokenID
	}
	return out
}

// chatTokenLogprob is one entry of a chat choice's logprobs.content.
type chatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float32          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
	Refusal *string            `json:"refusal"`
}

func utf8Bytes(s string) []int {
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	return b
}

// chatLogprobs builds the chat logprobs object for tokens that follow prev.
func (s *server) chatLogprobs(lps []pvllm.TokenLogprobs, prev int32) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatTokenLogprob, 0, len(lps))}
	for _, lp := range lps {
		tok := s.tokenText(prev, lp.TokenID)
		entry := chatTokenLogprob{Token: tok, Logprob: lp.Logprob, Bytes: utf8Bytes(tok),
			TopLogprobs: make([]chatTopLogprob, 0, len(lp.Top))}
		for _, alt := range lp.Top {
			t := s.tokenText(prev, alt.TokenID)
			entry.TopLogprobs = append(entry.TopLogprobs,
				chatTopLogprob{Token: t, Logprob: alt.Logprob, Bytes: utf8Bytes(t)})
		}
		out.Content = append(out.Content, entry)
		prev = lp.TokenID
	}
	return out
}
