package main

import (
	"encoding/json"
	"net/http"
)

// eventWriter writes a server-sent event stream as OpenAI does: one
// "data: JSON" event per chunk, flushed at once, and "data: [DONE]" last.
type eventWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
}

func newEventWriter(w http.ResponseWriter) *eventWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy in front must not buffer the stream
	w.WriteHeader(http.StatusOK)
	ew := &eventWriter{w: w}
	ew.flusher, _ = w.(http.Flusher)
	ew.flush()
	return ew
}

func (ew *eventWriter) flush() {
	if ew.flusher != nil {
		ew.flusher.Flush()
	}
}

func (ew *eventWriter) write(payload []byte) error {
	buf := make([]byte, 0, len(payload)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, payload...)
	buf = append(buf, "\n\n"...)
	if _, err := ew.w.Write(buf); err != nil {
		return err
	}
	ew.flush()
	return nil
}

// data sends v as one event; an error means the client is gone.
func (ew *eventWriter) data(v interface{}) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ew.write(b)
}

// error sends an error object as an event: the status line was sent long
// ago, so this is how a stream says it failed. The stream then ends.
func (ew *eventWriter) error(e *apiError) error {
	if e == nil {
		e = serverError("the request failed")
	}
	if err := ew.data(map[string]*apiError{"error": e}); err != nil {
		return err
	}
	return errStreamFailed
}

func (ew *eventWriter) done() { ew.write([]byte("[DONE]")) }

// errStreamFailed ends a stream after an error event.
var errStreamFailed = &apiError{status: http.StatusInternalServerError, Type: "server_error",
	Message: "the stream ended with an error"}
