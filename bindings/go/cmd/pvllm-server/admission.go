package main

import (
	"context"
	"net/http"
	"sync"
)

// admission bounds the generation calls served at once (slots) and those
// waiting for a slot (the queue). A call that finds the queue full is
// refused at once with 429 and Retry-After, so a burst cannot pile up
// unbounded work and memory behind the engine.
type admission struct {
	slots    chan struct{} // one token per call being served
	mu       sync.Mutex
	waiting  int
	maxQueue int
}

func newAdmission(maxConcurrency, maxQueue int) *admission {
	return &admission{slots: make(chan struct{}, maxConcurrency), maxQueue: maxQueue}
}

// acquire returns the function that frees the slot; a client that leaves
// while queued gives up its place.
func (a *admission) acquire(ctx context.Context) (func(), *apiError) {
	release := func() { <-a.slots }
	select {
	case a.slots <- struct{}{}:
		return release, nil
	default:
	}
	a.mu.Lock()
	if a.waiting >= a.maxQueue {
		a.mu.Unlock()
		return nil, withCode(&apiError{status: http.StatusTooManyRequests, Type: "rate_limit_error",
			Message: "the server is at its limit of concurrent requests and its queue is full; " +
				"retry later", retryAfter: 1}, "rate_limit_exceeded")
	}
	a.waiting++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.waiting--
		a.mu.Unlock()
	}()
	select {
	case a.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, &apiError{status: 499, Type: "invalid_request_error",
			Message: "the client closed the request while it was queued"}
	}
}

// load is what the metrics report: calls being served, and waiting.
func (a *admission) load() (serving, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.slots), a.waiting
}
