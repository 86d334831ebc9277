package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireKey lets a request through when the server has no API key, or
// when its Authorization header is "Bearer KEY". The comparison takes the
// same time whatever the key sent (both sides hashed to a fixed length,
// then compared in constant time), so timing reveals nothing of the key.
func (s *server) requireKey(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.apiKey == "" {
		return h
	}
	want := sha256.Sum256([]byte(s.opts.apiKey))
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		const scheme = "bearer "
		if len(auth) >= len(scheme) && strings.EqualFold(auth[:len(scheme)], scheme) {
			got := sha256.Sum256([]byte(strings.TrimSpace(auth[len(scheme):])))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				h(w, r)
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="pvllm"`)
		msg := "Incorrect API key provided."
		if auth == "" {
			msg = "You didn't provide an API key. Send it in the Authorization header: " +
				"'Authorization: Bearer YOUR_KEY'."
		}
		s.fail(w, r, withCode(&apiError{status: http.StatusUnauthorized,
			Type: "invalid_request_error", Message: msg}, "invalid_api_key"))
	}
}
