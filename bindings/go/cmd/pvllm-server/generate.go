package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// call is one generation call (a completions or chat request) in flight:
// one engine request (job) per prompt, n choices per job.
type call struct {
	s        *server
	endpoint string // "completions" or "chat"
	id       string
	created  int64
	arrival  time.Time
	req      generationRequest
	jobs     []*job
	choices  []*choice // by choice index: prompt-major, as OpenAI numbers them
}

// job is one prompt's engine request.
type job struct {
	promptIndex int
	promptIDs   []int32
	stream      *pvllm.Stream
}

// choice is one sample of one job, as it arrives.
type choice struct {
	index     int
	job       *job
	prevToken int32 // the token before the next event's, for token strings
	text      strings.Builder
	textBytes int // bytes of text so far (completions' text_offset)
	numTokens int
	logprobs  []pvllm.TokenLogprobs
	finish    pvllm.FinishReason
	err       error
	// When its first and latest tokens arrived.
	firstToken, lastToken time.Time
}

// readGeneration reads what both generation endpoints start with: the body
// (bounded in size and time), its fields against the endpoint's policy,
// the shared sampling fields and the model name.
func (s *server) readGeneration(w http.ResponseWriter, r *http.Request, fields fieldPolicy) (body, generationRequest, *apiError) {
	var g generationRequest
	b, aerr := readBody(w, r, s.opts.maxBodyBytes(), s.opts.readTimeout)
	if aerr == nil {
		aerr = fields.check(b)
	}
	if aerr == nil {
		g, aerr = parseSampling(b)
	}
	if aerr == nil {
		aerr = s.checkModel(g.model)
	}
	return b, g, aerr
}

// serveCall runs an admitted, checked call to its end: submits its
// prompts, then streams its events or answers once with all of them. The
// request's context (the client going away) aborts what was submitted.
func (s *server) serveCall(w http.ResponseWriter, r *http.Request, c *call, prompts []prompt,
	stream, all func(*call, context.Context, http.ResponseWriter)) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer s.logCall(r, c)
	if aerr := c.submit(ctx, prompts); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	if c.req.stream {
		stream(c, ctx, w)
		return
	}
	all(c, ctx, w)
}

func (s *server) newCall(endpoint, idPrefix string, arrival time.Time, g generationRequest) *call {
	return &call{s: s, endpoint: endpoint, arrival: arrival, req: g,
		id: fmt.Sprintf("%s-%d", idPrefix, s.nextID()), created: arrival.Unix()}
}

// submit queues one engine request per prompt. On failure nothing of the
// call keeps running: the caller's context cancellation aborts what was
// submitted.
func (c *call) submit(ctx context.Context, prompts []prompt) *apiError {
	n := c.req.params.N
	for i, p := range prompts {
		ids := p.ids
		req := p.req
		req.Params = c.req.params
		st, err := c.s.eng.Submit(ctx, req)
		if err != nil {
			if aerr := constraintError(err, c.req.constraintField); aerr != nil {
				return aerr
			}
			return engineError(err, c.libraryNames())
		}
		j := &job{promptIndex: i, promptIDs: ids, stream: st}
		c.jobs = append(c.jobs, j)
		for k := 0; k < n; k++ {
			c.choices = append(c.choices, &choice{index: i*n + k, job: j, prevToken: ids[len(ids)-1]})
		}
		c.s.metrics.promptTokens.Add(float64(len(ids)))
	}
	return nil
}

// libraryNames maps the field names of the library's messages to the
// endpoint's.
func (c *call) libraryNames() map[string]string {
	if c.endpoint == "chat" {
		return map[string]string{"logprobs": "top_logprobs", "max_tokens": "max_completion_tokens"}
	}
	return nil
}

type taggedOutput struct {
	job *job
	out pvllm.Output
}

