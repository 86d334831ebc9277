package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text         string          `json:"text"`
		Index        int             `json:"index"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     *choiceLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func (f *fixture) complete(t *testing.T, body string) completion {
	t.Helper()
	var c completion
	f.postOK(t, "/v1/completions", body, &c)
	return c
}

func TestCompletionMatchesTheEngine(t *testing.T) {
	f := newFixture(t)
	c := f.complete(t, `{"model":"tiny","prompt":"Hello","max_tokens":6,"temperature":0,"ignore_eos":true}`)
	if c.Object != "text_completion" || c.Model != "tiny" || !strings.HasPrefix(c.ID, "cmpl-") {
		t.Errorf("envelope %+v", c)
	}
	if len(c.Choices) != 1 || c.Choices[0].Index != 0 || *c.Choices[0].FinishReason != "length" {
		t.Fatalf("choices %+v", c.Choices)
	}
	if want := greedyText(t, f.eng, "Hello", 6); c.Choices[0].Text != want {
		t.Errorf("text %q, the engine says %q", c.Choices[0].Text, want)
	}
	ids, _ := f.eng.Tokenize("Hello", true)
	if c.Usage == nil || c.Usage.PromptTokens != len(ids) || c.Usage.CompletionTokens != 6 ||
		c.Usage.TotalTokens != len(ids)+6 {
		t.Errorf("usage %+v (prompt has %d tokens)", c.Usage, len(ids))
	}
	if c.Choices[0].Logprobs != nil {
		t.Errorf("logprobs without asking: %+v", c.Choices[0].Logprobs)
	}
	// OpenAI's default budget is 16 tokens.
	if d := f.complete(t, `{"prompt":"Hello","ignore_eos":true}`); d.Usage.CompletionTokens != 16 {
		t.Errorf("default max_tokens gave %d tokens, want 16", d.Usage.CompletionTokens)
	}
}

func TestCompletionPromptArrayWithN(t *testing.T) {
	f := newFixture(t)
	body := `{"prompt":["One","Two","Three"],"max_tokens":3,"n":2,"seed":7,"ignore_eos":true,"best_of":2}`
	c := f.complete(t, body)
	if len(c.Choices) != 6 {
		t.Fatalf("%d choices, want 3 prompts x n=2", len(c.Choices))
	}
	for i, ch := range c.Choices {
		if ch.Index != i || *ch.FinishReason != "length" {
			t.Errorf("choice %d: %+v", i, ch)
		}
	}
	if c.Usage.CompletionTokens != 18 {
		t.Errorf("usage %+v, want 18 completion tokens", c.Usage)
	}
	again := f.complete(t, body)
	for i := range c.Choices {
		if c.Choices[i].Text != again.Choices[i].Text {
			t.Errorf("choice %d differs with the same seed: %q vs %q", i, c.Choices[i].Text, again.Choices[i].Text)
		}
	}
	// Token-id prompts: one list, and a list of lists.
	ids, _ := f.eng.Tokenize("One", true)
	one := f.complete(t, fmt.Sprintf(`{"prompt":%s,"max_tokens":3,"n":2,"seed":7,"ignore_eos":true}`, jsonString(ids)))
	lists := f.complete(t, fmt.Sprintf(`{"prompt":[%s,[1,40,41]],"max_tokens":3,"ignore_eos":true}`, jsonString(ids)))
	if len(one.Choices) != 2 || one.Choices[0].Text != c.Choices[0].Text || one.Choices[1].Text != c.Choices[1].Text {
		t.Errorf("token prompt gave %+v, text prompt %+v", one.Choices, c.Choices[:2])
	}
	if len(lists.Choices) != 2 || lists.Usage.PromptTokens != len(ids)+3 {
		t.Errorf("token lists gave %+v, usage %+v", lists.Choices, lists.Usage)
	}
}

func TestCompletionStopString(t *testing.T) {
	f := newFixture(t)
	full := greedyText(t, f.eng, "Once", 24)
	// Stop on a piece of the greedy continuation; the text ends before it.
	var stop string
	for i := 4; i+2 <= len(full) && stop == ""; i++ {
		if cand := full[i : i+2]; strings.TrimSpace(cand) == cand && !strings.Contains(full[:i], cand) {
			stop = cand
		}
	}
	if stop == "" {
		t.Fatalf("no usable stop string in %q", full)
	}
	body := jsonString(map[string]interface{}{"prompt": "Once", "max_tokens": 24,
		"temperature": 0, "ignore_eos": true, "stop": []string{stop}})
	c := f.complete(t, body)
	got := c.Choices[0]
	if *got.FinishReason != "stop" || strings.Contains(got.Text, stop) || !strings.HasPrefix(full, got.Text) {
		t.Errorf("stop %q: text %q, finish %s; full text %q", stop, got.Text, *got.FinishReason, full)
	}
}

func TestCompletionLogprobs(t *testing.T) {
	f := newFixture(t)
	c := f.complete(t, `{"prompt":"Hi","max_tokens":4,"temperature":0,"ignore_eos":true,"logprobs":2}`)
	lp := c.Choices[0].Logprobs
	if lp == nil || len(lp.Tokens) != 4 || len(lp.TokenLogprobs) != 4 || len(lp.TopLogprobs) != 4 ||
		len(lp.TextOffset) != 4 {
		t.Fatalf("logprobs %+v", lp)
	}
	joined := strings.Join(lp.Tokens, "")
	split := strings.ContainsRune(joined, '\uFFFD') // a character over several byte tokens
	if !split && joined != c.Choices[0].Text {
		t.Errorf("tokens %q join to %q, text is %q", lp.Tokens, joined, c.Choices[0].Text)
	}
	for i, v := range lp.TokenLogprobs {
		if off := len(strings.Join(lp.Tokens[:i], "")); !split && lp.TextOffset[i] != off {
			t.Errorf("token %d: text offset %d, want %d", i, lp.TextOffset[i], off)
		}
		if v > 0 || len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 2 {
			t.Errorf("token %d: logprob %v, top %v", i, v, lp.TopLogprobs[i])
		}
	}
}

func TestCompletionStreaming(t *testing.T) {
	f := newFixture(t)
	chunks, done := f.stream(t, "/v1/completions",
		`{"prompt":"Hello","max_tokens":10,"temperature":0,"ignore_eos":true,"stream":true,"n":2,
		  "stream_options":{"include_usage":true}}`)
	if !done {
		t.Error("the stream did not end with [DONE]")
	}
	texts := map[int]string{}
	finishes := map[int][]string{}
	var u map[string]interface{}
	for i, ch := range chunks {
		if ch["object"] != "text_completion" {
			t.Errorf("chunk %v", ch)
		}
		if uu, ok := ch["usage"].(map[string]interface{}); ok {
			if i != len(chunks)-1 || len(ch["choices"].([]interface{})) != 0 {
				t.Errorf("usage in chunk %d of %d, with choices %v", i, len(chunks), ch["choices"])
			}
			u = uu
			continue
		}
		for _, c := range ch["choices"].([]interface{}) {
			c := c.(map[string]interface{})
			i := int(c["index"].(float64))
			texts[i] += c["text"].(string)
			if fr, ok := c["finish_reason"].(string); ok {
				finishes[i] = append(finishes[i], fr)
			}
		}
	}
	want := greedyText(t, f.eng, "Hello", 10)
	for i := 0; i < 2; i++ {
		if texts[i] != want {
			t.Errorf("choice %d streamed %q, want %q", i, texts[i], want)
		}
		if fmt.Sprint(finishes[i]) != "[length]" {
			t.Errorf("choice %d finishes %v, want exactly one length", i, finishes[i])
		}
	}
	if u == nil || u["completion_tokens"].(float64) != 20 {
		t.Errorf("usage chunk %v", u)
	}
	// Without include_usage no chunk carries usage.
	chunks, _ = f.stream(t, "/v1/completions", `{"prompt":"Hello","max_tokens":3,"stream":true}`)
	for _, ch := range chunks {
		if ch["usage"] != nil {
			t.Errorf("usage without include_usage: %v", ch)
		}
	}
}

func TestClientDisconnectAbortsGeneration(t *testing.T) {
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		t.Run(strings.Trim(strings.ReplaceAll(path, "/", "_"), "_"), func(t *testing.T) {
			f := newLongFixture(t)
			before, _ := f.eng.Stats()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const n, maxTokens = 4, longRequest
			body := fmt.Sprintf(`{"prompt":"Hi","messages":[{"role":"user","content":"Hi"}],
				"max_tokens":%d,"ignore_eos":true,"stream":true,"n":%d}`, maxTokens, n)
			if path == "/v1/completions" {
				body = strings.Replace(body, `"messages":[{"role":"user","content":"Hi"}],`, "", 1)
			} else {
				body = strings.Replace(body, `"prompt":"Hi",`, "", 1)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url(path), strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			if _, err := resp.Body.Read(buf); err != nil {
				t.Fatalf("first bytes: %v", err)
			}
			cancel() // the client goes away
			resp.Body.Close()
			waitFor(t, "the engine idle again", f.idle)
			st, _ := f.eng.Stats()
			if generated := st.NumGenerationTokens - before.NumGenerationTokens; generated >= n*maxTokens {
				t.Errorf("all %d tokens were generated although the client left", generated)
			}
			waitFor(t, "4 aborted choices counted", func() bool {
				return strings.Contains(f.metricsText(t), `pvllm_request_choices_total{endpoint="`+
					map[string]string{"/v1/completions": "completions", "/v1/chat/completions": "chat"}[path]+
					`",finish_reason="abort"} 4`)
			})
		})
	}
}

