package pvllm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// tinyModel makes a tiny random model (with a tokenizer) in a temp dir
// with $PVLLM_MAKE_TINY_MODEL and returns its path.
// Extra arguments go to the maker (e.g. "--max-position", "8192").
func tinyModel(t *testing.T, args ...string) string {
	t.Helper()
	maker := os.Getenv("PVLLM_MAKE_TINY_MODEL")
	if maker == "" {
		t.Fatal("PVLLM_MAKE_TINY_MODEL is not set (path of pvllm_make_tiny_model); bindings/go/test.sh sets it")
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	out, err := exec.Command(maker, append([]string{dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", maker, dir, err, out)
	}
	return dir
}

// newEngine opens an engine on a fresh tiny model and closes it with the
// test.
func newEngine(t *testing.T, mutate ...func(*pvllm.Config)) *pvllm.Engine {
	t.Helper()
	cfg := pvllm.Config{ModelPath: tinyModel(t), NumThreads: 1, KVCacheBytes: 16 << 20}
	for _, m := range mutate {
		m(&cfg)
	}
	eng, err := pvllm.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// newLongEngine serves a tiny model with an 8192-token context, for tests
// that abort a request of longRequest tokens: it cannot finish before the
// abort reaches the engine (the tiny model makes 400 tokens in a few
// milliseconds).
func newLongEngine(t *testing.T, mutate ...func(*pvllm.Config)) *pvllm.Engine {
	t.Helper()
	cfg := pvllm.Config{ModelPath: tinyModel(t, "--max-position", "8192"), NumThreads: 1,
		KVCacheBytes: 32 << 20}
	for _, m := range mutate {
		m(&cfg)
	}
	eng, err := pvllm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

const longRequest = 8000

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exactly returns greedy params that generate exactly n tokens.
func exactly(n int) pvllm.SamplingParams {
	p := pvllm.GreedySamplingParams(n)
	p.IgnoreEOS = true
	return p
}

func TestVersionMatchesHeader(t *testing.T) {
	v := pvllm.Version()
	n := pvllm.VersionNumber()
	if want := fmt.Sprintf("%d.%d.%d", n/10000, n/100%100, n%100); v != want {
		t.Errorf("Version() = %q, VersionNumber() = %d (%q)", v, n, want)
	}
	if pvllm.ABIVersion() != pvllm.BuiltABIVersion {
		t.Errorf("ABIVersion() = %d, built for %d", pvllm.ABIVersion(), pvllm.BuiltABIVersion)
	}
}

func TestGenerateProducesRequestedTokens(t *testing.T) {
	eng := newEngine(t)
	res, err := eng.Generate(testContext(t), "Hello world", exactly(12))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if len(res.Samples) != 1 {
		t.Fatalf("got %d samples, want 1", len(res.Samples))
	}
	s := res.Samples[0]
	if len(s.TokenIDs) != 12 || s.FinishReason != pvllm.FinishLength {
		t.Fatalf("got %d tokens, finish %v; want 12, length", len(s.TokenIDs), s.FinishReason)
	}
	text, err := eng.Detokenize(s.TokenIDs)
	if err != nil {
		t.Fatalf("Detokenize: %v", err)
	}
	if strings.TrimLeft(text, " ") != strings.TrimLeft(s.Text, " ") {
		t.Errorf("streamed text %q, detokenized %q", s.Text, text)
	}
}

func TestGreedyIsDeterministic(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	a, err := eng.Generate(ctx, "Once upon a time", exactly(20))
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.Generate(ctx, "Once upon a time", exactly(20))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Samples[0].TokenIDs) != fmt.Sprint(b.Samples[0].TokenIDs) {
		t.Errorf("greedy runs differ:\n%v\n%v", a.Samples[0].TokenIDs, b.Samples[0].TokenIDs)
	}
	// The same prompt on a second engine (same weights: the maker is
	// deterministic) gives the same tokens.
	other := newEngine(t)
	c, err := other.Generate(ctx, "Once upon a time", exactly(20))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Samples[0].TokenIDs) != fmt.Sprint(c.Samples[0].TokenIDs) {
		t.Errorf("greedy differs across engines:\n%v\n%v", a.Samples[0].TokenIDs, c.Samples[0].TokenIDs)
	}
}

func TestConcurrentSubmitsEachFinishOnce(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	ref, err := eng.Generate(ctx, "The cat", exactly(24))
	if err != nil {
		t.Fatal(err)
	}
	const numRequests = 32
	var wg sync.WaitGroup
	errs := make(chan error, numRequests)
	for i := 0; i < numRequests; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			maxTokens := 1 + i%24
			s, err := eng.Submit(ctx, pvllm.Request{Prompt: "The cat", Params: exactly(maxTokens)})
			if err != nil {
				errs <- fmt.Errorf("request %d: submit: %v", i, err)
				return
			}
			var tokens []int32
			finishes := 0
			for o := range s.Events() {
				if o.RequestID != s.ID() || o.Index != 0 {
					errs <- fmt.Errorf("request %d: event for request %d sample %d", i, o.RequestID, o.Index)
				}
				tokens = append(tokens, o.TokenIDs...)
				if o.FinishReason != pvllm.FinishNone {
					finishes++
					if o.FinishReason != pvllm.FinishLength {
						errs <- fmt.Errorf("request %d: finish %v, want length", i, o.FinishReason)
					}
				}
			}
			if finishes != 1 {
				errs <- fmt.Errorf("request %d: %d finish events, want 1", i, finishes)
			}
			if len(tokens) != maxTokens {
				errs <- fmt.Errorf("request %d: %d tokens, want %d", i, len(tokens), maxTokens)
			} else if want := ref.Samples[0].TokenIDs[:maxTokens]; fmt.Sprint(tokens) != fmt.Sprint(want) {
				errs <- fmt.Errorf("request %d: greedy tokens %v, alone %v", i, tokens, want)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st, err := eng.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.NumRequestsFinished < numRequests+1 {
		t.Errorf("stats: %d requests finished, want >= %d", st.NumRequestsFinished, numRequests+1)
	}
	if st.NumRunning != 0 || st.NumWaiting != 0 {
		t.Errorf("stats: %d running, %d waiting after all finished", st.NumRunning, st.NumWaiting)
	}
}

func TestContextCancellationAbortsRequest(t *testing.T) {
	eng := newLongEngine(t)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	s, err := eng.Submit(ctx, pvllm.Request{Prompt: "Hello", Params: exactly(longRequest)})
	if err != nil {
		t.Fatal(err)
	}
	var tokens, finishes int
	var last pvllm.Output
	for o := range s.Events() {
		tokens += len(o.TokenIDs)
		if tokens > 0 {
			cancel()
		}
		if o.FinishReason != pvllm.FinishNone {
			finishes++
			last = o
		}
	}
	if finishes != 1 || last.FinishReason != pvllm.FinishAbort {
		t.Fatalf("%d finish events, last %v; want 1, abort", finishes, last.FinishReason)
	}
	if tokens >= longRequest {
		t.Errorf("generated all %d tokens despite the cancellation", tokens)
	}
	// The engine stays usable and drops the aborted request.
	res, err := eng.Generate(testContext(t), "Hello", exactly(3))
	if err != nil || len(res.Samples[0].TokenIDs) != 3 {
		t.Fatalf("after abort: %v, %+v", err, res)
	}
	if st, _ := eng.Stats(); st.NumRunning != 0 || st.NumWaiting != 0 {
		t.Errorf("after abort: %d running, %d waiting", st.NumRunning, st.NumWaiting)
	}
}

func TestGenerateReturnsContextError(t *testing.T) {
	eng := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	res, err := eng.Generate(ctx, "Hello", exactly(500))
	if res == nil && errors.Is(err, context.DeadlineExceeded) {
		t.Skip("the deadline passed before the request was submitted")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		// The tiny model may finish 500 tokens within the deadline on a
		// fast machine; then there is nothing to check.
		if err == nil && res.Samples[0].FinishReason == pvllm.FinishLength {
			t.Skip("the request finished before the deadline")
		}
		t.Fatalf("Generate: err %v, want deadline exceeded", err)
	}
	if res.Samples[0].FinishReason != pvllm.FinishAbort {
		t.Errorf("finish %v, want abort", res.Samples[0].FinishReason)
	}
}

func TestStreamAbort(t *testing.T) {
	eng := newLongEngine(t)
	s, err := eng.Submit(testContext(t), pvllm.Request{Prompt: "Hi", Params: exactly(longRequest)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(); err != nil && !errors.Is(err, pvllm.StatusNotFound) {
		t.Fatalf("Abort: %v", err)
	}
	res, err := s.Collect()
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if res.Samples[0].FinishReason != pvllm.FinishAbort {
		t.Errorf("finish %v, want abort", res.Samples[0].FinishReason)
	}
	if err := s.Abort(); !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("second Abort: %v, want StatusNotFound", err)
	}
}

func TestSlowConsumerDoesNotStallOthers(t *testing.T) {
	eng := newEngine(t, func(c *pvllm.Config) { c.StreamBuffer = 1 })
	ctx := testContext(t)
	slow, err := eng.Submit(ctx, pvllm.Request{Prompt: "slow", Params: exactly(40)})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads `slow` while these run to completion.
	for i := 0; i < 4; i++ {
		res, err := eng.Generate(ctx, "fast", exactly(40))
		if err != nil || len(res.Samples[0].TokenIDs) != 40 {
			t.Fatalf("fast request %d: %v", i, err)
		}
	}
	res, err := slow.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Samples[0].TokenIDs); n != 40 {
		t.Errorf("slow consumer got %d tokens, want all 40 (nothing dropped)", n)
	}
}

func TestParallelSamplesWithSeed(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	params := exactly(10)
	params.Temperature = 1
	params.N = 4
	seed := uint64(42)
	params.Seed = &seed
	a, err := eng.Generate(ctx, "A dog", params)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Samples) != 4 {
		t.Fatalf("%d samples, want 4", len(a.Samples))
	}
	for i, s := range a.Samples {
		if s.Index != i || len(s.TokenIDs) != 10 || s.FinishReason != pvllm.FinishLength {
			t.Errorf("sample %d: index %d, %d tokens, finish %v", i, s.Index, len(s.TokenIDs), s.FinishReason)
		}
	}
	b, err := eng.Generate(ctx, "A dog", params)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Samples {
		if fmt.Sprint(a.Samples[i].TokenIDs) != fmt.Sprint(b.Samples[i].TokenIDs) {
			t.Errorf("sample %d differs with the same seed: %v vs %v", i, a.Samples[i].TokenIDs, b.Samples[i].TokenIDs)
		}
	}
}

func TestLogprobs(t *testing.T) {
	eng := newEngine(t)
	params := exactly(5)
	params.Logprobs = 3
	res, err := eng.Generate(testContext(t), "Hello", params)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Samples[0]
	if len(s.Logprobs) != len(s.TokenIDs) {
		t.Fatalf("%d logprobs for %d tokens", len(s.Logprobs), len(s.TokenIDs))
	}
	for i, lp := range s.Logprobs {
		if lp.TokenID != s.TokenIDs[i] || lp.Logprob > 0 || len(lp.Top) != 3 {
			t.Errorf("token %d: %+v (token %d)", i, lp, s.TokenIDs[i])
			continue
		}
		// Greedy: the chosen token is the most likely one.
		if lp.Top[0].TokenID != lp.TokenID || lp.Top[1].Logprob > lp.Top[0].Logprob {
			t.Errorf("token %d: top %+v, chosen %d", i, lp.Top, lp.TokenID)
		}
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	eng := newEngine(t)
	ids, err := eng.Tokenize("Hello world", true)
	if err != nil {
		t.Fatal(err)
	}
	noBOS, err := eng.Tokenize("Hello world", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(noBOS)+1 || ids[0] != 1 {
		t.Fatalf("with BOS %v, without %v", ids, noBOS)
	}
	text, err := eng.Detokenize(noBOS)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimLeft(text, " ") != "Hello world" {
		t.Errorf("round trip gave %q", text)
	}
	long := strings.Repeat("a b c ", 200)
	if ids, err := eng.Tokenize(long, false); err != nil || len(ids) < 200 {
		t.Errorf("long text: %d ids, %v", len(ids), err)
	}
	if _, err := eng.Detokenize([]int32{1 << 20}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("Detokenize(out of vocabulary): %v, want InvalidArgument", err)
	}
}

func TestSubmitTokenIDs(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	ids, err := eng.Tokenize("Once upon", true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := eng.Submit(ctx, pvllm.Request{PromptTokens: ids, Params: exactly(8)})
	if err != nil {
		t.Fatal(err)
	}
	byIDs, err := s.Collect()
	if err != nil {
		t.Fatal(err)
	}
	byText, err := eng.Generate(ctx, "Once upon", exactly(8))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(byIDs.Samples[0].TokenIDs) != fmt.Sprint(byText.Samples[0].TokenIDs) {
		t.Errorf("token prompt %v, text prompt %v", byIDs.Samples[0].TokenIDs, byText.Samples[0].TokenIDs)
	}
}

func TestRandomWeightsModelGeneratesFromTokenIDs(t *testing.T) {
	cfg := pvllm.Config{RandomWeights: "tiny", NumThreads: 1, KVCacheBytes: 16 << 20}
	eng, err := pvllm.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer eng.Close()
	ctx := testContext(t)
	s, err := eng.Submit(ctx, pvllm.Request{PromptTokens: []int32{1, 7, 42}, Params: exactly(5)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.Samples[0].TokenIDs); n != 5 {
		t.Errorf("generated %d tokens, want 5", n)
	}
	_, err = eng.Generate(ctx, "hello", exactly(5))
	if !errors.Is(err, pvllm.StatusTokenizerError) {
		t.Errorf("text prompt on a random-weights model: got %v, want a tokenizer error", err)
	}
	if _, err := pvllm.New(pvllm.Config{RandomWeights: "no-such-shape"}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("unknown shape: got %v, want InvalidArgument", err)
	}
}

func TestNonexistentModelIsNotFound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-model")
	_, err := pvllm.New(pvllm.Config{ModelPath: path})
	var perr *pvllm.Error
	if !errors.As(err, &perr) {
		t.Fatalf("New: %v (%T), want *pvllm.Error", err, err)
	}
	if perr.Status != pvllm.StatusNotFound || !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("status %v, want NotFound", perr.Status)
	}
	if !strings.Contains(perr.Message, path) {
		t.Errorf("message %q does not name %s", perr.Message, path)
	}
	if _, err := pvllm.EstimateMemory(pvllm.Config{ModelPath: path}); !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("EstimateMemory: %v, want NotFound", err)
	}
}

func TestBadConfigIsInvalidArgument(t *testing.T) {
	_, err := pvllm.New(pvllm.Config{ModelPath: tinyModel(t), BlockSize: 7})
	if !errors.Is(err, pvllm.StatusInvalidArgument) || !strings.Contains(err.Error(), "block_size") {
		t.Errorf("block size 7: %v, want InvalidArgument naming block_size", err)
	}
	if _, err := pvllm.New(pvllm.Config{}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("empty model path: %v, want InvalidArgument", err)
	}
}

func TestBadSamplingParamsAreInvalidArgument(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	cases := []struct {
		field  string
		mutate func(*pvllm.SamplingParams)
	}{
		{"top_p", func(p *pvllm.SamplingParams) { p.TopP = 2 }},
		{"temperature", func(p *pvllm.SamplingParams) { p.Temperature = -1 }},
		{"max_tokens", func(p *pvllm.SamplingParams) { p.MaxTokens = 0 }},
		{"top_k", func(p *pvllm.SamplingParams) { p.TopK = -3 }},
		{"logprobs", func(p *pvllm.SamplingParams) { p.Logprobs = 21 }},
		{"n", func(p *pvllm.SamplingParams) { p.N = 0 }},
		{"stop", func(p *pvllm.SamplingParams) { p.Stop = []string{""} }},
		{"max_tokens", func(p *pvllm.SamplingParams) { p.MaxTokens = 1 << 40 }},
	}
	for _, c := range cases {
		p := pvllm.DefaultSamplingParams()
		c.mutate(&p)
		_, err := eng.Submit(ctx, pvllm.Request{Prompt: "Hi", Params: p})
		var perr *pvllm.Error
		if !errors.As(err, &perr) || perr.Status != pvllm.StatusInvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", c.field, err)
			continue
		}
		if !strings.Contains(perr.Message, c.field) {
			t.Errorf("%s: message %q does not name the field", c.field, perr.Message)
		}
	}
	// The zero value is not the defaults.
	if _, err := eng.Submit(ctx, pvllm.Request{Prompt: "Hi"}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("zero SamplingParams: %v, want InvalidArgument", err)
	}
	if _, err := eng.Submit(ctx, pvllm.Request{PromptTokens: []int32{1, 99999}, Params: exactly(1)}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("token outside the vocabulary: %v, want InvalidArgument", err)
	}
	// Failed submits leave nothing behind.
	if st, _ := eng.Stats(); st.NumWaiting != 0 || st.NumRunning != 0 {
		t.Errorf("after failed submits: %d waiting, %d running", st.NumWaiting, st.NumRunning)
	}
}

func TestErrorsFromManyGoroutinesKeepTheirMessages(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				p := pvllm.DefaultSamplingParams()
				want := "top_k"
				if (i+j)%2 == 0 {
					p.TopP = 5
					want = "top_p"
				} else {
					p.TopK = -1
				}
				_, err := eng.Submit(ctx, pvllm.Request{Prompt: "x", Params: p})
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("goroutine %d: %v, want a message naming %s", i, err, want)
					return
				}
			}
		}(i)
	}
	wg.Wait()
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	eng, err := pvllm.New(pvllm.Config{ModelPath: tinyModel(t), NumThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := testContext(t)
	if _, err := eng.Submit(ctx, pvllm.Request{Prompt: "x", Params: exactly(1)}); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if _, err := eng.Generate(ctx, "x", exactly(1)); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Generate after Close: %v", err)
	}
	if _, err := eng.Stats(); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Stats after Close: %v", err)
	}
	if _, err := eng.Tokenize("x", true); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Tokenize after Close: %v", err)
	}
	if _, err := eng.Detokenize([]int32{5}); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Detokenize after Close: %v", err)
	}
}

