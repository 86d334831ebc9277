package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

const maxBodyBytes = 8 << 20

// server is an OpenAI-compatible HTTP front end for one engine.
type server struct {
	eng     *pvllm.Engine
	model   string // the served model's name
	created int64
	nextID  uint64 // atomic

	// The server's own counters; the engine's come from eng.Stats().
	mu                  sync.Mutex
	httpRequests        map[[2]string]int64 // (path, code) -> count
	completionRequests  int64
	cancelledRequests   int64
	promptTokensServed  int64
	generatedTokensSent int64
}

func newServer(eng *pvllm.Engine, model string) *server {
	return &server{eng: eng, model: model, created: time.Now().Unix(),
		httpRequests: make(map[[2]string]int64)}
}

// handler routes the API and counts every response by path and status.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", s.method(http.MethodPost, s.completions))
	mux.HandleFunc("/v1/models", s.method(http.MethodGet, s.models))
	mux.HandleFunc("/health", s.method(http.MethodGet, s.health))
	mux.HandleFunc("/metrics", s.method(http.MethodGet, s.metrics))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(rec, r)
		path := r.URL.Path
		switch path {
		case "/v1/completions", "/v1/models", "/health", "/metrics":
		default:
			path = "other"
		}
		s.mu.Lock()
		s.httpRequests[[2]string{path, fmt.Sprint(rec.code)}]++
		s.mu.Unlock()
	})
}

func (s *server) method(m string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m {
			w.Header().Set("Allow", m)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed,
				Type: "invalid_request_error", Message: fmt.Sprintf("%s %s is not allowed; use %s",
					r.Method, r.URL.Path, m)})
			return
		}
		h(w, r)
	}
}

// statusRecorder remembers the status code and passes Flush through for
// server-sent events.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	r.wrote = true
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]interface{}{
		"object": "list",
		"data": []map[string]interface{}{{
			"id": s.model, "object": "model", "created": s.created, "owned_by": "pvllm",
		}},
	})
}

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if _, err := s.eng.Stats(); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"status": "unavailable", "error": err.Error()})
		return
	}
	writeJSON(w, map[string]string{"status": "ok"})
}

// job is one prompt's request inside a completion call.
type job struct {
	promptIndex     int
	numPromptTokens int
	lastPromptToken int32
	stream          *pvllm.Stream
}

func (s *server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(&req); err != nil {
		writeError(w, decodeError(err))
		return
	}
	if req.Model != "" && req.Model != s.model {
		code := "model_not_found"
		e := invalidRequest("model", "the model '%s' does not exist; this server serves '%s'",
			req.Model, s.model)
		e.status, e.Code = http.StatusNotFound, &code
		writeError(w, e)
		return
	}
	prompts, aerr := parsePrompts(req.Prompt)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	stop, aerr := parseStop(req.Stop)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	params := req.samplingParams(stop)

	// Every request of this call hangs off ctx: a client that goes away, or
	// an early return, aborts whatever is still running.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	jobs := make([]job, len(prompts))
	for i, p := range prompts {
		ids := p.ids
		if ids == nil {
			var err error
			if ids, err = s.eng.Tokenize(p.text, true); err != nil {
				writeError(w, engineError(err))
				return
			}
		}
		st, err := s.eng.Submit(ctx, pvllm.Request{PromptTokens: ids, Params: params})
		if err != nil {
			writeError(w, engineError(err))
			return
		}
		jobs[i] = job{promptIndex: i, numPromptTokens: len(ids), lastPromptToken: ids[len(ids)-1],
			stream: st}
	}
	s.mu.Lock()
	s.completionRequests++
	s.mu.Unlock()

	resp := completionResponse{
		ID:      fmt.Sprintf("cmpl-%d", atomic.AddUint64(&s.nextID, 1)),
		Object:  "text_completion",
		Created: time.Now().Unix(),
		Model:   s.model,
	}
	if req.Stream {
		s.streamCompletion(ctx, w, &resp, jobs, params, req.StreamOptions)
		return
	}
	s.completeAll(ctx, w, &resp, jobs, params)
}

// choiceIndex numbers choices prompt-major, as OpenAI does.
func choiceIndex(promptIndex, sample, n int) int { return promptIndex*n + sample }

