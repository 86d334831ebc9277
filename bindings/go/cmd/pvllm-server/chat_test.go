package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

type chatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string  `json:"role"`
			Content string  `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func (f *fixture) chat(t *testing.T, body string) chatCompletion {
	t.Helper()
	var c chatCompletion
	f.postOK(t, "/v1/chat/completions", body, &c)
	return c
}

// chatIDs is the prompt the template makes of messages, tokenized as the
// server must: the rendering, and no BOS added.
func chatIDs(t *testing.T, f *fixture, rendered string) []int32 {
	t.Helper()
	ids, err := f.eng.Tokenize(rendered, false)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestChatIsTheTemplatesPromptContinued(t *testing.T) {
	f := newFixture(t)
	c := f.chat(t, `{"model":"tiny","messages":[{"role":"system","content":"Be brief."},
		{"role":"user","content":"Hello"}],"max_tokens":7,"temperature":0,"ignore_eos":true}`)
	if c.Object != "chat.completion" || c.Model != "tiny" || !strings.HasPrefix(c.ID, "chatcmpl-") ||
		len(c.Choices) != 1 {
		t.Fatalf("envelope %+v", c)
	}
	ids := chatIDs(t, f, "[system] Be brief.\n[user] Hello\n[assistant] ")
	want := greedy(t, f.eng, ids, 7)
	got := c.Choices[0]
	if got.Message.Role != "assistant" || got.Message.Content != want || *got.FinishReason != "length" ||
		got.Message.Refusal != nil || got.Logprobs != nil {
		t.Errorf("choice %+v, want the content %q", got, want)
	}
	if c.Usage.PromptTokens != len(ids) || c.Usage.CompletionTokens != 7 {
		t.Errorf("usage %+v, the prompt has %d tokens", c.Usage, len(ids))
	}
	// Content as parts, "developer" as "system", and template variables.
	parts := f.chat(t, `{"messages":[{"role":"developer","content":"Be brief."},
		{"role":"user","content":[{"type":"text","text":"Hel"},{"type":"text","text":"lo"}]}],
		"max_completion_tokens":7,"temperature":0,"ignore_eos":true,"chat_template_kwargs":{"shout":true}}`)
	want = greedy(t, f.eng, chatIDs(t, f, "[system] BE BRIEF.\n[user] HEL\nLO\n[assistant] "), 7)
	if parts.Choices[0].Message.Content != want {
		t.Errorf("parts: %q, want %q", parts.Choices[0].Message.Content, want)
	}
	// max_completion_tokens wins over max_tokens; without either the
	// answer may fill the context.
	both := f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,
		"max_completion_tokens":5,"ignore_eos":true}`)
	if both.Usage.CompletionTokens != 5 {
		t.Errorf("max_completion_tokens 5 with max_tokens 3 gave %d tokens", both.Usage.CompletionTokens)
	}
	all := f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"ignore_eos":true}`)
	if all.Usage.TotalTokens != 512 || *all.Choices[0].FinishReason != "length" {
		t.Errorf("no budget: usage %+v, finish %s; want the 512-token context filled",
			all.Usage, *all.Choices[0].FinishReason)
	}
}

func TestChatStreaming(t *testing.T) {
	f := newFixture(t)
	body := `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":9,"temperature":0.8,
		"seed":3,"n":2,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`
	chunks, done := f.stream(t, "/v1/chat/completions", body)
	if !done {
		t.Fatal("no [DONE]")
	}
	texts := map[int]string{}
	roles := map[int]int{}
	finishes := map[int][]string{}
	var u map[string]interface{}
	for i, ch := range chunks {
		if ch["object"] != "chat.completion.chunk" || !strings.HasPrefix(ch["id"].(string), "chatcmpl-") {
			t.Errorf("chunk %v", ch)
		}
		if uu, ok := ch["usage"].(map[string]interface{}); ok {
			if i != len(chunks)-1 {
				t.Errorf("usage in chunk %d of %d", i, len(chunks))
			}
			u = uu
		}
		for _, c := range ch["choices"].([]interface{}) {
			c := c.(map[string]interface{})
			k := int(c["index"].(float64))
			d := c["delta"].(map[string]interface{})
			if d["role"] == "assistant" {
				roles[k]++
				if len(texts[k]) > 0 {
					t.Errorf("choice %d: the role after content", k)
				}
			}
			if s, ok := d["content"].(string); ok {
				texts[k] += s
			}
			if fr, ok := c["finish_reason"].(string); ok {
				finishes[k] = append(finishes[k], fr)
				if len(d) != 0 {
					t.Errorf("choice %d: the finishing chunk has a delta %v", k, d)
				}
			}
		}
	}
	// The same request unstreamed gives the same texts (seeded sampling).
	whole := f.chat(t, strings.Replace(strings.Replace(body, `"stream":true,`, "", 1),
		`,"stream_options":{"include_usage":true}`, "", 1))
	for k := 0; k < 2; k++ {
		if roles[k] != 1 || fmt.Sprint(finishes[k]) != "[length]" {
			t.Errorf("choice %d: %d role deltas, finishes %v", k, roles[k], finishes[k])
		}
		if texts[k] != whole.Choices[k].Message.Content {
			t.Errorf("choice %d streamed %q, unstreamed %q", k, texts[k], whole.Choices[k].Message.Content)
		}
	}
	if u == nil || u["completion_tokens"].(float64) != 18 {
		t.Errorf("usage %v, want 18 completion tokens", u)
	}
}

func TestChatLogprobs(t *testing.T) {
	f := newFixture(t)
	c := f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"temperature":0,
		"ignore_eos":true,"logprobs":true,"top_logprobs":3}`)
	lp := c.Choices[0].Logprobs
	if lp == nil || len(lp.Content) != 5 {
		t.Fatalf("logprobs %+v", lp)
	}
	var joined strings.Builder
	for i, e := range lp.Content {
		joined.WriteString(e.Token)
		if e.Logprob > 0 || len(e.TopLogprobs) == 0 || len(e.TopLogprobs) > 3 ||
			len(e.Bytes) != len(e.Token) {
			t.Errorf("token %d: %+v", i, e)
		}
		// Greedy: the chosen token is the most likely one.
		if e.TopLogprobs[0].Logprob != e.Logprob {
			t.Errorf("token %d: logprob %v, best alternative %v", i, e.Logprob, e.TopLogprobs[0].Logprob)
		}
	}
	if s := joined.String(); !strings.ContainsRune(s, '\uFFFD') && s != c.Choices[0].Message.Content {
		t.Errorf("tokens join to %q, content %q", s, c.Choices[0].Message.Content)
	}
	// logprobs alone: the chosen tokens without alternatives.
	plain := f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"logprobs":true}`)
	if lp := plain.Choices[0].Logprobs; lp == nil || len(lp.Content) != 2 || len(lp.Content[0].TopLogprobs) != 0 {
		t.Errorf("logprobs without top_logprobs: %+v", lp)
	}
}

func TestChatRefusals(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		body  string
		param interface{}
		code  interface{}
	}{
		{`{}`, "messages", nil},
		{`{"messages":[]}`, "messages", nil},
		{`{"messages":"Hi"}`, "messages", nil},
		{`{"messages":[{"content":"Hi"}]}`, "messages[0].role", nil},
		{`{"messages":[{"role":"robot","content":"Hi"}]}`, "messages[0].role", nil},
		{`{"messages":[{"role":"user"}]}`, "messages[0].content", nil},
		{`{"messages":[{"role":"user","content":5}]}`, "messages[0].content", nil},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`,
			"messages[0].content[0].type", "unsupported_parameter"},
		{`{"messages":[{"role":"user","content":"Hi"}],"top_logprobs":2}`, "top_logprobs", nil},
		{`{"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":50}`, "top_logprobs", nil},
		{`{"messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":0}`, "max_completion_tokens", nil},
		{`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":600}`, "max_completion_tokens",
			"context_length_exceeded"},
		{`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
			"tools", "unsupported_parameter"},
		{`{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"xml"}}`,
			"response_format.type", "unsupported_parameter"},
		{`{"messages":[{"role":"user","content":"Hi"}],"logit_bias":{"5":100}}`, "logit_bias",
			"unsupported_parameter"},
		{`{"messages":[{"role":"user","content":"Hi"}],"stream_options":{"include_usage":true}}`,
			"stream_options", nil},
		{`{"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"continuous":true}}`,
			"stream_options.continuous", "unsupported_parameter"},
		{`{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":[1]}`, "chat_template_kwargs", nil},
		{`{"messages":[{"role":"user","content":"Hi"}],"frobnicate":1}`, "frobnicate", "unsupported_parameter"},
	}
	for _, c := range cases {
		status, body := f.post(t, "/v1/chat/completions", c.body)
		apiErr(t, c.body, status, body, 400, c.param, c.code)
	}
	// Fields that ask for nothing pass.
	f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"logit_bias":{},
		"response_format":{"type":"text"},"tools":[],"tool_choice":"none","parallel_tool_calls":true,
		"store":false,"metadata":null,"service_tier":"auto","modalities":["text"],"user":"u1"}`)
	if !f.idle() {
		t.Error("a refused call left work in the engine")
	}
}

func TestChatWithoutTemplate(t *testing.T) {
	f := newFixtureFor(t, tinyModelDir(t, false), "tiny")
	status, body := f.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`)
	msg := apiErr(t, "no template", status, body, 400, "messages", "chat_template_not_found")
	if !strings.Contains(msg, "chat_template.jinja") || !strings.Contains(msg, "--chat-template") {
		t.Errorf("the message does not say how to add a template: %q", msg)
	}
	// Completions still serve.
	f.complete(t, `{"prompt":"Hi","max_tokens":2}`)
}

