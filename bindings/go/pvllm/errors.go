package pvllm

import (
	"errors"
	"fmt"
)

// Status mirrors pvllm_status; the values are pinned by the C header.
//
// A Status is also an error value, so callers can test for a kind of failure
// with errors.Is(err, pvllm.StatusNotFound).
type Status int32

// The statuses of pvllm.h, with the same numbers.
const (
	StatusOK              Status = 0
	StatusInvalidArgument Status = 1  // NULL, out of range, wrong struct_size
	StatusNotFound        Status = 2  // file, tensor or request unknown
	StatusIOError         Status = 3  // the OS refused a file
	StatusCorruptModel    Status = 4  // malformed or inconsistent model file
	StatusUnsupported     Status = 5  // valid, but this build cannot serve it
	StatusOutOfMemory     Status = 6  // host/device memory or KV pool exhausted
	StatusInternal        Status = 7  // a bug in pvllm
	StatusTokenizerError  Status = 8  // tokenizer missing or failed
	StatusBufferTooSmall  Status = 9  // an output buffer is too small
	StatusTimeout         Status = 10 // a wait ran out of time (libpvllm 0.2)
)

// String returns the C constant's name, e.g. "PVLLM_STATUS_NOT_FOUND".
func (s Status) String() string { return statusString(s) }

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return "pvllm: " + s.String() }

// Error is every failure the library reports: the status and the message of
// the call that failed.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "pvllm: " + e.Status.String()
	}
	// e.Status is an error too: %s would print its Error(), with a second
	// "pvllm: ".
	return fmt.Sprintf("pvllm: %s: %s", e.Status.String(), e.Message)
}

// Is reports whether target is this error's Status, or an *Error with the
// same Status (and the same Message, when target has one).
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return e.Status == t
	case *Error:
		return e.Status == t.Status && (t.Message == "" || t.Message == e.Message)
	}
	return false
}

// ErrClosed is returned by every call on an Engine after Close, and carried
// by the final events of requests that were still running when the engine
// closed.
var ErrClosed = errors.New("pvllm: engine is closed")