func TestRoutingErrors(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Get(f.url("/v1/completions"))
	if err != nil {
		t.Fatal(err)
	}
	body := decodeBody(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || body["error"] == nil {
		t.Errorf("GET /v1/completions: %d %v", resp.StatusCode, body)
	}
	for _, path := range []string{"/v1/nothing", "/index.php"} {
		resp, err = http.Post(f.url(path), "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body := decodeBody(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || body["error"] == nil {
			t.Errorf("POST %s: %d %v", path, resp.StatusCode, body)
		}
	}
}

func TestModelsAndHealth(t *testing.T) {
	f := newFixture(t)
	var models struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}
	resp, err := http.Get(f.url("/v1/models"))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "tiny" ||
		models.Data[0].Object != "model" || models.Data[0].MaxModelLen != 512 {
		t.Errorf("models %+v", models)
	}
	resp, err = http.Get(f.url("/v1/models/tiny"))
	if err != nil {
		t.Fatal(err)
	}
	var one modelObject
	json.NewDecoder(resp.Body).Decode(&one)
	resp.Body.Close()
	if resp.StatusCode != 200 || one != models.Data[0] {
		t.Errorf("GET /v1/models/tiny: %d %+v", resp.StatusCode, one)
	}
	resp, err = http.Get(f.url("/v1/models/gpt-4"))
	if err != nil {
		t.Fatal(err)
	}
	apiErr(t, "GET /v1/models/gpt-4", resp.StatusCode, decodeBody(t, resp.Body), 404, "model", "model_not_found")
	resp.Body.Close()

	resp, err = http.Get(f.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health %d", resp.StatusCode)
	}
	f.eng.Close()
	resp, err = http.Get(f.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health after Close: %d, want 503", resp.StatusCode)
	}
	status, body := f.post(t, "/v1/completions", `{"prompt":"x"}`)
	apiErr(t, "completion after Close", status, body, 503, nil, nil)
}

