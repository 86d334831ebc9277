package main

import (
	_ "embed"
	"net/http"
)

// chatPageHTML is the chat page: one static file, no build step. It talks
// to /v1/chat/completions with streaming, as any client would.
//
//go:embed web/index.html
var chatPageHTML []byte

// chatPage serves GET / (the page) and answers every unknown path with a
// 404 error object.
func (s *server) chatPage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/index.html" {
		s.fail(w, r, &apiError{status: http.StatusNotFound, Type: "invalid_request_error",
			Message: "no route for " + r.Method + " " + r.URL.Path})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		s.fail(w, r, &apiError{status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
			Message: r.Method + " " + r.URL.Path + " is not allowed; use GET"})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy",
		"default-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(chatPageHTML)
}
