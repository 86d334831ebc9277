package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// fixture: a real engine on a tiny random model behind httptest.
type fixture struct {
	eng *pvllm.Engine
	srv *server
	ts  *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	maker := os.Getenv("PVLLM_MAKE_TINY_MODEL")
	if maker == "" {
		t.Fatal("PVLLM_MAKE_TINY_MODEL is not set (path of pvllm_make_tiny_model); bindings/go/test.sh sets it")
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if out, err := exec.Command(maker, dir).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", maker, err, out)
	}
	eng, err := pvllm.New(pvllm.Config{ModelPath: dir, NumThreads: 1, KVCacheBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{eng: eng, srv: newServer(eng, "tiny")}
	f.ts = httptest.NewServer(f.srv.handler())
	t.Cleanup(func() {
		f.ts.Close()
		eng.Close()
	})
	return f
}

func (f *fixture) post(t *testing.T, body string) (int, map[string]interface{}) {
	t.Helper()
	resp, err := http.Post(f.ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, decodeBody(t, resp.Body)
}

func decodeBody(t *testing.T, r io.Reader) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		t.Fatalf("response is not JSON: %v", err)
	}
	return m
}

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
	resp, err := http.Post(f.ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var c completion
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return c
}

// sse reads a server-sent event stream: the JSON payloads and whether it
// ended with [DONE].
func sse(t *testing.T, r io.Reader) (chunks []map[string]interface{}, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("not an SSE data line: %q", line)
		}
		payload := strings.TrimPrefix(line, "data: ")
		if payload == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatalf("data after [DONE]: %q", payload)
		}
		var m map[string]interface{}
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			t.Fatalf("chunk %q: %v", payload, err)
		}
		chunks = append(chunks, m)
	}
	return chunks, done
}

func greedyText(t *testing.T, eng *pvllm.Engine, prompt string, n int) string {
	t.Helper()
	p := pvllm.GreedySamplingParams(n)
	p.IgnoreEOS = true
	res, err := eng.Generate(context.Background(), prompt, p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Text()
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
}

func TestCompletionPromptArrayWithN(t *testing.T) {
	f := newFixture(t)
	c := f.complete(t, `{"prompt":["One","Two","Three"],"max_tokens":3,"n":2,"seed":7,"ignore_eos":true}`)
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
	again := f.complete(t, `{"prompt":["One","Two","Three"],"max_tokens":3,"n":2,"seed":7,"ignore_eos":true}`)
	for i := range c.Choices {
		if c.Choices[i].Text != again.Choices[i].Text {
			t.Errorf("choice %d differs with the same seed: %q vs %q", i, c.Choices[i].Text, again.Choices[i].Text)
		}
	}
	// Token-id prompts: one list, and a list of lists.
	ids, _ := f.eng.Tokenize("One", true)
	idsJSON, _ := json.Marshal(ids)
	one := f.complete(t, fmt.Sprintf(`{"prompt":%s,"max_tokens":3,"n":2,"seed":7,"ignore_eos":true}`, idsJSON))
	lists := f.complete(t, fmt.Sprintf(`{"prompt":[%s,[1,40,41]],"max_tokens":3,"ignore_eos":true}`, idsJSON))
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
		if cand := full[i : i+2]; strings.TrimSpace(cand) == cand {
			stop = cand
		}
	}
	if stop == "" {
		t.Skipf("no usable stop string in %q", full)
	}
	body, _ := json.Marshal(map[string]interface{}{"prompt": "Once", "max_tokens": 24,
		"temperature": 0, "ignore_eos": true, "stop": []string{stop}})
	c := f.complete(t, string(body))
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
	// A character split over byte tokens decodes to U+FFFD per token; the
	// strings join up to the text otherwise.
	if joined := strings.Join(lp.Tokens, ""); !strings.ContainsRune(joined, '\uFFFD') &&
		joined != c.Choices[0].Text {
		t.Errorf("tokens %q join to %q, text is %q", lp.Tokens, joined, c.Choices[0].Text)
	}
	for i, v := range lp.TokenLogprobs {
		if off := len(strings.Join(lp.Tokens[:i], "")); lp.TextOffset[i] != off && !strings.ContainsRune(strings.Join(lp.Tokens, ""), '\uFFFD') {
			t.Errorf("token %d: text offset %d, want %d", i, lp.TextOffset[i], off)
		}
		if v > 0 || len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 2 {
			t.Errorf("token %d: logprob %v, top %v", i, v, lp.TopLogprobs[i])
		}
	}
}

