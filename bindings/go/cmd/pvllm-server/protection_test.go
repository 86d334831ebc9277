package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestBadCompletionRequestsGetOpenAIErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		body   string
		status int
		param  interface{} // nil = JSON null
		code   interface{}
	}{
		{`{"prompt": "x"`, 400, nil, nil},
		{`not json`, 400, nil, nil},
		{`[1, 2]`, 400, nil, nil},
		{`{"max_tokens": 3}`, 400, "prompt", nil},
		{`{"prompt": ""}`, 400, "prompt", nil},
		{`{"prompt": ["a", ""]}`, 400, "prompt", nil},
		{`{"prompt": 12}`, 400, "prompt", nil},
		{`{"prompt": []}`, 400, "prompt", nil},
		{`{"prompt": [[1, 2], []]}`, 400, "prompt", nil},
		{`{"prompt": "x", "max_tokens": "many"}`, 400, "max_tokens", nil},
		{`{"prompt": "x", "max_tokens": 1.5}`, 400, "max_tokens", nil},
		{`{"prompt": "x", "temperature": "hot"}`, 400, "temperature", nil},
		{`{"prompt": "x", "stream": "yes"}`, 400, "stream", nil},
		{`{"prompt": "x", "stop": 5}`, 400, "stop", nil},
		{`{"prompt": "x", "stop": [""]}`, 400, "stop", nil},
		{`{"prompt": "x", "top_p": 2}`, 400, "top_p", nil},
		{`{"prompt": "x", "temperature": -1}`, 400, "temperature", nil},
		{`{"prompt": "x", "max_tokens": 0}`, 400, "max_tokens", nil},
		{`{"prompt": "x", "n": 0}`, 400, "n", nil},
		{`{"prompt": "x", "logprobs": 50}`, 400, "logprobs", nil},
		{`{"prompt": "x", "logprobs": -1}`, 400, "logprobs", nil},
		{`{"prompt": "x", "top_k": -2}`, 400, "top_k", nil},
		{`{"prompt": [1, 99999]}`, 400, "prompt", nil},
		{`{"prompt": "x", "model": "gpt-4"}`, 404, "model", "model_not_found"},
		{`{"prompt": "x", "echo": true}`, 400, "echo", "unsupported_parameter"},
		{`{"prompt": "x", "suffix": "y"}`, 400, "suffix", "unsupported_parameter"},
		{`{"prompt": "x", "logit_bias": {"50256": -100}}`, 400, "logit_bias", "unsupported_parameter"},
		{`{"prompt": "x", "best_of": 3}`, 400, "best_of", "unsupported_parameter"},
		{`{"prompt": "x", "guided_json": {}}`, 400, "guided_json", "unsupported_parameter"},
		{`{"prompt": "x", "max_tokens": 600}`, 400, "max_tokens", "context_length_exceeded"},
		{`{"prompt": "x", "stream_options": {"include_usage": true}}`, 400, "stream_options", nil},
	}
	for _, c := range cases {
		status, body := f.post(t, "/v1/completions", c.body)
		apiErr(t, c.body, status, body, c.status, c.param, c.code)
	}
	// Off values of the fields not implemented pass.
	f.complete(t, `{"prompt": "x", "max_tokens": 2, "echo": false, "suffix": null, "logit_bias": {},
		"best_of": 1, "user": "someone"}`)
	if !f.idle() {
		t.Error("refused calls left work in the engine")
	}
}

func TestAPIKey(t *testing.T) {
	f := newFixture(t, "--api-key", "s3cret")
	do := func(method, path, auth, body string) int {
		req, _ := http.NewRequest(method, f.url(path), strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == 401 {
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", method, path)
			}
			apiErr(t, path, resp.StatusCode, decodeBody(t, resp.Body), 401, nil, "invalid_api_key")
		}
		return resp.StatusCode
	}
	const completion = `{"prompt":"x","max_tokens":2}`
	for _, c := range []struct {
		method, path, auth, body string
		want                     int
	}{
		{"POST", "/v1/completions", "", completion, 401},
		{"POST", "/v1/completions", "Bearer wrong", completion, 401},
		{"POST", "/v1/completions", "Bearer s3cret-and-more", completion, 401},
		{"POST", "/v1/completions", "Basic s3cret", completion, 401},
		{"POST", "/v1/completions", "Bearer s3cret", completion, 200},
		{"POST", "/v1/completions", "bearer s3cret", completion, 200},
		{"POST", "/v1/chat/completions", "", `{"messages":[]}`, 401},
		{"GET", "/v1/models", "", "", 401},
		{"GET", "/v1/models", "Bearer s3cret", "", 200},
		{"GET", "/v1/models/tiny", "", "", 401},
		{"POST", "/tokenize", "", `{"prompt":"x"}`, 401},
		{"POST", "/detokenize", "Bearer s3cret", `{"tokens":[5]}`, 200},
		{"GET", "/health", "", "", 200},
		{"GET", "/metrics", "", "", 200},
		{"GET", "/", "", "", 200},
	} {
		if got := do(c.method, c.path, c.auth, c.body); got != c.want {
			t.Errorf("%s %s with %q: %d, want %d", c.method, c.path, c.auth, got, c.want)
		}
	}
}

func TestAPIKeyFromTheEnvironment(t *testing.T) {
	t.Setenv(apiKeyEnv, "from-env")
	o, err := parseOptions([]string{"--model", "m"}, io.Discard)
	if err != nil || o.apiKey != "from-env" {
		t.Errorf("options %+v, %v", o, err)
	}
	o, err = parseOptions([]string{"--model", "m", "--api-key", "flag"}, io.Discard)
	if err != nil || o.apiKey != "flag" {
		t.Errorf("the flag does not win: %+v, %v", o, err)
	}
}

