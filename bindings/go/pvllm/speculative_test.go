package pvllm_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// specConfig is the repository's stories260K on the CPU, with speculative
// decoding by method ("" = off; libpvllm 0.11).
func specConfig(t *testing.T, method string, k int) pvllm.Config {
	t.Helper()
	path := filepath.Join("..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the repository's stories260K is missing: %v", err)
	}
	return pvllm.Config{ModelPath: path, Device: "cpu", NumThreads: 2, KVCacheBytes: 8 << 20,
		Speculative: method, SpeculativeTokens: k}
}

func greedyTokens(t *testing.T, cfg pvllm.Config) ([]int32, pvllm.Stats) {
	t.Helper()
	eng, err := pvllm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	params := pvllm.GreedySamplingParams(60)
	params.IgnoreEOS = true
	res, err := eng.Generate(testContext(t), "Once upon a time", params)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return res.Samples[0].TokenIDs, st
}

func TestSpeculativePromptLookupGivesTheSameTokens(t *testing.T) {
	plain, plainStats := greedyTokens(t, specConfig(t, "", 0))
	if len(plain) != 60 || plainStats.NumSpecDrafts != 0 {
		t.Fatalf("%d tokens, %d drafts without speculation", len(plain), plainStats.NumSpecDrafts)
	}
	for _, k := range []int{1, 4, 8} {
		got, st := greedyTokens(t, specConfig(t, "ngram", k))
		if len(got) != len(plain) {
			t.Fatalf("k %d: %d tokens, want %d", k, len(got), len(plain))
		}
		for i := range got {
			if got[i] != plain[i] {
				t.Fatalf("k %d: token %d is %d, want %d", k, i, got[i], plain[i])
			}
		}
		if st.NumSpecDrafts == 0 || st.NumSpecProposedTokens < st.NumSpecAcceptedTokens {
			t.Errorf("k %d: drafts %d, proposed %d, accepted %d", k, st.NumSpecDrafts,
				st.NumSpecProposedTokens, st.NumSpecAcceptedTokens)
		}
	}
}

func TestSpeculativeUnknownMethodIsInvalidArgument(t *testing.T) {
	_, err := pvllm.New(specConfig(t, "draft", 4))
	if !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Fatalf("got %v, want StatusInvalidArgument", err)
	}
}