// --chat-template FILE renders every chat with the file's template: a model
// that ships none answers (200) instead of 400, /tokenize renders the same
// prompt, and the file wins over a template the model has.
func TestChatTemplateFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "chat.jinja")
	const tmpl = "{% for m in messages %}<{{ m.role }}|{{ m.content }}>{% endfor %}" +
		"{% if add_generation_prompt %}<assistant|{% endif %}"
	if err := os.WriteFile(file, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	const body = `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"temperature":0,
		"ignore_eos":true}`
	for name, withTemplate := range map[string]bool{"no template": false, "its own template": true} {
		f := newFixtureFor(t, tinyModelDir(t, withTemplate), "tiny", "--chat-template", file)
		ids := chatIDs(t, f, "<user|Hi><assistant|")
		c := f.chat(t, body)
		if want := greedy(t, f.eng, ids, 6); c.Choices[0].Message.Content != want ||
			c.Usage.PromptTokens != len(ids) {
			t.Errorf("%s: content %q, usage %+v; want %q from the file's %d-token prompt", name,
				c.Choices[0].Message.Content, c.Usage, want, len(ids))
		}
		var tok tokenizeResponse
		f.postOK(t, "/tokenize", `{"messages":[{"role":"user","content":"Hi"}]}`, &tok)
		if fmt.Sprint(tok.Tokens) != fmt.Sprint(ids) {
			t.Errorf("%s: /tokenize %v, want %v", name, tok.Tokens, ids)
		}
	}
	// A template the renderer refuses is the server's fault, not the
	// client's.
	bad := filepath.Join(t.TempDir(), "bad.jinja")
	if err := os.WriteFile(bad, []byte("{% for %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixtureFor(t, tinyModelDir(t, false), "tiny", "--chat-template", bad)
	status, resp := f.post(t, "/v1/chat/completions", body)
	if msg := apiErr(t, "a malformed template", status, resp, 500, nil, nil); !strings.Contains(msg, "line 1") {
		t.Errorf("the message does not say where: %q", msg)
	}
}

// A missing, unreadable or empty --chat-template file stops the server at
// startup (exit 2) with a message naming the flag and the file; a template
// that does not parse stops it too (exit 1).
func TestChatTemplateFlagBadFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.jinja")
	empty := filepath.Join(t.TempDir(), "empty.jinja")
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{missing, empty, t.TempDir()} {
		var errOut strings.Builder
		code := run([]string{"--model", "m", "--chat-template", file}, io.Discard, &errOut, nil)
		if msg := errOut.String(); code != 2 || !strings.Contains(msg, "--chat-template") ||
			!strings.Contains(msg, file) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and a message naming the flag and the file",
				file, code, msg)
		}
	}
	// A template pvllm cannot parse stops the server before the weights
	// load, saying where it goes wrong.
	bad := filepath.Join(t.TempDir(), "bad.jinja")
	if err := os.WriteFile(bad, []byte("{% for %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	code := run([]string{"--model", tinyModelDir(t, false), "--chat-template", bad, "--port", "0"},
		io.Discard, &logs, nil)
	if msg := logs.String(); code != 1 || !strings.Contains(msg, "chat template") ||
		!strings.Contains(msg, "line 1") || strings.Contains(msg, `"serving"`) {
		t.Errorf("a malformed template: exit %d, log %q; want 1 and where it goes wrong", code, msg)
	}
}

