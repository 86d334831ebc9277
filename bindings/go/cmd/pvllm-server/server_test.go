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

// testTemplate is the tiny model's chat template: the roles in brackets,
// and `shout` (a chat_template_kwargs variable) upper-cases the contents.
const testTemplate = "{% for m in messages %}[{{ m.role }}] " +
	"{% if shout %}{{ m.content | upper }}{% else %}{{ m.content }}{% endif %}{{ \"\\n\" }}{% endfor %}" +
	"{% if add_generation_prompt %}[assistant] {% endif %}"

// tinyModelDir makes a tiny random model with a tokenizer and, when
// template is set, testTemplate as its chat_template.jinja; args go to the
// maker.
func tinyModelDir(t *testing.T, template bool, args ...string) string {
	t.Helper()
	maker := os.Getenv("PVLLM_MAKE_TINY_MODEL")
	if maker == "" {
		t.Fatal("PVLLM_MAKE_TINY_MODEL is not set (path of pvllm_make_tiny_model); bindings/go/test.sh sets it")
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if out, err := exec.Command(maker, append([]string{dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", maker, err, out)
	}
	if template {
		if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(testTemplate), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fixture: a real engine on a tiny random model behind a real HTTP server
// on loopback, with the options main would use.
type fixture struct {
	eng  *pvllm.Engine
	srv  *server
	ts   *httptest.Server
	logs *syncBuffer
}

// syncBuffer is the access log, safe to read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFixture serves the tiny model with a chat template; flags are extra
// command-line options.
func newFixture(t *testing.T, flags ...string) *fixture {
	t.Helper()
	return newFixtureFor(t, tinyModelDir(t, true), "tiny", flags...)
}

// longRequest tokens cannot be generated before a test's next move (the
// tiny model makes 400 tokens in a few milliseconds): for requests that
// must still be running, on newLongFixture's 8192-token context.
const longRequest = 8000

func newLongFixture(t *testing.T, flags ...string) *fixture {
	t.Helper()
	return newFixtureFor(t, tinyModelDir(t, true, "--max-position", "8192"), "tiny",
		append([]string{"--kv-cache-mb", "64"}, flags...)...)
}

func newFixtureFor(t *testing.T, model, name string, flags ...string) *fixture {
	t.Helper()
	args := append([]string{"--model", model, "--served-model-name", name, "--threads", "1",
		"--kv-cache-mb", "32", "--device", "cpu"}, flags...)
	opts, err := parseOptions(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := pvllm.InspectModel(model)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pvllm.New(opts.engineConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{eng: eng, logs: &syncBuffer{}}
	info := modelInfo{maxModelLen: mc.MaxContextLength(), vocabSize: mc.VocabSize}
	if opts.maxModelLen > 0 {
		info.maxModelLen = opts.maxModelLen
	}
	f.srv = newServer(eng, opts, info, newLogger(f.logs))
	f.ts = httptest.NewUnstartedServer(nil)
	f.ts.Config = f.srv.httpServer()
	f.ts.Start()
	t.Cleanup(func() {
		f.ts.Close()
		eng.Close()
	})
	return f
}

func (f *fixture) url(path string) string { return f.ts.URL + path }

// post sends a JSON body and returns the status and the decoded response.
func (f *fixture) post(t *testing.T, path, body string) (int, map[string]interface{}) {
	t.Helper()
	resp, err := http.Post(f.url(path), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, decodeBody(t, resp.Body)
}

func decodeBody(t *testing.T, r io.Reader) map[string]interface{} {
	t.Helper()
	raw, _ := io.ReadAll(r)
	var m map[string]interface{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %q", err, raw)
	}
	return m
}

// postOK sends a JSON body, requires 200 and decodes the answer into out.
func (f *fixture) postOK(t *testing.T, path, body string, out interface{}) {
	t.Helper()
	resp, err := http.Post(f.url(path), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s %s: status %d: %s", path, body, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
}

// sse reads a server-sent event stream: the JSON payloads and whether it
// ended with [DONE].
func sse(t *testing.T, r io.Reader) (chunks []map[string]interface{}, done bool) {
	t.Helper()
	chunks, done, err := parseSSE(r)
	if err != nil {
		t.Fatal(err)
	}
	return chunks, done
}

func parseSSE(r io.Reader) (chunks []map[string]interface{}, done bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			return chunks, done, fmt.Errorf("not an SSE data line: %q", line)
		}
		payload := strings.TrimPrefix(line, "data: ")
		if payload == "[DONE]" {
			done = true
			continue
		}
		if done {
			return chunks, done, fmt.Errorf("data after [DONE]: %q", payload)
		}
		var m map[string]interface{}
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			return chunks, done, fmt.Errorf("chunk %q: %v", payload, err)
		}
		chunks = append(chunks, m)
	}
	return chunks, done, sc.Err()
}

// stream posts a streaming request and reads it to the end.
func (f *fixture) stream(t *testing.T, path, body string) ([]map[string]interface{}, bool) {
	t.Helper()
	resp, err := http.Post(f.url(path), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, ct, raw)
	}
	return sse(t, resp.Body)
}

// greedy is what the engine itself continues ids with, greedily.
func greedy(t *testing.T, eng *pvllm.Engine, ids []int32, n int) string {
	t.Helper()
	p := pvllm.GreedySamplingParams(n)
	p.IgnoreEOS = true
	st, err := eng.Submit(context.Background(), pvllm.Request{PromptTokens: ids, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Collect()
	if err != nil {
		t.Fatal(err)
	}
	return res.Text()
}

func greedyText(t *testing.T, eng *pvllm.Engine, prompt string, n int) string {
	t.Helper()
	ids, err := eng.Tokenize(prompt, true)
	if err != nil {
		t.Fatal(err)
	}
	return greedy(t, eng, ids, n)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// idle says the engine runs and holds nothing.
func (f *fixture) idle() bool {
	st, err := f.eng.Stats()
	return err == nil && st.NumRunning == 0 && st.NumWaiting == 0
}

// apiErr checks an OpenAI error body: status, type, param and code.
func apiErr(t *testing.T, what string, status int, body map[string]interface{},
	wantStatus int, wantParam, wantCode interface{}) string {
	t.Helper()
	e, ok := body["error"].(map[string]interface{})
	if status != wantStatus || !ok {
		t.Errorf("%s: status %d, body %v; want %d with an error", what, status, body, wantStatus)
		return ""
	}
	msg, _ := e["message"].(string)
	if msg == "" || e["type"] == nil || e["param"] != wantParam || e["code"] != wantCode {
		t.Errorf("%s: error %v; want param %v and code %v", what, e, wantParam, wantCode)
	}
	for _, goName := range []string{"float32", "int32", "int64", "[]string", "[]int", "main.",
		"*int", "*float", "map[", "json.RawMessage"} {
		if strings.Contains(msg, goName) {
			t.Errorf("%s: the message names a Go type (%q): %q", what, goName, msg)
		}
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, present := e[k]; !present {
			t.Errorf("%s: the error object has no %q", what, k)
		}
	}
	return msg
}

// rawRequest writes bytes on a fresh TCP connection and returns it.
func (f *fixture) rawConn(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func jsonString(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}