// TestLoopbackConcurrentClients runs streaming and non-streaming clients
// of both endpoints at once; each gets the greedy answer.
func TestLoopbackConcurrentClients(t *testing.T) {
	f := newFixture(t)
	want := greedyText(t, f.eng, "Story", 12)
	chat, aerr := f.srv.renderChat([]byte(`[{"role":"user","content":"Story"}]`), nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	wantChat := greedy(t, f.eng, chat.ids, 12)
	const numClients, perClient = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, numClients*perClient)
	for c := 0; c < numClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				stream, chat := (c+i)%2 == 0, c%2 == 0
				path, body, expect := "/v1/completions", fmt.Sprintf(
					`{"prompt":"Story","max_tokens":12,"temperature":0,"ignore_eos":true,"stream":%v}`, stream), want
				if chat {
					path, expect = "/v1/chat/completions", wantChat
					body = fmt.Sprintf(`{"messages":[{"role":"user","content":"Story"}],"max_tokens":12,
						"temperature":0,"ignore_eos":true,"stream":%v}`, stream)
				}
				text, err := f.text(path, body, stream)
				if err != nil || text != expect {
					errs <- fmt.Errorf("client %d request %d (%s, stream %v): %v, text %q, want %q",
						c, i, path, stream, err, text, expect)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// text is the first choice's whole text, streamed or not, from either
// endpoint.
func (f *fixture) text(path, body string, stream bool) (string, error) {
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Post(f.url(path), "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if !stream {
		var r struct {
			Choices []struct {
				Text    string `json:"text"`
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) == 0 {
			return "", fmt.Errorf("decode: %v", err)
		}
		return r.Choices[0].Text + r.Choices[0].Message.Content, nil
	}
	chunks, done, err := parseSSE(resp.Body)
	if err != nil || !done {
		return "", fmt.Errorf("stream: %v, [DONE] %v", err, done)
	}
	var b strings.Builder
	for _, ch := range chunks {
		for _, c := range ch["choices"].([]interface{}) {
			c := c.(map[string]interface{})
			if s, ok := c["text"].(string); ok {
				b.WriteString(s)
			}
			if d, ok := c["delta"].(map[string]interface{}); ok {
				if s, ok := d["content"].(string); ok {
					b.WriteString(s)
				}
			}
		}
	}
	return b.String(), nil
}

// On the real stories260K checkpoint (ASCII text) the logprob token strings
// join up to the completion exactly, and the text is what run.c writes.
func TestStories260KCompletion(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the repository's stories260K is missing: %v", err)
	}
	f := newFixtureFor(t, path, "stories260K")
	c := f.complete(t, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":16,"temperature":0,"logprobs":1}`)
	got := c.Choices[0]
	const want = ", there was a little girl named Lily"
	if !strings.HasPrefix(got.Text, want) {
		t.Errorf("text %q, want it to start with %q", got.Text, want)
	}
	if joined := strings.Join(got.Logprobs.Tokens, ""); joined != got.Text {
		t.Errorf("tokens %q join to %q, text %q", got.Logprobs.Tokens, joined, got.Text)
	}
}

// --quantize q8_0 serves stories260K quantized while loading; an unknown
// scheme stops the server at startup with the library's message.
func TestQuantizeFlag(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the repository's stories260K is missing: %v", err)
	}
	f := newFixtureFor(t, path, "stories260K", "--quantize", "q8_0")
	c := f.complete(t, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":8,"temperature":0,"ignore_eos":true}`)
	if c.Usage == nil || c.Usage.CompletionTokens != 8 || c.Choices[0].Text == "" {
		t.Errorf("choices %+v, usage %+v: want 8 tokens of text", c.Choices, c.Usage)
	}
	opts, err := parseOptions([]string{"--model", path, "--device", "cpu", "--quantize", "q9_9"},
		io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pvllm.New(opts.engineConfig()); !errors.Is(err, pvllm.StatusInvalidArgument) ||
		!strings.Contains(err.Error(), "q4_k_m") {
		t.Errorf("--quantize q9_9: %v, want InvalidArgument listing the schemes", err)
	}
}

// --speculative ngram reaches the engine: greedy completions are those of a
// server without it, and /metrics counts the drafts.
func TestSpeculativeFlag(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the repository's stories260K is missing: %v", err)
	}
	const body = `{"model":"stories260K","prompt":"Once upon a time","max_tokens":40,"temperature":0,"ignore_eos":true}`
	plain := newFixtureFor(t, path, "stories260K").complete(t, body)
	f := newFixtureFor(t, path, "stories260K", "--speculative", "ngram", "--speculative-tokens", "4")
	if got := f.srv.opts.engineConfig().Speculative; got != "ngram" {
		t.Errorf("--speculative ngram gives %q", got)
	}
	c := f.complete(t, body)
	if c.Choices[0].Text != plain.Choices[0].Text || c.Usage == nil || c.Usage.CompletionTokens != 40 {
		t.Errorf("with --speculative ngram: %q (usage %+v); without: %q", c.Choices[0].Text, c.Usage,
			plain.Choices[0].Text)
	}
	m := samples(t, f.metricsText(t))
	if m["pvllm_spec_decode_drafts_total"] <= 0 {
		t.Errorf("pvllm_spec_decode_drafts_total = %v, want > 0", m["pvllm_spec_decode_drafts_total"])
	}
	if m["pvllm_spec_decode_proposed_tokens_total"] < m["pvllm_spec_decode_accepted_tokens_total"] {
		t.Errorf("proposed %v < accepted %v", m["pvllm_spec_decode_proposed_tokens_total"],
			m["pvllm_spec_decode_accepted_tokens_total"])
	}
}

// --kv-cache-dtype reaches the engine: int8 serves stories260K and the
// startup line names it; fp8_e4m3, which the CPU does not serve, stops the
// server at startup with the library's message; an unknown name is a usage
// error.
func TestKVCacheDtypeFlag(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the repository's stories260K is missing: %v", err)
	}
	f := newFixtureFor(t, path, "stories260K", "--kv-cache-dtype", "int8")
	if got := f.srv.opts.engineConfig().KVCacheDtype; got != pvllm.KVCacheDtypeInt8 {
		t.Errorf("--kv-cache-dtype int8 gives %v", got)
	}
	c := f.complete(t, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":8,"temperature":0,"ignore_eos":true}`)
	if c.Usage == nil || c.Usage.CompletionTokens != 8 || c.Choices[0].Text == "" {
		t.Errorf("choices %+v, usage %+v: want 8 tokens of text", c.Choices, c.Usage)
	}

	served := &syncBuffer{}
	stop := make(chan struct{})
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"--model", path, "--device", "cpu", "--threads", "1", "--port", "0",
			"--kv-cache-mb", "8", "--kv-cache-dtype", "INT8"}, io.Discard, served, stop)
	}()
	logAddress(t, served)
	close(stop)
	if code := <-exit; code != 0 || !strings.Contains(served.String(), `"kv_cache_dtype":"int8"`) {
		t.Errorf("--kv-cache-dtype INT8: exit %d, log %q; want the serving line to name int8",
			code, served.String())
	}

	// A server that does start anyway is stopped after a while, so that the
	// test fails rather than hangs.
	logs := &syncBuffer{}
	refused := make(chan struct{})
	stopLate := make(chan struct{})
	go func() {
		select {
		case <-refused:
		case <-time.After(20 * time.Second):
			close(stopLate)
		}
	}()
	code := run([]string{"--model", path, "--device", "cpu", "--threads", "1", "--port", "0",
		"--kv-cache-mb", "8", "--kv-cache-dtype", "fp8_e4m3"}, io.Discard, logs, stopLate)
	close(refused)
	if code != 1 || !strings.Contains(logs.String(), "the engine cannot start") ||
		!strings.Contains(logs.String(), "fp8_e4m3") || !strings.Contains(logs.String(), "int8") {
		t.Errorf("--kv-cache-dtype fp8_e4m3 on the CPU: exit %d, log %q", code, logs.String())
	}

	var errOut strings.Builder
	if code := run([]string{"--model", path, "--kv-cache-dtype", "int4"}, io.Discard, &errOut, nil); code != 2 ||
		!strings.Contains(errOut.String(), `--kv-cache-dtype must be auto, f32, f16, bf16, int8 or fp8_e4m3, got "int4"`) {
		t.Errorf("--kv-cache-dtype int4: exit %d, stderr %q", code, errOut.String())
	}
}
