package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
)

// logger writes structured logs: one JSON object per line (Go 1.19 has no
// log/slog), each with time, level and msg.
type logger struct {
	mu  sync.Mutex
	out io.Writer
}

func newLogger(out io.Writer) *logger { return &logger{out: out} }

func (l *logger) write(level, msg string, fields interface{}) {
	line := map[string]interface{}{}
	if fields != nil {
		raw, _ := json.Marshal(fields)
		json.Unmarshal(raw, &line)
	}
	line["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	line["level"] = level
	line["msg"] = msg
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.Write(append(b, '\n'))
}

func (l *logger) info(msg string, fields interface{})  { l.write("info", msg, fields) }
func (l *logger) error(msg string, fields interface{}) { l.write("error", msg, fields) }

// logEntry is one request's line in the access log; the handlers fill in
// what they learn (logCall, fail) through the request's context.
type logEntry struct {
	RequestID        string         `json:"request_id"`
	Method           string         `json:"method"`
	Path             string         `json:"path"`
	Status           int            `json:"status"`
	DurationMS       float64        `json:"duration_ms"`
	Remote           string         `json:"remote"`
	User             string         `json:"user,omitempty"`
	Stream           bool           `json:"stream,omitempty"`
	Choices          int            `json:"choices,omitempty"`
	PromptTokens     int            `json:"prompt_tokens,omitempty"`
	CompletionTokens int            `json:"completion_tokens,omitempty"`
	FinishReasons    map[string]int `json:"finish_reasons,omitempty"`
	Error            string         `json:"error,omitempty"`
}

type logEntryKey struct{}

// request writes a request's line: level error for 5xx answers.
func (l *logger) request(e *logEntry) {
	if e.Status >= 500 {
		l.error("request", e)
		return
	}
	l.info("request", e)
}

// logCall notes a generation call's figures in its request's log line.
func (s *server) logCall(r *http.Request, c *call) {
	e, ok := r.Context().Value(logEntryKey{}).(*logEntry)
	if !ok {
		return
	}
	u := c.usage()
	e.User, e.Stream, e.Choices = c.req.user, c.req.stream, len(c.choices)
	e.PromptTokens, e.CompletionTokens = u.PromptTokens, u.CompletionTokens
	e.FinishReasons = c.finishReasons()
}

// requestID is the client's X-Request-Id when it sends a sane one, else a
// random one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 && printable(id) {
		return id
	}
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
