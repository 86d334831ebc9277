package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"pvllm.dev/pvllm/pvllm"
)

// apiError is an OpenAI error object, written as {"error": {...}} with its
// HTTP status.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// retryAfter, when > 0, is sent as the Retry-After header (seconds).
	retryAfter int
}

func (e *apiError) Error() string { return e.Message }

func strPtr(s string) *string { return &s }

// invalidRequest is a 400 naming the request field at fault ("" = none).
func invalidRequest(param, format string, args ...interface{}) *apiError {
	e := &apiError{status: http.StatusBadRequest, Type: "invalid_request_error",
		Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = strPtr(param)
	}
	return e
}

func withCode(e *apiError, code string) *apiError {
	e.Code = strPtr(code)
	return e
}

func serverError(format string, args ...interface{}) *apiError {
	return &apiError{status: http.StatusInternalServerError, Type: "server_error",
		Message: fmt.Sprintf(format, args...)}
}

func unavailable(message string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Message: message}
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// jsonKind names a JSON value's kind for error messages ("a string", "an
// integer"), never a Go type.
func jsonKind(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map[") || strings.HasPrefix(t, "main.") || strings.HasPrefix(t, "struct"):
		return "an object"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a value of another type"
}

// fieldError turns a failure to decode one field's JSON value into a 400
// naming the field and the JSON kinds expected and found.
func fieldError(field string, err error) *apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		got := "a JSON " + typeErr.Value
		if n := strings.TrimPrefix(typeErr.Value, "number "); n != typeErr.Value {
			got = n // a number the type cannot hold: 1.5 for an integer
		}
		return invalidRequest(field, "'%s' must be %s, not %s", field,
			jsonKind(typeErr.Type.String()), got)
	}
	return invalidRequest(field, "'%s' is not valid JSON of its kind: %v", field, err)
}

// samplingField finds the field a library refusal names:
// "sampling params: top_p must be in (0, 1], got 2.000000".
var samplingField = regexp.MustCompile(`sampling params: ([a-z_]+)`)

// engineError maps a pvllm failure to an HTTP error. A refused parameter is
// a 400 naming it (in the API's spelling, through apiName).
func engineError(err error, apiName map[string]string) *apiError {
	if errors.Is(err, pvllm.ErrClosed) {
		return unavailable("the server is shutting down")
	}
	var perr *pvllm.Error
	if !errors.As(err, &perr) {
		return serverError("%v", err)
	}
	switch perr.Status {
	case pvllm.StatusInvalidArgument:
		param := ""
		switch m := perr.Message; {
		case samplingField.MatchString(m):
			param = samplingField.FindStringSubmatch(m)[1]
		case strings.HasPrefix(m, "n = "):
			param = "n"
		case strings.Contains(m, "prompt"):
			param = "prompt"
		}
		if name, ok := apiName[param]; ok {
			param = name
		}
		return invalidRequest(param, "%s", perr.Message)
	case pvllm.StatusOutOfMemory:
		return unavailable("the engine is out of memory: " + perr.Message)
	case pvllm.StatusTokenizerError:
		return invalidRequest("", "the model's tokenizer refused the text: %s", perr.Message)
	}
	return serverError("%s", perr.Message)
}
