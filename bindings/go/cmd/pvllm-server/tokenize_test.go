package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestTokenizeAndDetokenize(t *testing.T) {
	f := newFixture(t)
	var tok tokenizeResponse
	f.postOK(t, "/tokenize", `{"model":"tiny","prompt":"Hello world"}`, &tok)
	ids, _ := f.eng.Tokenize("Hello world", true)
	if fmt.Sprint(tok.Tokens) != fmt.Sprint(ids) || tok.Count != len(ids) || tok.MaxModelLen != 512 ||
		tok.TokenStrs != nil {
		t.Errorf("tokenize %+v, want %v", tok, ids)
	}
	f.postOK(t, "/tokenize", `{"prompt":"Hello world","add_special_tokens":false,"return_token_strs":true}`, &tok)
	plain, _ := f.eng.Tokenize("Hello world", false)
	if fmt.Sprint(tok.Tokens) != fmt.Sprint(plain) || tok.TokenStrs == nil ||
		strings.Join(*tok.TokenStrs, "") != "Hello world" {
		t.Errorf("without special tokens %+v, want %v joining to the text", tok, plain)
	}
	// Messages: the prompt the chat endpoint would use.
	f.postOK(t, "/tokenize", `{"messages":[{"role":"user","content":"Hi"}]}`, &tok)
	c := f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1}`)
	if tok.Count != c.Usage.PromptTokens ||
		fmt.Sprint(tok.Tokens) != fmt.Sprint(chatIDs(t, f, "[user] Hi\n[assistant] ")) {
		t.Errorf("messages %+v; the chat prompt has %d tokens", tok, c.Usage.PromptTokens)
	}
	var detok map[string]string
	f.postOK(t, "/detokenize", `{"tokens":`+jsonString(plain)+`}`, &detok)
	if detok["prompt"] != "Hello world" {
		t.Errorf("detokenize %v", detok)
	}
	for _, c := range []struct {
		path, body string
		param      interface{}
	}{
		{"/tokenize", `{}`, "prompt"},
		{"/tokenize", `{"prompt":"x","messages":[]}`, "messages"},
		{"/tokenize", `{"prompt":5}`, "prompt"},
		{"/tokenize", `{"prompt":"x","add_generation_prompt":true}`, "add_generation_prompt"},
		{"/tokenize", `{"prompt":"x","colour":1}`, "colour"},
		{"/detokenize", `{}`, "tokens"},
		{"/detokenize", `{"tokens":[1,-4]}`, "tokens"},
		{"/detokenize", `{"tokens":[1,100000]}`, "tokens"},
		{"/detokenize", `{"tokens":"abc"}`, "tokens"},
	} {
		status, body := f.post(t, c.path, c.body)
		code := interface{}(nil)
		if c.param == "colour" {
			code = "unsupported_parameter"
		}
		apiErr(t, c.path+" "+c.body, status, body, 400, c.param, code)
	}
}
