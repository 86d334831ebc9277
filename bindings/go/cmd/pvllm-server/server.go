package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// server is the OpenAI-compatible HTTP front end of one engine.
type server struct {
	eng         *pvllm.Engine
	opts        *options
	model       string // the served model's name
	created     int64
	maxModelLen int // tokens of context a request may use
	vocabSize   int
	ids         uint64 // atomic: the last response id's number
	draining    int32  // atomic: 1 once shutdown began
	admission   *admission
	metrics     *metrics
	log         *logger
}

// modelInfo is what the server needs to know of the model besides the
// engine: from pvllm.InspectModel.
type modelInfo struct {
	maxModelLen int
	vocabSize   int
}

func newServer(eng *pvllm.Engine, opts *options, info modelInfo, log *logger) *server {
	s := &server{eng: eng, opts: opts, model: opts.servedName(), created: time.Now().Unix(),
		maxModelLen: info.maxModelLen, vocabSize: info.vocabSize, log: log,
		admission: newAdmission(opts.maxConcurrency, opts.maxQueue)}
	s.metrics = newMetrics(s)
	return s
}

func (s *server) nextID() uint64 { return atomic.AddUint64(&s.ids, 1) }

func (s *server) isDraining() bool { return atomic.LoadInt32(&s.draining) == 1 }

// route is one endpoint: its method, whether it needs the API key, and its
// name in the metrics.
type route struct {
	path    string
	method  string // "" = the handler checks
	auth    bool
	handler http.HandlerFunc
}

func (s *server) routes() []route {
	return []route{
		{"/v1/chat/completions", http.MethodPost, true, s.chatCompletions},
		{"/v1/completions", http.MethodPost, true, s.completions},
		{"/v1/models", http.MethodGet, true, s.listModels},
		{"/v1/models/", http.MethodGet, true, s.getModel},
		{"/tokenize", http.MethodPost, true, s.tokenize},
		{"/detokenize", http.MethodPost, true, s.detokenize},
		{"/health", http.MethodGet, false, s.health},
		{"/metrics", http.MethodGet, false, s.metrics.serve},
		{"/", "", false, s.chatPage}, // any other path: a 404 (chatPage)
	}
}

// handler is the whole service: every route behind panic recovery, the
// access log, the HTTP metrics and, where the route says, the API key.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		rt := rt
		h := rt.handler
		if rt.auth {
			h = s.requireKey(h)
		}
		mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			if rt.method != "" && r.Method != rt.method &&
				!(rt.method == http.MethodGet && r.Method == http.MethodHead) {
				w.Header().Set("Allow", rt.method)
				s.fail(w, r, &apiError{status: http.StatusMethodNotAllowed,
					Type: "invalid_request_error", Message: fmt.Sprintf(
						"%s %s is not allowed; use %s", r.Method, r.URL.Path, rt.method)})
				return
			}
			h(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		entry := &logEntry{RequestID: requestID(r), Method: r.Method, Path: r.URL.Path,
			Remote: r.RemoteAddr}
		w.Header().Set("X-Request-Id", entry.RequestID)
		rec := &responseRecorder{ResponseWriter: w, code: http.StatusOK,
			conn: connOf(r.Context()), writeTimeout: s.opts.writeTimeout}
		rec.deadline() // a deadline left by the connection's previous response must not apply
		r = r.WithContext(context.WithValue(r.Context(), logEntryKey{}, entry))
		defer func() {
			if v := recover(); v != nil {
				entry.Error = fmt.Sprintf("panic: %v", v)
				if !rec.wrote {
					writeError(rec, serverError("internal error"))
				}
			}
			entry.Status = rec.code
			entry.DurationMS = float64(time.Since(start).Microseconds()) / 1000
			s.metrics.httpRequest(s.routeName(r.URL.Path), rec.code)
			s.log.request(entry)
		}()
		mux.ServeHTTP(rec, r)
	})
}

// routeName is the path as the metrics label it: a route's path, or
// "other", so that clients cannot grow the label set.
func (s *server) routeName(path string) string {
	if strings.HasPrefix(path, "/v1/models/") {
		return "/v1/models/{id}"
	}
	for _, rt := range s.routes() {
		if rt.path == path {
			return path
		}
	}
	return "other"
}

// fail answers with an API error and notes it in the access log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	if entry, ok := r.Context().Value(logEntryKey{}).(*logEntry); ok {
		entry.Error = e.Message
	}
	writeError(w, e)
}

// checkModel accepts the served model's name, or none.
func (s *server) checkModel(name string) *apiError {
	if name == "" || name == s.model {
		return nil
	}
	return withCode(&apiError{status: http.StatusNotFound, Type: "invalid_request_error",
		Param: strPtr("model"), Message: fmt.Sprintf(
			"The model '%s' does not exist; this server serves '%s'", name, s.model)},
		"model_not_found")
}

// admit takes a generation slot (--max-concurrency), waiting in the queue
// (--max-queue) when none is free; a full queue is a 429.
func (s *server) admit(ctx context.Context) (func(), *apiError) {
	if s.isDraining() {
		return nil, unavailable("the server is shutting down")
	}
	release, err := s.admission.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return release, nil
}

// connKey: the request context holds its connection (http.Server's
// ConnContext), for per-request read and write deadlines.
type connKey struct{}

func connOf(ctx context.Context) net.Conn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	return c
}

// responseRecorder remembers the status code for the log and metrics,
// passes Flush through for streams, and gives each write to the client
// writeTimeout: a client that stops reading ends its response (and so its
// requests) instead of holding them forever.
type responseRecorder struct {
	http.ResponseWriter
	code         int
	wrote        bool
	conn         net.Conn
	writeTimeout time.Duration
}

func (r *responseRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *responseRecorder) deadline() {
	if r.conn != nil && r.writeTimeout > 0 {
		r.conn.SetWriteDeadline(time.Now().Add(r.writeTimeout))
	}
}

func (r *responseRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	r.deadline()
	return r.ResponseWriter.Write(b)
}

func (r *responseRecorder) Flush() {
	r.wrote = true
	r.deadline()
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
