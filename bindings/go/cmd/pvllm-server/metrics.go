package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, on a registry of their own
// (GET /metrics): HTTP responses, one observation per choice when it ends
// (latencies, finish reasons, tokens), the admission queue, the engine's
// own counters read at each scrape, and the Go runtime and process.
type metrics struct {
	registry      *prometheus.Registry
	httpResponses *prometheus.CounterVec
	choices       *prometheus.CounterVec
	promptTokens  prometheus.Counter
	outputTokens  *prometheus.CounterVec
	ttft          *prometheus.HistogramVec
	tpot          *prometheus.HistogramVec
	e2e           *prometheus.HistogramVec
	handler       http.Handler
}

// Histogram buckets, in seconds: from a tiny model on a CPU (fractions of
// a millisecond per token) to a large one on a loaded GPU.
var (
	ttftBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	tpotBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
		0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
	e2eBuckets = []float64{0.01, 0.05, 0.1, 0.3, 0.5, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50,
		60, 120, 240, 480, 960, 1920}
)

func newMetrics(s *server) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.httpResponses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pvllm_http_responses_total",
		Help: "HTTP responses by route and status code.",
	}, []string{"route", "code"})
	m.choices = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pvllm_request_choices_total",
		Help: "Choices (samples) that ended, by endpoint and finish reason (stop, length, " +
			"abort, error).",
	}, []string{"endpoint", "finish_reason"})
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pvllm_request_prompt_tokens_total",
		Help: "Prompt tokens of the generation calls submitted.",
	})
	m.outputTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pvllm_request_generation_tokens_total",
		Help: "Tokens generated for choices that ended, by finish reason.",
	}, []string{"finish_reason"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pvllm_time_to_first_token_seconds",
		Help:    "From a call's arrival to its choice's first token (queue and prefill included).",
		Buckets: ttftBuckets,
	}, []string{"endpoint"})
	m.tpot = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pvllm_time_per_output_token_seconds",
		Help:    "Mean time between a choice's tokens after its first.",
		Buckets: tpotBuckets,
	}, []string{"endpoint"})
	m.e2e = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pvllm_e2e_request_latency_seconds",
		Help:    "From a call's arrival to its choice's end.",
		Buckets: e2eBuckets,
	}, []string{"endpoint"})
	serving := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pvllm_server_calls_serving",
		Help: "Generation calls holding a slot (--max-concurrency).",
	}, func() float64 { n, _ := s.admission.load(); return float64(n) })
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pvllm_server_calls_queued",
		Help: "Generation calls waiting for a slot (--max-queue).",
	}, func() float64 { _, n := s.admission.load(); return float64(n) })
	m.registry.MustRegister(m.httpResponses, m.choices, m.promptTokens, m.outputTokens, m.ttft,
		m.tpot, m.e2e, serving, queued, &engineCollector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}

func (m *metrics) httpRequest(route string, code int) {
	m.httpResponses.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

// choiceFinished observes a choice that ended.
func (m *metrics) choiceFinished(endpoint string, arrival time.Time, ch *choice) {
	reason := ch.finish.String()
	m.choices.WithLabelValues(endpoint, reason).Inc()
	m.outputTokens.WithLabelValues(reason).Add(float64(ch.numTokens))
	m.e2e.WithLabelValues(endpoint).Observe(time.Since(arrival).Seconds())
	if ch.numTokens > 0 {
		m.ttft.WithLabelValues(endpoint).Observe(ch.firstToken.Sub(arrival).Seconds())
	}
	if ch.numTokens > 1 {
		m.tpot.WithLabelValues(endpoint).Observe(
			ch.lastToken.Sub(ch.firstToken).Seconds() / float64(ch.numTokens-1))
	}
}

// engineCollector reads the engine's counters at each scrape.
type engineCollector struct{ s *server }

var engineDescs = struct {
	running, waiting, kvUsage, hitRate, blocks, preemptions, promptTokens, genTokens,
	cachedTokens, steps, finished, specDrafts, specProposed, specAccepted *prometheus.Desc
}{
	running: prometheus.NewDesc("pvllm_num_requests_running",
		"Sequences the engine is running.", nil, nil),
	waiting: prometheus.NewDesc("pvllm_num_requests_waiting",
		"Sequences waiting in the engine for a slot or KV blocks.", nil, nil),
	kvUsage: prometheus.NewDesc("pvllm_kv_cache_usage_ratio",
		"Used KV blocks / all KV blocks.", nil, nil),
	hitRate: prometheus.NewDesc("pvllm_prefix_cache_hit_rate",
		"Prefix-cache blocks found / looked up, since start.", nil, nil),
	blocks: prometheus.NewDesc("pvllm_kv_blocks",
		"KV blocks by state.", []string{"state"}, nil),
	preemptions: prometheus.NewDesc("pvllm_preemptions_total",
		"Sequences preempted for lack of KV blocks.", nil, nil),
	promptTokens: prometheus.NewDesc("pvllm_prompt_tokens_processed_total",
		"Prompt tokens the engine computed (recomputation included).", nil, nil),
	genTokens: prometheus.NewDesc("pvllm_generation_tokens_total",
		"Tokens the engine sampled.", nil, nil),
	cachedTokens: prometheus.NewDesc("pvllm_cached_prompt_tokens_total",
		"Prompt tokens the prefix cache spared.", nil, nil),
	steps: prometheus.NewDesc("pvllm_engine_steps_total",
		"Scheduler steps.", nil, nil),
	finished: prometheus.NewDesc("pvllm_engine_requests_finished_total",
		"Engine requests finished.", nil, nil),
	specDrafts: prometheus.NewDesc("pvllm_spec_decode_drafts_total",
		"Speculative decoding: decode steps that carried proposals.", nil, nil),
	specProposed: prometheus.NewDesc("pvllm_spec_decode_proposed_tokens_total",
		"Speculative decoding: tokens proposed.", nil, nil),
	specAccepted: prometheus.NewDesc("pvllm_spec_decode_accepted_tokens_total",
		"Speculative decoding: proposed tokens that stood.", nil, nil),
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	d := engineDescs
	for _, desc := range []*prometheus.Desc{d.running, d.waiting, d.kvUsage, d.hitRate, d.blocks,
		d.preemptions, d.promptTokens, d.genTokens, d.cachedTokens, d.steps, d.finished,
		d.specDrafts, d.specProposed, d.specAccepted} {
		ch <- desc
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.s.eng.Stats()
	if err != nil {
		return // closed: nothing to report
	}
	d := engineDescs
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v))
	}
	gauge(d.running, float64(st.NumRunning))
	gauge(d.waiting, float64(st.NumWaiting))
	gauge(d.kvUsage, float64(st.KVUtilization))
	gauge(d.hitRate, float64(st.PrefixCacheHitRate))
	gauge(d.blocks, float64(st.NumBlocksTotal), "total")
	gauge(d.blocks, float64(st.NumBlocksUsed), "used")
	gauge(d.blocks, float64(st.NumBlocksFree), "free")
	gauge(d.blocks, float64(st.NumBlocksCached), "cached")
	counter(d.preemptions, st.NumPreemptions)
	counter(d.promptTokens, st.NumPromptTokensProcessed)
	counter(d.genTokens, st.NumGenerationTokens)
	counter(d.cachedTokens, st.NumCachedPromptTokens)
	counter(d.steps, st.NumSteps)
	counter(d.finished, st.NumRequestsFinished)
	counter(d.specDrafts, st.NumSpecDrafts)
	counter(d.specProposed, st.NumSpecProposedTokens)
	counter(d.specAccepted, st.NumSpecAcceptedTokens)
}
