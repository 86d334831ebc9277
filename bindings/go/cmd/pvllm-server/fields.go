package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"sort"
	"time"
)

// body is a request's JSON object, field by field. Every field a request
// sends is either honoured (the endpoint decodes it), or one the server
// does not implement and accepts only at the value that means "off" (its
// default), or refused with a 400 that names it: nothing is ignored.
type body map[string]json.RawMessage

// readBody reads a JSON object of at most limit bytes: 413 when it is
// longer, 400 when it is not a JSON object.
// The body must arrive within timeout (--read-timeout): 408 otherwise.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) (body, *apiError) {
	conn := connOf(r.Context())
	if conn != nil && timeout > 0 {
		conn.SetReadDeadline(time.Now().Add(timeout))
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil && conn != nil && timeout > 0 {
		// Cleared once the body is in: the server's read that notices a
		// closed connection runs on while the response streams. After a
		// failure it stays, so the server gives up on the rest of the body
		// at once and closes the connection after the answer.
		conn.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			return nil, &apiError{status: http.StatusRequestTimeout, Type: "invalid_request_error",
				Message: "the request body did not arrive within " + timeout.String() +
					" (--read-timeout)"}
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge,
				Type: "invalid_request_error", Message: "the request body is larger than " +
					formatBytes(limit) + ", the server's limit (--max-body-mb)"}
		}
		return nil, invalidRequest("", "the request body could not be read: %v", err)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, invalidRequest("", "the request body must be a JSON object")
	}
	var b body
	if err := json.Unmarshal(trimmed, &b); err != nil {
		return nil, invalidRequest("", "the request body is not valid JSON: %v", err)
	}
	return b, nil
}

// has reports whether the field is present and not null.
func (b body) has(field string) bool {
	raw, ok := b[field]
	return ok && string(bytes.TrimSpace(raw)) != "null"
}

// decode fills target from the field when it is present and not null.
func (b body) decode(field string, target interface{}) (bool, *apiError) {
	if !b.has(field) {
		return false, nil
	}
	if err := json.Unmarshal(b[field], target); err != nil {
		return true, fieldError(field, err)
	}
	return true, nil
}

// fieldPolicy says which fields an endpoint knows.
type fieldPolicy struct {
	honoured []string
	// offOnly: fields the server does not implement, each accepted only at
	// the value that asks for nothing (the test returns true for it).
	offOnly map[string]offValue
}

// offValue tells whether a field's value asks for nothing the server would
// have to do, and says what that value is.
type offValue struct {
	ok   func(raw json.RawMessage) bool
	what string // e.g. "false", "null or {}"
}

// check refuses the first field (in name order) that the policy does not
// honour, or whose unimplemented feature the value asks for.
func (p fieldPolicy) check(b body) *apiError {
	names := make([]string, 0, len(b))
	for name := range b {
		names = append(names, name)
	}
	sort.Strings(names)
	known := make(map[string]bool, len(p.honoured))
	for _, h := range p.honoured {
		known[h] = true
	}
	for _, name := range names {
		if known[name] {
			continue
		}
		if off, ok := p.offOnly[name]; ok {
			if !b.has(name) || off.ok(b[name]) {
				continue
			}
			return withCode(invalidRequest(name, "'%s' is not supported by this server; "+
				"it accepts only %s", name, off.what), "unsupported_parameter")
		}
		return withCode(invalidRequest(name, "Unrecognized request argument supplied: %s", name),
			"unsupported_parameter")
	}
	return nil
}

// Values of offValue.
var (
	offFalse = offValue{func(raw json.RawMessage) bool {
		var v bool
		return json.Unmarshal(raw, &v) == nil && !v
	}, "false"}
	offEmptyObject = offValue{func(raw json.RawMessage) bool {
		var v map[string]json.RawMessage
		return json.Unmarshal(raw, &v) == nil && len(v) == 0
	}, "null or {}"}
	offEmptyArray = offValue{func(raw json.RawMessage) bool {
		var v []json.RawMessage
		return json.Unmarshal(raw, &v) == nil && len(v) == 0
	}, "null or []"}
	offEmptyString = offValue{func(raw json.RawMessage) bool {
		var v string
		return json.Unmarshal(raw, &v) == nil && v == ""
	}, `null or ""`}
	offNull = offValue{func(json.RawMessage) bool { return false }, "null"}
)

// offString accepts null or one of the given strings.
func offString(values ...string) offValue {
	what := "null"
	for _, v := range values {
		what += ` or "` + v + `"`
	}
	return offValue{func(raw json.RawMessage) bool {
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return false
		}
		for _, want := range values {
			if v == want {
				return true
			}
		}
		return false
	}, what}
}

// offJSON accepts null or a value equal to want (as JSON, whatever its
// spacing and key order).
func offJSON(want string) offValue {
	var w interface{}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		panic(err)
	}
	return offValue{func(raw json.RawMessage) bool {
		var v interface{}
		return json.Unmarshal(raw, &v) == nil && reflect.DeepEqual(v, w)
	}, "null or " + want}
}

// offAnyBool accepts null or a boolean: a setting that changes nothing
// while its feature (tools) is off.
var offAnyBool = offValue{func(raw json.RawMessage) bool {
	var v bool
	return json.Unmarshal(raw, &v) == nil
}, "null or a boolean"}