func (s *server) completeAll(ctx context.Context, w http.ResponseWriter, resp *completionResponse,
	jobs []job, params pvllm.SamplingParams) {
	u := usage{}
	resp.Choices = make([]completionChoice, 0, len(jobs)*params.N)
	for _, j := range jobs {
		res, err := j.stream.Collect()
		if ctx.Err() != nil {
			s.countCancelled()
			return // the client is gone
		}
		if err != nil {
			writeError(w, engineError(err))
			return
		}
		u.PromptTokens += j.numPromptTokens
		for _, smp := range res.Samples {
			u.CompletionTokens += len(smp.TokenIDs)
			c := completionChoice{Text: smp.Text, Index: choiceIndex(j.promptIndex, smp.Index, params.N),
				FinishReason: finishReason(smp.FinishReason)}
			if params.Logprobs >= 0 {
				c.Logprobs = s.logprobs(smp.Logprobs, j.lastPromptToken, 0)
			}
			resp.Choices = append(resp.Choices, c)
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	resp.Usage = &u
	s.countTokens(u)
	writeJSON(w, resp)
}

// tagged is one event of one prompt's stream.
type tagged struct {
	promptIndex int
	out         pvllm.Output
}

func (s *server) streamCompletion(ctx context.Context, w http.ResponseWriter,
	resp *completionResponse, jobs []job, params pvllm.SamplingParams, opts *streamOptions) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}

	// Merge the prompts' streams. A forwarder that can no longer hand an
	// event over (the handler returned) keeps draining its stream, which
	// then ends with the abort that ctx's cancellation caused.
	merged := make(chan tagged)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func(j job) {
			defer wg.Done()
			for o := range j.stream.Events() {
				select {
				case merged <- tagged{j.promptIndex, o}:
				case <-ctx.Done():
				}
			}
		}(j)
	}
	go func() { wg.Wait(); close(merged) }()

	bw := bufio.NewWriter(w)
	send := func(v interface{}) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "data: %s\n\n", b)
		if err := bw.Flush(); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	u := usage{}
	for _, j := range jobs {
		u.PromptTokens += j.numPromptTokens
	}
	textOffsets := map[int]int{}  // choice index -> bytes of text sent
	lastTokens := map[int]int32{} // choice index -> the token before the next event's
	for _, j := range jobs {
		for i := 0; i < params.N; i++ {
			lastTokens[choiceIndex(j.promptIndex, i, params.N)] = j.lastPromptToken
		}
	}
	for ev := range merged {
		if ctx.Err() != nil {
			break
		}
		o := ev.out
		u.CompletionTokens += len(o.TokenIDs)
		if o.FinishReason == pvllm.FinishError || o.FinishReason == pvllm.FinishAbort {
			e := engineError(o.Err)
			if o.Err == nil {
				e = &apiError{Type: "server_error", Message: "the request was aborted"}
			}
			if send(map[string]*apiError{"error": e}) != nil {
				break
			}
			continue
		}
		if o.Text == "" && o.FinishReason == pvllm.FinishNone && len(o.TokenIDs) == 0 {
			continue
		}
		idx := choiceIndex(ev.promptIndex, o.Index, params.N)
		c := completionChoice{Text: o.Text, Index: idx, FinishReason: finishReason(o.FinishReason)}
		if params.Logprobs >= 0 {
			c.Logprobs = s.logprobs(o.Logprobs, lastTokens[idx], textOffsets[idx])
		}
		textOffsets[idx] += len(o.Text)
		if len(o.TokenIDs) > 0 {
			lastTokens[idx] = o.TokenIDs[len(o.TokenIDs)-1]
		}
		chunk := *resp
		chunk.Choices = []completionChoice{c}
		if send(chunk) != nil {
			break // the client is gone; the deferred cancel aborts the rest
		}
	}
	if ctx.Err() != nil {
		s.countCancelled()
		return
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	s.countTokens(u)
	if opts != nil && opts.IncludeUsage {
		chunk := *resp
		chunk.Choices = []completionChoice{}
		chunk.Usage = &u
		send(chunk)
	}
	fmt.Fprint(bw, "data: [DONE]\n\n")
	bw.Flush()
}

