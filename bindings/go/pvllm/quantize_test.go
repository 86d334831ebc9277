package pvllm_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// quantizeConfig is the repository's stories260K on the CPU, quantized by
// scheme while loading (Config.Quantize, libpvllm 0.10).
func quantizeConfig(t *testing.T, scheme string) pvllm.Config {
	t.Helper()
	path := filepath.Join("..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the repository's stories260K is missing: %v", err)
	}
	return pvllm.Config{ModelPath: path, Device: "cpu", NumThreads: 2, KVCacheBytes: 8 << 20,
		Quantize: scheme}
}

func TestQuantizeQ8_0Generates(t *testing.T) {
	eng, err := pvllm.New(quantizeConfig(t, "q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	params := pvllm.GreedySamplingParams(8)
	params.IgnoreEOS = true
	res, err := eng.Generate(testContext(t), "Once upon a time", params)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Samples[0].TokenIDs); got != 8 || res.Text() == "" {
		t.Errorf("%d tokens, text %q; want 8 tokens and some text", got, res.Text())
	}
}

func TestQuantizeEstimateCountsQuantizedWeights(t *testing.T) {
	plain, err := pvllm.EstimateMemory(quantizeConfig(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	q8, err := pvllm.EstimateMemory(quantizeConfig(t, "q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	q4, err := pvllm.EstimateMemory(quantizeConfig(t, "q4_k_m"))
	if err != nil {
		t.Fatal(err)
	}
	if !(q4.WeightBytes < q8.WeightBytes && q8.WeightBytes < plain.WeightBytes) {
		t.Errorf("weight bytes: q4_k_m %d, q8_0 %d, as stored %d; want them decreasing",
			q4.WeightBytes, q8.WeightBytes, plain.WeightBytes)
	}
}

func TestQuantizeUnknownSchemeIsInvalidArgument(t *testing.T) {
	_, err := pvllm.New(quantizeConfig(t, "q9_9"))
	if !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Fatalf("New: %v, want InvalidArgument", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"q9_9"`) || !strings.Contains(msg, "q4_k_m") {
		t.Errorf("the message should name the scheme and list the known ones: %q", msg)
	}
	if _, err := pvllm.EstimateMemory(quantizeConfig(t, "q9_9")); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("EstimateMemory: %v, want InvalidArgument", err)
	}
}