func TestCompletionStreaming(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Post(f.ts.URL+"/v1/completions", "application/json", strings.NewReader(
		`{"prompt":"Hello","max_tokens":10,"temperature":0,"ignore_eos":true,"stream":true,"n":2,
		  "stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	chunks, done := sse(t, resp.Body)
	if !done {
		t.Error("the stream did not end with [DONE]")
	}
	texts := map[int]string{}
	finishes := map[int][]string{}
	var u map[string]interface{}
	for _, ch := range chunks {
		if ch["object"] != "text_completion" {
			t.Errorf("chunk %v", ch)
		}
		if uu, ok := ch["usage"].(map[string]interface{}); ok {
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
}

func TestClientDisconnectAbortsGeneration(t *testing.T) {
	f := newFixture(t)
	before, _ := f.eng.Stats()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n, maxTokens = 16, 480
	body := fmt.Sprintf(`{"prompt":"Hi","max_tokens":%d,"ignore_eos":true,"stream":true,"n":%d}`, maxTokens, n)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.ts.URL+"/v1/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel() // the client goes away
	resp.Body.Close()

	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := f.eng.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.NumRunning == 0 && st.NumWaiting == 0 &&
			st.NumRequestsFinished > before.NumRequestsFinished {
			if generated := st.NumGenerationTokens - before.NumGenerationTokens; generated >= n*maxTokens {
				t.Errorf("all %d tokens were generated although the client left", generated)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request is still running: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitFor(t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return f.srv.cancelledRequests == 1
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		body   string
		status int
		param  interface{} // nil = JSON null
	}{
		{`{"prompt": "x"`, 400, nil},
		{`not json`, 400, nil},
		{`{"max_tokens": 3}`, 400, "prompt"},
		{`{"prompt": 12}`, 400, "prompt"},
		{`{"prompt": []}`, 400, "prompt"},
		{`{"prompt": "x", "max_tokens": "many"}`, 400, "max_tokens"},
		{`{"prompt": "x", "stream": "yes"}`, 400, "stream"},
		{`{"prompt": "x", "stop": 5}`, 400, "stop"},
		{`{"prompt": "x", "stop": [""]}`, 400, "stop"},
		{`{"prompt": "x", "top_p": 2}`, 400, "top_p"},
		{`{"prompt": "x", "temperature": -1}`, 400, "temperature"},
		{`{"prompt": "x", "max_tokens": 0}`, 400, "max_tokens"},
		{`{"prompt": "x", "n": 0}`, 400, "n"},
		{`{"prompt": "x", "n": 100000}`, 400, "n"},
		{`{"prompt": "x", "logprobs": 50}`, 400, "logprobs"},
		{`{"prompt": "x", "top_k": -2}`, 400, "top_k"},
		{`{"prompt": [1, 99999]}`, 400, "prompt"},
		{`{"prompt": "x", "model": "gpt-4"}`, 404, "model"},
	}
	for _, c := range cases {
		status, body := f.post(t, c.body)
		e, ok := body["error"].(map[string]interface{})
		if status != c.status || !ok {
			t.Errorf("%s: status %d, body %v; want %d with an error", c.body, status, body, c.status)
			continue
		}
		if msg, _ := e["message"].(string); msg == "" || e["type"] != "invalid_request_error" ||
			e["param"] != c.param {
			t.Errorf("%s: error %v, want param %v", c.body, e, c.param)
		}
		if code, present := e["code"]; !present || (c.status == 400 && code != nil) {
			t.Errorf("%s: code %v (present %v), want null", c.body, code, present)
		}
	}
	// Nothing was left running by the failed calls.
	if st, _ := f.eng.Stats(); st.NumRunning != 0 || st.NumWaiting != 0 {
		t.Errorf("%d running, %d waiting", st.NumRunning, st.NumWaiting)
	}
}

func TestRoutingErrors(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Get(f.ts.URL + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	body := decodeBody(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || body["error"] == nil {
		t.Errorf("GET /v1/completions: %d %v", resp.StatusCode, body)
	}
	resp, err = http.Get(f.ts.URL + "/v1/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/nothing: %d", resp.StatusCode)
	}
}

func TestModelsAndHealth(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Get(f.ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "tiny" ||
		models.Data[0].Object != "model" {
		t.Errorf("models %+v", models)
	}
	resp, err = http.Get(f.ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health %d", resp.StatusCode)
	}
	f.eng.Close()
	resp, err = http.Get(f.ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health after Close: %d, want 503", resp.StatusCode)
	}
	status, body := f.post(t, `{"prompt":"x"}`)
	if status != http.StatusServiceUnavailable || body["error"] == nil {
		t.Errorf("completion after Close: %d %v", status, body)
	}
}

func TestMetrics(t *testing.T) {
	f := newFixture(t)
	f.complete(t, `{"prompt":"Hello","max_tokens":5,"ignore_eos":true}`)
	f.post(t, `{"prompt":"x","top_p":9}`)
	resp, err := http.Get(f.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	values := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		var v float64
		i := strings.LastIndexByte(line, ' ')
		if _, err := fmt.Sscan(line[i+1:], &v); err != nil || i < 0 {
			t.Fatalf("malformed sample line %q", line)
		}
		values[line[:i]] = v
	}
	want := map[string]float64{
		`pvllm_http_requests_total{path="/v1/completions",code="200"}`: 1,
		`pvllm_http_requests_total{path="/v1/completions",code="400"}`: 1,
		`pvllm_completion_requests_total`:                              1,
		`pvllm_usage_completion_tokens_total`:                          5,
		`pvllm_requests_finished_total`:                                1,
		`pvllm_num_requests_running`:                                   0,
		`pvllm_num_requests_waiting`:                                   0,
		`pvllm_preemptions_total`:                                      0,
	}
	for k, v := range want {
		if got, ok := values[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for _, k := range []string{"pvllm_generation_tokens_total", "pvllm_prompt_tokens_total",
		`pvllm_kv_blocks{state="total"}`, "pvllm_usage_prompt_tokens_total"} {
		if values[k] <= 0 {
			t.Errorf("%s = %v, want > 0", k, values[k])
		}
	}
	for _, k := range []string{"pvllm_kv_cache_usage_ratio", "pvllm_prefix_cache_hits_total",
		"pvllm_prefix_cache_queries_total"} {
		if _, ok := values[k]; !ok {
			t.Errorf("%s is missing", k)
		}
		if !bytes.Contains(raw, []byte("# TYPE "+k+" ")) {
			t.Errorf("no TYPE line for %s", k)
		}
	}
}

// TestLoopbackConcurrentClients serves over real TCP on 127.0.0.1 and
// runs streaming and non-streaming clients at once.
func TestLoopbackConcurrentClients(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: f.srv.handler()}
	go hs.Serve(ln)
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	want := greedyText(t, f.eng, "Story", 12)

	client := &http.Client{Timeout: 30 * time.Second}
	const numClients, perClient = 8, 3
	var wg sync.WaitGroup
	errs := make(chan error, numClients*perClient)
	for c := 0; c < numClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				stream := (c+i)%2 == 0
				body := fmt.Sprintf(`{"prompt":"Story","max_tokens":12,"temperature":0,"ignore_eos":true,"stream":%v}`, stream)
				resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				var text string
				if stream {
					chunks, done := sse(t, resp.Body)
					for _, ch := range chunks {
						for _, x := range ch["choices"].([]interface{}) {
							text += x.(map[string]interface{})["text"].(string)
						}
					}
					if !done {
						errs <- fmt.Errorf("client %d: no [DONE]", c)
					}
				} else {
					var cmpl completion
					if err := json.NewDecoder(resp.Body).Decode(&cmpl); err != nil || len(cmpl.Choices) != 1 {
						errs <- fmt.Errorf("client %d: %v %+v", c, err, cmpl)
					} else {
						text = cmpl.Choices[0].Text
					}
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || text != want {
					errs <- fmt.Errorf("client %d request %d (stream %v): status %d, text %q, want %q",
						c, i, stream, resp.StatusCode, text, want)
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

// On the real stories260K checkpoint (ASCII text) the logprob token strings
// join up to the completion exactly.
func TestStories260KCompletion(t *testing.T) {
	shared := os.Getenv("PVLLM_SHARED_DIR")
	if shared == "" {
		t.Skip("PVLLM_SHARED_DIR is not set: stories260K is not available")
	}
	path := filepath.Join(shared, "models/stories260K/stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is missing: %v", path, err)
	}
	eng, err := pvllm.New(pvllm.Config{ModelPath: path, NumThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	f := &fixture{eng: eng, srv: newServer(eng, "stories260K")}
	f.ts = httptest.NewServer(f.srv.handler())
	defer f.ts.Close()
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
