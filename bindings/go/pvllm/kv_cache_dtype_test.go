package pvllm_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// kvDtypeConfig is the repository's stories260K on the CPU with the KV
// cache in dtype (Config.KVCacheDtype, libpvllm 0.11).
func kvDtypeConfig(t *testing.T, dtype pvllm.KVCacheDtype) pvllm.Config {
	t.Helper()
	path := filepath.Join("..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the repository's stories260K is missing: %v", err)
	}
	return pvllm.Config{ModelPath: path, Device: "cpu", NumThreads: 2, KVCacheBytes: 8 << 20,
		KVCacheDtype: dtype}
}

func TestKVCacheDtypeInt8Generates(t *testing.T) {
	eng, err := pvllm.New(kvDtypeConfig(t, pvllm.KVCacheDtypeInt8))
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

func TestKVCacheDtypeEstimateCountsTheDtype(t *testing.T) {
	est := map[pvllm.KVCacheDtype]pvllm.MemoryEstimate{}
	for _, d := range []pvllm.KVCacheDtype{pvllm.KVCacheDtypeAuto, pvllm.KVCacheDtypeF32,
		pvllm.KVCacheDtypeF16, pvllm.KVCacheDtypeBF16, pvllm.KVCacheDtypeInt8} {
		e, err := pvllm.EstimateMemory(kvDtypeConfig(t, d))
		if err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		est[d] = e
	}
	f32, f16, int8 := est[pvllm.KVCacheDtypeF32], est[pvllm.KVCacheDtypeF16], est[pvllm.KVCacheDtypeInt8]
	if est[pvllm.KVCacheDtypeAuto] != f32 {
		t.Errorf("auto %+v, f32 %+v: auto is f32 on the CPU", est[pvllm.KVCacheDtypeAuto], f32)
	}
	if f16.KVBytesPerBlock*2 != f32.KVBytesPerBlock || est[pvllm.KVCacheDtypeBF16].KVBytesPerBlock != f16.KVBytesPerBlock {
		t.Errorf("bytes per block: f32 %d, f16 %d, bf16 %d", f32.KVBytesPerBlock, f16.KVBytesPerBlock,
			est[pvllm.KVCacheDtypeBF16].KVBytesPerBlock)
	}
	// stories260K's head_dim is 8: a row of K or V is 4 * 8 = 32 bytes in
	// f32 and 8 codes + a 2-byte fp16 scale = 10 bytes in int8.
	if int8.KVBytesPerBlock*32 != f32.KVBytesPerBlock*10 {
		t.Errorf("bytes per block: int8 %d, f32 %d; want the ratio 10/32", int8.KVBytesPerBlock, f32.KVBytesPerBlock)
	}
	if !(int8.NumBlocks > f16.NumBlocks && f16.NumBlocks > f32.NumBlocks) {
		t.Errorf("blocks: int8 %d, f16 %d, f32 %d; want them decreasing", int8.NumBlocks, f16.NumBlocks, f32.NumBlocks)
	}
}

func TestKVCacheDtypeFP8IsUnsupportedOnTheCPU(t *testing.T) {
	_, err := pvllm.New(kvDtypeConfig(t, pvllm.KVCacheDtypeFP8E4M3))
	if !errors.Is(err, pvllm.StatusUnsupported) {
		t.Fatalf("New: %v, want Unsupported", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "int8") {
		t.Errorf("the message should name the dtypes the CPU serves: %q", msg)
	}
	if _, err := pvllm.EstimateMemory(kvDtypeConfig(t, pvllm.KVCacheDtypeFP8E4M3)); !errors.Is(err, pvllm.StatusUnsupported) {
		t.Errorf("EstimateMemory: %v, want Unsupported", err)
	}
}

func TestKVCacheDtypeOutOfRangeIsInvalidArgument(t *testing.T) {
	for _, d := range []pvllm.KVCacheDtype{6, -1} {
		if _, err := pvllm.New(kvDtypeConfig(t, d)); !errors.Is(err, pvllm.StatusInvalidArgument) {
			t.Errorf("New(%v): %v, want InvalidArgument", d, err)
		}
		if _, err := pvllm.EstimateMemory(kvDtypeConfig(t, d)); !errors.Is(err, pvllm.StatusInvalidArgument) {
			t.Errorf("EstimateMemory(%v): %v, want InvalidArgument", d, err)
		}
	}
}

func TestParseKVCacheDtype(t *testing.T) {
	for _, c := range []struct {
		name string
		want pvllm.KVCacheDtype
	}{{"auto", pvllm.KVCacheDtypeAuto}, {"f32", pvllm.KVCacheDtypeF32}, {"FP32", pvllm.KVCacheDtypeF32},
		{"f16", pvllm.KVCacheDtypeF16}, {"fp16", pvllm.KVCacheDtypeF16}, {"bf16", pvllm.KVCacheDtypeBF16},
		{"Int8", pvllm.KVCacheDtypeInt8}, {"fp8_e4m3", pvllm.KVCacheDtypeFP8E4M3}, {"fp8", pvllm.KVCacheDtypeFP8E4M3}} {
		got, err := pvllm.ParseKVCacheDtype(c.name)
		if err != nil || got != c.want {
			t.Errorf("ParseKVCacheDtype(%q) = %v, %v; want %v", c.name, got, err, c.want)
		}
		if again, err := pvllm.ParseKVCacheDtype(got.String()); err != nil || again != got {
			t.Errorf("%v does not parse back: %v, %v", got, again, err)
		}
	}
	_, err := pvllm.ParseKVCacheDtype("int4")
	if !errors.Is(err, pvllm.StatusInvalidArgument) || !strings.Contains(err.Error(), `"int4"`) {
		t.Errorf("ParseKVCacheDtype(\"int4\"): %v, want InvalidArgument naming it", err)
	}
}