// logprobs builds the legacy logprobs object for tokens that follow the
// token prev. A token's string is what decoding it after prev adds, so
// word-initial spaces survive; offsets count bytes of the choice's text.
func (s *server) logprobs(lps []pvllm.TokenLogprobs, prev int32, offset int) *choiceLogprobs {
	out := &choiceLogprobs{Tokens: []string{}, TokenLogprobs: []float32{},
		TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	piece := func(prev, id int32) string {
		before, err1 := s.eng.Detokenize([]int32{prev})
		after, err2 := s.eng.Detokenize([]int32{prev, id})
		if err1 == nil && err2 == nil && strings.HasPrefix(after, before) {
			return after[len(before):]
		}
		if t, err := s.eng.Detokenize([]int32{id}); err == nil {
			return t
		}
		return fmt.Sprintf("<%d>", id)
	}
	for _, lp := range lps {
		tok := piece(prev, lp.TokenID)
		out.Tokens = append(out.Tokens, tok)
		out.TokenLogprobs = append(out.TokenLogprobs, lp.Logprob)
		top := make(map[string]float32, len(lp.Top))
		for _, alt := range lp.Top {
			top[piece(prev, alt.TokenID)] = alt.Logprob
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(tok)
		prev = lp.TokenID
	}
	return out
}

func (s *server) countTokens(u usage) {
	s.mu.Lock()
	s.promptTokensServed += int64(u.PromptTokens)
	s.generatedTokensSent += int64(u.CompletionTokens)
	s.mu.Unlock()
}

func (s *server) countCancelled() {
	s.mu.Lock()
	s.cancelledRequests++
	s.mu.Unlock()
}

// metrics writes the Prometheus text exposition format (version 0.0.4).
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	st, err := s.eng.Stats()
	if err != nil {
		writeError(w, engineError(err))
		return
	}
	var b strings.Builder
	metric := func(name, typ, help string, samples ...string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, smp := range samples {
			fmt.Fprintf(&b, "%s%s\n", name, smp)
		}
	}
	num := func(v interface{}) string { return fmt.Sprintf(" %v", v) }

	s.mu.Lock()
	keys := make([][2]string, 0, len(s.httpRequests))
	for k := range s.httpRequests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	var httpSamples []string
	for _, k := range keys {
		httpSamples = append(httpSamples,
			fmt.Sprintf("{path=%q,code=%q} %d", k[0], k[1], s.httpRequests[k]))
	}
	completionRequests, cancelled := s.completionRequests, s.cancelledRequests
	promptServed, generatedSent := s.promptTokensServed, s.generatedTokensSent
	s.mu.Unlock()

	metric("pvllm_http_requests_total", "counter", "HTTP responses by path and status code.",
		httpSamples...)
	metric("pvllm_completion_requests_total", "counter",
		"Completion calls accepted (each may hold several prompts).", num(completionRequests))
	metric("pvllm_completion_requests_cancelled_total", "counter",
		"Completion calls whose client went away before the end.", num(cancelled))
	metric("pvllm_usage_prompt_tokens_total", "counter",
		"Prompt tokens reported in responses' usage.", num(promptServed))
	metric("pvllm_usage_completion_tokens_total", "counter",
		"Completion tokens reported in responses' usage.", num(generatedSent))

	metric("pvllm_prompt_tokens_total", "counter", "Prefill tokens fed to the model.",
		num(st.NumPromptTokensProcessed))
	metric("pvllm_generation_tokens_total", "counter", "Tokens sampled.", num(st.NumGenerationTokens))
	metric("pvllm_cached_prompt_tokens_total", "counter",
		"Prefill tokens skipped thanks to the prefix cache.", num(st.NumCachedPromptTokens))
	metric("pvllm_requests_finished_total", "counter", "Engine requests finished.",
		num(st.NumRequestsFinished))
	metric("pvllm_steps_total", "counter", "Scheduler steps.", num(st.NumSteps))
	metric("pvllm_num_requests_running", "gauge", "Sequences in the running set.", num(st.NumRunning))
	metric("pvllm_num_requests_waiting", "gauge", "Sequences waiting to be scheduled.",
		num(st.NumWaiting))
	metric("pvllm_kv_cache_usage_ratio", "gauge", "Used KV blocks / total KV blocks.",
		num(st.KVUtilization))
	metric("pvllm_kv_blocks", "gauge", "KV cache blocks by state.",
		fmt.Sprintf("{state=\"total\"} %d", st.NumBlocksTotal),
		fmt.Sprintf("{state=\"used\"} %d", st.NumBlocksUsed),
		fmt.Sprintf("{state=\"free\"} %d", st.NumBlocksFree),
		fmt.Sprintf("{state=\"cached\"} %d", st.NumBlocksCached))
	metric("pvllm_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
		num(st.NumPreemptions))
	metric("pvllm_prefix_cache_hits_total", "counter", "Prefix-cache blocks found.",
		num(st.PrefixCacheHits))
	metric("pvllm_prefix_cache_queries_total", "counter", "Prefix-cache blocks looked up.",
		num(st.PrefixCacheQueries))

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprint(w, b.String())
}