func TestCloseEndsRunningRequests(t *testing.T) {
	eng, err := pvllm.New(pvllm.Config{ModelPath: tinyModel(t), NumThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	params := exactly(500)
	params.N = 2
	s, err := eng.Submit(testContext(t), pvllm.Request{Prompt: "x", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Events() // running
	eng.Close()
	res, err := s.Collect()
	if len(res.Samples) != 2 {
		t.Fatalf("%d samples", len(res.Samples))
	}
	for _, smp := range res.Samples {
		if smp.FinishReason == pvllm.FinishLength {
			continue // finished before Close
		}
		if smp.FinishReason != pvllm.FinishAbort || !errors.Is(smp.Err, pvllm.ErrClosed) {
			t.Errorf("sample %d: finish %v, err %v; want abort, ErrClosed", smp.Index, smp.FinishReason, smp.Err)
		}
	}
	if err != nil && !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Collect: %v", err)
	}
}

func TestStatsEstimateAndInspect(t *testing.T) {
	model := tinyModel(t)
	cfg := pvllm.Config{ModelPath: model, NumKVBlocks: 64, BlockSize: 16, NumThreads: 1}
	est, err := pvllm.EstimateMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if est.NumBlocks != 64 || est.MaxTokensInCache != 64*16 || est.WeightBytes == 0 ||
		est.KVBytesTotal != 64*est.KVBytesPerBlock {
		t.Errorf("estimate %+v", est)
	}
	mc, err := pvllm.InspectModel(model)
	if err != nil {
		t.Fatal(err)
	}
	if mc.VocabSize != 384 || mc.NumLayers != 2 || mc.Format != "huggingface" || mc.BOSTokenID != 1 {
		t.Errorf("model config %+v", mc)
	}
	var fractions []float32
	cfg.Progress = func(f float32, stage string) { fractions = append(fractions, f) }
	eng, err := pvllm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if len(fractions) == 0 || fractions[len(fractions)-1] != 1 {
		t.Errorf("progress fractions %v, want some ending at 1", fractions)
	}
	if _, err := eng.Generate(testContext(t), "Hello", exactly(7)); err != nil {
		t.Fatal(err)
	}
	st, err := eng.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.NumBlocksTotal != 64 || st.NumGenerationTokens < 7 || st.NumRequestsFinished != 1 ||
		st.NumPromptTokensProcessed == 0 || st.NumSteps < 7 {
		t.Errorf("stats %+v", st)
	}
	// The prefill attends to the prompt, each of the 6 decodes to one more.
	if p := st.NumPromptTokensProcessed; st.NumKVTokensAttended != 7*p+21 {
		t.Errorf("attended %d, want %d", st.NumKVTokensAttended, 7*p+21)
	}
}

// The architecture variants' RoPE scaling, sliding window and stop ids
// come through InspectModel, and MaxContextLength is the context an engine
// of the model accepts: a prompt of that length is taken, one more token is
// refused.
func TestInspectArchitectureFields(t *testing.T) {
	maker := os.Getenv("PVLLM_MAKE_TINY_MODEL")
	if maker == "" {
		t.Fatal("PVLLM_MAKE_TINY_MODEL is not set (path of pvllm_make_tiny_model); bindings/go/test.sh sets it")
	}
	inspect := func(arch string) (string, pvllm.ModelConfig) {
		dir := filepath.Join(t.TempDir(), arch)
		if out, err := exec.Command(maker, dir, "--arch", arch).CombinedOutput(); err != nil {
			t.Fatalf("%s --arch %s: %v\n%s", maker, arch, err, out)
		}
		mc, err := pvllm.InspectModel(dir)
		if err != nil {
			t.Fatal(err)
		}
		return dir, mc
	}
	_, llama3 := inspect("llama3")
	if llama3.RopeType != pvllm.RopeLlama3 || llama3.RopeFactor != 8 ||
		fmt.Sprint(llama3.StopTokenIDs) != "[5 7]" || llama3.MaxContextLength() != 256 {
		t.Errorf("llama3: %+v, max context %d", llama3, llama3.MaxContextLength())
	}
	_, mistral := inspect("mistral")
	if mistral.SlidingWindow != 8 || mistral.RopeType != pvllm.RopeDefault {
		t.Errorf("mistral: %+v", mistral)
	}
	dir, linear := inspect("llama-linear")
	if linear.RopeType != pvllm.RopeLinear || linear.RopeFactor != 4 ||
		linear.MaxContextLength() != 4*linear.MaxPositionEmbeddings {
		t.Fatalf("llama-linear: %+v, max context %d", linear, linear.MaxContextLength())
	}
	eng, err := pvllm.New(pvllm.Config{ModelPath: dir, NumThreads: 1, KVCacheBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	prompt := make([]int32, linear.MaxContextLength())
	for i := range prompt {
		prompt[i] = int32(3 + i%50)
	}
	st, err := eng.Submit(testContext(t), pvllm.Request{PromptTokens: prompt, Params: exactly(1)})
	if err != nil {
		t.Fatalf("a prompt of MaxContextLength tokens: %v", err)
	}
	st.Collect()
	_, err = eng.Submit(testContext(t), pvllm.Request{PromptTokens: append(prompt, 3), Params: exactly(1)})
	if !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("a prompt one token longer: %v, want INVALID_ARGUMENT", err)
	}
}

func TestProgressPanicIsRaisedByNew(t *testing.T) {
	defer func() {
		if v := recover(); v != "boom" {
			t.Errorf("recovered %v, want boom", v)
		}
	}()
	pvllm.New(pvllm.Config{ModelPath: tinyModel(t), NumThreads: 1,
		Progress: func(float32, string) { panic("boom") }})
	t.Error("New returned although the callback panicked")
}

// stories260K: the real trained checkpoint under $PVLLM_SHARED_DIR.
func TestStories260KGreedy(t *testing.T) {
	shared := os.Getenv("PVLLM_SHARED_DIR")
	if shared == "" {
		t.Skip("PVLLM_SHARED_DIR is not set: stories260K is not available")
	}
	for _, rel := range []string{"models/stories260K/stories260K.bin", "models/stories260K-hf"} {
		path := filepath.Join(shared, rel)
		t.Run(filepath.Base(path), func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				t.Skipf("%s is missing: %v", path, err)
			}
			eng, err := pvllm.New(pvllm.Config{ModelPath: path, NumThreads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			res, err := eng.Generate(testContext(t), "Once upon a time", pvllm.GreedySamplingParams(40))
			if err != nil {
				t.Fatal(err)
			}
			const want = ", there was a little girl named Lily"
			if !strings.HasPrefix(res.Text(), want) {
				t.Errorf("greedy continuation %q, want it to start with %q", res.Text(), want)
			}
		})
	}
}

// libpvllm 0.5: what a request's last event says of it, prompt logprobs,
// beam search, and preemption by swap, through the package.
func TestRequestMetricsPromptLogprobsAndBeams(t *testing.T) {
	eng := newEngine(t)
	ctx := testContext(t)
	p := exactly(6)
	p.PromptLogprobs = 2
	prompt := []int32{1, 40, 41, 42, 43, 44, 45}
	st, err := eng.Submit(ctx, pvllm.Request{PromptTokens: prompt, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PromptLogprobs) != len(prompt)-1 {
		t.Fatalf("%d prompt logprobs for a %d-token prompt", len(res.PromptLogprobs), len(prompt))
	}
	for i, lp := range res.PromptLogprobs {
		if lp.TokenID != prompt[i+1] || lp.Logprob > 0 || len(lp.Top) != 2 {
			t.Errorf("prompt logprob %d: %+v", i, lp)
		}
	}
	m := res.Metrics
	if m == nil || m.NumPromptTokens != int64(len(prompt)) || m.NumGeneratedTokens != 6 ||
		m.TimeToFirstToken <= 0 || m.E2ELatency < m.TimeToFirstToken {
		t.Errorf("metrics %+v", m)
	}

	beams := pvllm.GreedySamplingParams(8)
	beams.BeamWidth = 3
	beams.N = 2
	beams.EarlyStopping = pvllm.EarlyStoppingNever
	st, err = eng.Submit(ctx, pvllm.Request{PromptTokens: prompt, Params: beams})
	if err != nil {
		t.Fatal(err)
	}
	res, err = st.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Samples) != 2 || res.Samples[0].Score >= 0 || res.Samples[0].Score < res.Samples[1].Score ||
		len(res.Samples[0].TokenIDs) == 0 {
		t.Errorf("beam samples %+v", res.Samples)
	}
	beams.Temperature = 0.5
	if _, err := eng.Submit(ctx, pvllm.Request{PromptTokens: prompt, Params: beams}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("beam search with temperature: %v, want INVALID_ARGUMENT", err)
	}
	stats, _ := eng.Stats()
	if stats.StepTimeP50Ms <= 0 || stats.StepTimeMaxMs < stats.StepTimeP50Ms {
		t.Errorf("step times %+v", stats)
	}
}

func TestPreemptionBySwap(t *testing.T) {
	cfg := pvllm.Config{ModelPath: tinyModel(t, "--max-position", "96"), NumThreads: 1,
		BlockSize: 8, NumKVBlocks: 14, PreemptionMode: pvllm.PreemptionSwap}
	est, err := pvllm.EstimateMemory(cfg)
	if err != nil || est.SwapBytes != 14*est.KVBytesPerBlock {
		t.Fatalf("estimate %+v, %v", est, err)
	}
	// The requests run out of blocks only when they run together, and a
	// request takes well under a millisecond: on a busy machine one may
	// finish before the next is submitted. A few tries on fresh engines
	// make that unlikely; each must keep the counts consistent.
	for try := 1; ; try++ {
		s := swapRun(t, cfg)
		if s.NumBlocksSwappedIn != s.NumBlocksSwappedOut ||
			s.NumSwapBytes != (s.NumBlocksSwappedOut+s.NumBlocksSwappedIn)*int64(est.KVBytesPerBlock) {
			t.Fatalf("swap stats %+v", s)
		}
		if s.NumPreemptionsBySwap > 0 {
			return
		}
		if try == 3 {
			t.Fatalf("no preemption by swap in %d tries: %+v", try, s)
		}
	}
}

// swapRun runs five requests that together need more blocks than cfg's
// pool holds and returns the engine's stats.
func swapRun(t *testing.T, cfg pvllm.Config) pvllm.Stats {
	eng, err := pvllm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var streams []*pvllm.Stream
	for r := 0; r < 5; r++ {
		prompt := []int32{1}
		for i := 1; i < 10+3*r; i++ {
			prompt = append(prompt, int32(3+(i*7)%200))
		}
		st, err := eng.Submit(testContext(t), pvllm.Request{PromptTokens: prompt, Params: exactly(40)})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for _, st := range streams {
		if res, err := st.Collect(); err != nil || len(res.Samples[0].TokenIDs) != 40 {
			t.Fatalf("%v, %+v", err, res)
		}
	}
	s, err := eng.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A stop string made of a multi-byte character and its neighbours, from a
// generation that streams such characters: the text ends right before it,
// and no event showed any of it first.
func TestMultiByteStopStringsEndTheStreamBeforeThem(t *testing.T) {
	eng := newEngine(t)
	var tried []string
	for _, prompt := range []string{"Once upon a time", "The café", "She said 你好", "A naïve dog", "Tom"} {
		whole, err := eng.Generate(testContext(t), prompt, exactly(48))
		if err != nil {
			t.Fatal(err)
		}
		full := whole.Text()
		// A multi-byte character in the second half (so text streamed
		// before it), after an ASCII one, with the character after it.
		runes := []rune(full)
		starts := make([]int, 0, len(runes)+1)
		for i := range full {
			starts = append(starts, i)
		}
		starts = append(starts, len(full))
		pick := -1
		for i := len(runes) / 2; i >= 1 && i+1 < len(runes); i++ {
			if runes[i] > 0x7F && runes[i-1] <= 0x7F {
				pick = i
				break
			}
		}
		if pick < 0 {
			tried = append(tried, full)
			continue
		}
		stop := full[starts[pick-1]:starts[pick+2]]
		cut := strings.Index(full, stop)
		p := exactly(48)
		p.Stop = []string{stop}
		st, err := eng.Submit(testContext(t), pvllm.Request{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Collect()
		if err != nil {
			t.Fatal(err)
		}
		s := res.Samples[0]
		if s.FinishReason != pvllm.FinishStop || s.Text != full[:cut] || s.Text == "" {
			t.Fatalf("stop %q: finish %v, text %q, want %q", stop, s.FinishReason, s.Text, full[:cut])
		}
		return
	}
	t.Fatalf("no greedy text held a multi-byte character: %q", tried)
}