// A chat template that writes the BOS (as Llama 3's does), over a
// tokenizer.json that adds one before a text: the server submits the
// rendering without adding another, so the engine runs exactly the
// rendering's ids, one BOS first, and usage counts them.
func TestChatPromptHasOneBOS(t *testing.T) {
	// The SDK's test tokenizer: byte-level BPE, <|begin_of_text|> = 256.
	tok, err := filepath.Abs(filepath.Join("..", "..", "pvllm", "testdata", "bos_tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureFor(t, tinyModelDir(t, false, "--tokenizer", tok), "bos")
	ids := chatIDs(t, f, "<|begin_of_text|><user>Hi\n<assistant>")
	const bos = 256
	if len(ids) < 2 || ids[0] != bos || ids[1] == bos {
		t.Fatalf("the rendering encodes to %v; want one BOS first", ids)
	}
	c := f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0,
		"ignore_eos":true}`)
	if want := greedy(t, f.eng, ids, 8); c.Choices[0].Message.Content != want {
		t.Errorf("content %q, want %q (the continuation of one BOS)", c.Choices[0].Message.Content, want)
	}
	if c.Usage.PromptTokens != len(ids) {
		t.Errorf("usage %+v, want %d prompt tokens", c.Usage, len(ids))
	}
	// What the engine ran: the prompt's length and every id after the
	// first, from the request's metrics and prompt logprobs.
	chat, aerr := f.srv.renderChat([]byte(`[{"role":"user","content":"Hi"}]`), nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	req := chat.req
	req.Params = pvllm.GreedySamplingParams(1)
	req.Params.PromptLogprobs = 0
	st, err := f.eng.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var events []pvllm.Output
	for o := range st.Events() {
		events = append(events, o)
	}
	var rest []int32
	for _, lp := range events[0].PromptLogprobs {
		rest = append(rest, lp.TokenID)
	}
	last := events[len(events)-1]
	if last.Metrics == nil || last.Metrics.NumPromptTokens != int64(len(ids)) ||
		fmt.Sprint(rest) != fmt.Sprint(ids[1:]) {
		t.Errorf("the engine ran %+v with ids ...%v; want %v", last.Metrics, rest, ids)
	}
}