func TestBodyLimitIs413(t *testing.T) {
	f := newFixture(t, "--max-body-mb", "1")
	big := `{"prompt":"` + strings.Repeat("a", 1<<20) + `"}`
	for _, path := range []string{"/v1/completions", "/v1/chat/completions", "/tokenize"} {
		status, body := f.post(t, path, big)
		apiErr(t, path, status, body, 413, nil, nil)
	}
}

// A body that arrives too slowly is cut off with 408 (--read-timeout); a
// client that never finishes its headers is disconnected
// (--read-header-timeout); an idle keep-alive connection is closed
// (--idle-timeout).
func TestSlowClientsAreCutOff(t *testing.T) {
	f := newFixture(t, "--read-timeout", "300ms", "--read-header-timeout", "300ms",
		"--idle-timeout", "300ms")
	c := f.rawConn(t)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{\"prompt\": ")
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to a slow body: %v", err)
	}
	apiErr(t, "slow body", resp.StatusCode, decodeBody(t, resp.Body), 408, nil, nil)
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("the slow body held the connection %v", waited)
	}

	c = f.rawConn(t)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("unfinished headers: the connection stayed open (%v)", err)
	}

	c = f.rawConn(t)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("idle keep-alive: the connection stayed open (%v)", err)
	}
}

// A streaming client that stops reading is cut off after --write-timeout:
// its handler does not wait on it forever (the tiny model finishes the
// generation itself long before; with a slower model the cancellation
// aborts the rest, as TestClientDisconnectAbortsGeneration shows).
func TestClientThatStopsReadingIsCutOff(t *testing.T) {
	f := newFixture(t, "--write-timeout", "300ms")
	// A small receive window, set before connecting so that the window
	// scale agrees with it.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	c, err := d.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// About 11 MB of events: more than the socket buffers hold.
	body := `{"prompt":"Hi","max_tokens":480,"n":16,"ignore_eos":true,"stream":true,"logprobs":20}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"X-Request-Id: stalled\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Never read: the socket buffers fill, then the server's writes block.
	start := time.Now()
	waitFor(t, "the stalled request's handler to end", func() bool {
		return strings.Contains(f.logs.String(), `"request_id":"stalled"`)
	})
	if waited := time.Since(start); waited > 8*time.Second {
		t.Errorf("the handler waited %v on a client that reads nothing", waited)
	}
	// The server closed the connection: what is left ends (EOF or reset).
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && strings.Contains(err.Error(), "timeout") {
		t.Errorf("the connection is still open: %v", err)
	}
}

func TestCallSizeLimits(t *testing.T) {
	f := newFixture(t, "--max-choices", "4", "--max-call-tokens", "100")
	status, body := f.post(t, "/v1/completions", `{"prompt":["a","b","c"],"n":2}`)
	apiErr(t, "6 choices", status, body, 400, "n", "too_many_choices")
	status, body = f.post(t, "/v1/completions", `{"prompt":["a","b"],"n":2,"max_tokens":30}`)
	apiErr(t, "2 x 2 x 30 tokens", status, body, 400, "max_tokens", "too_many_tokens")
	status, body = f.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"n":5}`)
	apiErr(t, "chat n=5", status, body, 400, "n", "too_many_choices")
	f.complete(t, `{"prompt":["a","b"],"n":2,"max_tokens":20}`)
}

// With one slot and no queue, a second call while the first runs is a 429
// with Retry-After; with a queue of one it waits and succeeds.
func TestConcurrencyLimitAndQueue(t *testing.T) {
	for _, queue := range []int{0, 1} {
		t.Run(fmt.Sprintf("queue%d", queue), func(t *testing.T) {
			f := newLongFixture(t, "--max-concurrency", "1", "--max-queue", fmt.Sprint(queue))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url("/v1/completions"),
				strings.NewReader(fmt.Sprintf(`{"prompt":"Hi","max_tokens":%d,"ignore_eos":true,
					"stream":true}`, longRequest)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, resp.Body)
				first <- err
			}()
			if queue == 0 {
				r2, err := http.Post(f.url("/v1/completions"), "application/json",
					strings.NewReader(`{"prompt":"Hi","max_tokens":2}`))
				if err != nil {
					t.Fatal(err)
				}
				if ra := r2.Header.Get("Retry-After"); ra != "1" {
					t.Errorf("Retry-After %q", ra)
				}
				apiErr(t, "second call", r2.StatusCode, decodeBody(t, r2.Body), 429, nil, "rate_limit_exceeded")
				r2.Body.Close()
				cancel() // the first call's client leaves, freeing the slot
				<-first
				waitFor(t, "the slot freed", func() bool { n, _ := f.srv.admission.load(); return n == 0 })
				f.complete(t, `{"prompt":"Hi","max_tokens":2}`)
				return
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.complete(t, `{"prompt":"Hi","max_tokens":2}`) // waits for the slot
			}()
			waitFor(t, "the second call queued", func() bool {
				_, waiting := f.srv.admission.load()
				return waiting == 1
			})
			r3, err := http.Post(f.url("/v1/completions"), "application/json",
				strings.NewReader(`{"prompt":"Hi","max_tokens":2}`))
			if err != nil {
				t.Fatal(err)
			}
			r3.Body.Close()
			if r3.StatusCode != 429 {
				t.Errorf("a third call with the queue full: %d, want 429", r3.StatusCode)
			}
			cancel() // the queued call gets the slot
			<-first
			wg.Wait()
		})
	}
}
