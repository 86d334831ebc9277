package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// logAddress waits for run's "serving" line and returns its address.
func logAddress(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	var addr string
	waitFor(t, "the server to listen", func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			var m map[string]interface{}
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "serving" {
				addr = m["address"].(string)
				return true
			}
		}
		return false
	})
	return addr
}

// A drain (what SIGTERM starts) lets the stream in flight finish, refuses
// new connections, and ends run with status 0.
func TestDrainFinishesRequestsInFlight(t *testing.T) {
	model := tinyModelDir(t, true, "--max-position", "8192")
	logs := &syncBuffer{}
	stop := make(chan struct{})
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"--model", model, "--port", "0", "--threads", "1", "--device", "cpu",
			"--kv-cache-mb", "64"}, io.Discard, logs, stop)
	}()
	base := "http://" + logAddress(t, logs)
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"prompt":"Hi","max_tokens":%d,"ignore_eos":true,"stream":true}`,
			longRequest)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q %v", line, err)
	}
	close(stop)
	waitFor(t, "the drain to begin", func() bool { return strings.Contains(logs.String(), `"draining"`) })
	chunks, done, err := parseSSE(br)
	if err != nil || !done {
		t.Fatalf("the stream in flight: %v, [DONE] %v", err, done)
	}
	var finish interface{}
	for _, ch := range chunks {
		for _, c := range ch["choices"].([]interface{}) {
			if fr := c.(map[string]interface{})["finish_reason"]; fr != nil {
				finish = fr
			}
		}
	}
	if finish != "length" {
		t.Errorf("the stream in flight ended with %v, want length", finish)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("run returned %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the drain")
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("the server still takes connections after the drain")
	}
	if !strings.Contains(logs.String(), `"stopped"`) {
		t.Errorf("no stopped line in %s", logs.String())
	}
}

func TestBadOptions(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--model", "m", "--max-concurrency", "0"},
		{"--model", "m", "--max-queue", "-1"},
		{"--model", "m", "--dtype", "fp8"},
		{"--model", "m", "--kv-cache-dtype", "int4"},
		{"--model", "m", "--port", "70000"},
		{"--model", "m", "--read-timeout", "-1s"},
		{"--model", "m", "stray"},
		{"--model", "m", "--no-such-flag"},
	} {
		var errOut strings.Builder
		if code := run(args, io.Discard, &errOut, nil); code != 2 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	var logs strings.Builder
	if code := run([]string{"--model", "/nonexistent"}, io.Discard, &logs, nil); code != 1 ||
		!strings.Contains(logs.String(), "/nonexistent") {
		t.Errorf("a missing model: exit %d, log %q", code, logs.String())
	}
}
