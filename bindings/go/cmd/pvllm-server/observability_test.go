package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// metricsText is GET /metrics.
func (f *fixture) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(f.url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// samples parses the exposition format into "name{labels}" -> value.
func samples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("malformed sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func TestMetrics(t *testing.T) {
	f := newFixture(t)
	f.complete(t, `{"prompt":"Hello","max_tokens":5,"ignore_eos":true,"n":2}`)
	f.chat(t, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"ignore_eos":true}`)
	f.stream(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,
		"ignore_eos":true,"stream":true}`)
	f.post(t, "/v1/completions", `{"prompt":"x","top_p":9}`)
	text := f.metricsText(t)
	v := samples(t, text)
	want := map[string]float64{
		`pvllm_http_responses_total{code="200",route="/v1/completions"}`:             1,
		`pvllm_http_responses_total{code="400",route="/v1/completions"}`:             1,
		`pvllm_http_responses_total{code="200",route="/v1/chat/completions"}`:        2,
		`pvllm_request_choices_total{endpoint="completions",finish_reason="length"}`: 2,
		`pvllm_request_choices_total{endpoint="chat",finish_reason="length"}`:        2,
		`pvllm_request_generation_tokens_total{finish_reason="length"}`:              17,
		`pvllm_time_to_first_token_seconds_count{endpoint="completions"}`:            2,
		`pvllm_time_to_first_token_seconds_count{endpoint="chat"}`:                   2,
		`pvllm_time_per_output_token_seconds_count{endpoint="chat"}`:                 2,
		`pvllm_e2e_request_latency_seconds_count{endpoint="completions"}`:            2,
		`pvllm_e2e_request_latency_seconds_bucket{endpoint="completions",le="+Inf"}`: 2,
		`pvllm_engine_requests_finished_total`:                                       3,
		`pvllm_num_requests_running`:                                                 0,
		`pvllm_num_requests_waiting`:                                                 0,
		`pvllm_preemptions_total`:                                                    0,
		`pvllm_server_calls_serving`:                                                 0,
		`pvllm_server_calls_queued`:                                                  0,
		`pvllm_generation_tokens_total`:                                              17,
	}
	for k, w := range want {
		if got, ok := v[k]; !ok || got != w {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, w)
		}
	}
	for _, k := range []string{`pvllm_request_prompt_tokens_total`, `pvllm_prompt_tokens_processed_total`,
		`pvllm_kv_blocks{state="total"}`, `pvllm_time_to_first_token_seconds_sum{endpoint="chat"}`,
		`process_resident_memory_bytes`, `go_goroutines`} {
		if v[k] <= 0 {
			t.Errorf("%s = %v, want > 0", k, v[k])
		}
	}
	for _, k := range []string{"pvllm_kv_cache_usage_ratio", "pvllm_prefix_cache_hit_rate"} {
		if _, ok := v[k]; !ok || !strings.Contains(text, "# TYPE "+k+" gauge") {
			t.Errorf("%s is missing or not a gauge", k)
		}
	}
	if !strings.Contains(text, "# TYPE pvllm_time_to_first_token_seconds histogram") {
		t.Error("time to first token is not a histogram")
	}
}

// Every request leaves one JSON line in the log, with its status and, for
// generation calls, its tokens and finish reasons.
func TestAccessLog(t *testing.T) {
	f := newFixture(t)
	req, _ := http.NewRequest("POST", f.url("/v1/completions"),
		strings.NewReader(`{"prompt":"Hello","max_tokens":4,"ignore_eos":true,"user":"alice"}`))
	req.Header.Set("X-Request-Id", "req-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Header.Get("X-Request-Id") != "req-42" {
		t.Errorf("X-Request-Id %q", resp.Header.Get("X-Request-Id"))
	}
	f.post(t, "/v1/completions", `{"prompt":"x","n":0}`)
	var lines []map[string]interface{}
	waitFor(t, "two log lines", func() bool { return strings.Count(f.logs.String(), "\n") >= 2 })
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var m map[string]interface{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		lines = append(lines, m)
	}
	ok := lines[0]
	if ok["msg"] != "request" || ok["level"] != "info" || ok["request_id"] != "req-42" ||
		ok["status"] != 200.0 || ok["user"] != "alice" || ok["completion_tokens"] != 4.0 ||
		ok["path"] != "/v1/completions" || ok["time"] == nil || ok["duration_ms"] == nil {
		t.Errorf("log line %v", ok)
	}
	if fr, _ := ok["finish_reasons"].(map[string]interface{}); fr["length"] != 1.0 {
		t.Errorf("finish reasons %v", ok["finish_reasons"])
	}
	bad := lines[1]
	if bad["status"] != 400.0 || !strings.Contains(bad["error"].(string), "'n'") {
		t.Errorf("log line %v", bad)
	}
}

func TestChatPage(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Get(f.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(raw)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`id="input"`, `id="send"`, `id="messages"`, "/v1/chat/completions",
		"include_usage"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
