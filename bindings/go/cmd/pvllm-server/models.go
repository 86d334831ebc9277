package main

import (
	"net/http"
	"strings"
)

type modelObject struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len"`
}

func (s *server) modelObject() modelObject {
	return modelObject{ID: s.model, Object: "model", Created: s.created, OwnedBy: "pvllm",
		Root: s.model, MaxModelLen: s.maxModelLen}
}

// listModels serves GET /v1/models: the one model this server serves.
func (s *server) listModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]interface{}{
		"object": "list", "data": []modelObject{s.modelObject()}})
}

// getModel serves GET /v1/models/{id}.
func (s *server) getModel(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
	if id != s.model {
		s.fail(w, r, withCode(&apiError{status: http.StatusNotFound, Type: "invalid_request_error",
			Param: strPtr("model"), Message: "The model '" + id + "' does not exist; this server " +
				"serves '" + s.model + "'"}, "model_not_found"))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// health serves GET /health: 200 while the engine serves, 503 once the
// server drains or the engine is closed, so a load balancer stops sending.
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if s.isDraining() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	if _, err := s.eng.Stats(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable,
			map[string]string{"status": "unavailable", "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
