package pvllm_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// A .pvllm model file (libpvllm 0.7), made beside the tiny model's folder by
// $PVLLM_MAKE_TINY_MODEL --pvllm: it serves the folder's tokens under every
// checksum mode, and a damaged tensor is refused by name.
func tinyPvllm(t *testing.T) (folder, file string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "tiny.pvllm")
	return tinyModel(t, "--pvllm", file), file
}

func generateFrom(t *testing.T, cfg pvllm.Config) []int32 {
	t.Helper()
	cfg.NumThreads = 1
	cfg.KVCacheBytes = 16 << 20
	eng, err := pvllm.New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.ModelPath, err)
	}
	defer eng.Close()
	res, err := eng.Generate(testContext(t), "Once upon a time", exactly(12))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return res.Samples[0].TokenIDs
}

func TestPvllmFileServesTheFoldersTokens(t *testing.T) {
	folder, file := tinyPvllm(t)
	want := generateFrom(t, pvllm.Config{ModelPath: folder})
	for _, mode := range []pvllm.ModelChecksums{pvllm.ModelChecksumsFull, pvllm.ModelChecksumsLazy,
		pvllm.ModelChecksumsNone} {
		got := generateFrom(t, pvllm.Config{ModelPath: file, ModelChecksums: mode})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("checksums %d: %v, the folder gave %v", mode, got, want)
		}
	}
}

func TestPvllmFileWithADamagedTensorIsCorruptModel(t *testing.T) {
	_, file := tinyPvllm(t)
	bytes, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bytes[len(bytes)-1] ^= 0x40 // inside the last tensor, the packed head
	if err := os.WriteFile(file, bytes, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []pvllm.ModelChecksums{pvllm.ModelChecksumsFull, pvllm.ModelChecksumsLazy} {
		_, err := pvllm.New(pvllm.Config{ModelPath: file, ModelChecksums: mode})
		var pe *pvllm.Error
		if !errors.As(err, &pe) || pe.Status != pvllm.StatusCorruptModel ||
			!strings.Contains(pe.Message, "lm_head.weight does not match its checksum") {
			t.Errorf("checksums %d: %v, want CORRUPT_MODEL naming lm_head.weight", mode, err)
		}
	}
	eng, err := pvllm.New(pvllm.Config{ModelPath: file, ModelChecksums: pvllm.ModelChecksumsNone})
	if err != nil {
		t.Fatalf("checksums off: %v", err)
	}
	eng.Close()
	if _, err := pvllm.New(pvllm.Config{ModelPath: file, ModelChecksums: 7}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("ModelChecksums 7: %v, want INVALID_ARGUMENT", err)
	}
}