// run merges the jobs' events and hands each to onEvent with its choice,
// updated, until every job has ended or onEvent fails (the client went
// away: the caller's cancellation then aborts what is left).
func (c *call) run(ctx context.Context, onEvent func(ch *choice, o pvllm.Output) error) error {
	merged := make(chan taggedOutput)
	var wg sync.WaitGroup
	for _, j := range c.jobs {
		wg.Add(1)
		go func(j *job) {
			defer wg.Done()
			// After ctx is done nobody receives: keep draining the stream,
			// which ends with the abort the cancellation caused.
			for o := range j.stream.Events() {
				select {
				case merged <- taggedOutput{j, o}:
				case <-ctx.Done():
				}
			}
		}(j)
	}
	go func() { wg.Wait(); close(merged) }()
	defer c.abandon()
	n := c.req.params.N
	for ev := range merged {
		o := ev.out
		if o.Index < 0 || o.Index >= n {
			continue
		}
		ch := c.choices[ev.job.promptIndex*n+o.Index]
		ch.observe(o, time.Now())
		if o.FinishReason != pvllm.FinishNone {
			c.s.metrics.choiceFinished(c.endpoint, c.arrival, ch)
		}
		if err := onEvent(ch, o); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// abandon counts the choices run did not see end (their client went away,
// and the cancellation aborts them in the engine) as aborted.
func (c *call) abandon() {
	for _, ch := range c.choices {
		if ch.finish == pvllm.FinishNone {
			ch.finish = pvllm.FinishAbort
			c.s.metrics.choiceFinished(c.endpoint, c.arrival, ch)
		}
	}
}

func (ch *choice) observe(o pvllm.Output, now time.Time) {
	if k := len(o.TokenIDs); k > 0 {
		if ch.numTokens == 0 {
			ch.firstToken = now
		}
		ch.lastToken = now
		ch.numTokens += k
	}
	if o.FinishReason != pvllm.FinishNone {
		ch.finish, ch.err = o.FinishReason, o.Err
	}
}

// failure is the first choice that ended in error or abort, as an API error.
func (c *call) failure() *apiError {
	for _, ch := range c.choices {
		switch ch.finish {
		case pvllm.FinishError:
			return engineError(ch.err, nil)
		case pvllm.FinishAbort:
			if ch.err != nil {
				return engineError(ch.err, nil)
			}
			return unavailable("the request was aborted")
		}
	}
	return nil
}

func (c *call) usage() usage {
	var u usage
	for _, j := range c.jobs {
		u.PromptTokens += len(j.promptIDs)
	}
	for _, ch := range c.choices {
		u.CompletionTokens += ch.numTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// finishReasons counts the choices' finish reasons, for the access log.
func (c *call) finishReasons() map[string]int {
	m := map[string]int{}
	for _, ch := range c.choices {
		if r := ch.finish.String(); r != "" {
			m[r]++
		}
	}
	return m
}

// finishReason is the API's finish_reason: null while running; an engine
// abort or error never reaches a choice (they are errors).
func finishReason(r pvllm.FinishReason) *string {
	if r == pvllm.FinishNone {
		return nil
	}
	return strPtr(r.String())
}

// checkContext refuses a prompt that, with its token budget, does not fit
// the context, as OpenAI does (400, context_length_exceeded). budget 0
// means "as many as fit": it returns the room left.
func (s *server) checkContext(promptLen, budget int, budgetField string) (int, *apiError) {
	room := s.maxModelLen - promptLen
	if room < 1 {
		return 0, withCode(invalidRequest("prompt", "This model's maximum context length is %d "+
			"tokens. However, your prompt has %d tokens, leaving no room for the completion.",
			s.maxModelLen, promptLen), "context_length_exceeded")
	}
	if budget == 0 {
		return room, nil
	}
	if budget > room {
		return 0, withCode(invalidRequest(budgetField, "This model's maximum context length is %d "+
			"tokens. However, you requested %d tokens (%d in the prompt, %d in the completion). "+
			"Please reduce the length of the prompt or completion.",
			s.maxModelLen, promptLen+budget, promptLen, budget), "context_length_exceeded")
	}
	return budget, nil
}

// checkCallSize applies the per-call limits: prompts x n choices, and the
// tokens the call may hold (every prompt, plus n budgets per prompt).
func (s *server) checkCallSize(prompts []prompt, n, budget int) *apiError {
	if choices := len(prompts) * n; choices > s.opts.maxChoices {
		return withCode(invalidRequest("n", "this call asks for %d choices (%d prompts x n = %d); "+
			"the server allows %d per call (--max-choices)", choices, len(prompts), n,
			s.opts.maxChoices), "too_many_choices")
	}
	var total int64
	for _, p := range prompts {
		total += int64(len(p.ids)) + int64(n)*int64(budget)
	}
	if total > s.opts.maxCallTokens {
		return withCode(invalidRequest("max_tokens", "this call may hold %d tokens (its prompts, "+
			"plus n x the token budget for each); the server allows %d per call "+
			"(--max-call-tokens)", total, s.opts.maxCallTokens), "too_many_tokens")
	}
	return nil
}
