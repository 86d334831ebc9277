package pvllm_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

func openTokenizer(t *testing.T, path string) *pvllm.Tokenizer {
	t.Helper()
	tok, err := pvllm.OpenTokenizer(path)
	if err != nil {
		t.Fatalf("OpenTokenizer(%s): %v", path, err)
	}
	t.Cleanup(func() { tok.Close() })
	return tok
}

// A Tokenizer over any path New accepts gives the engine's ids and text,
// without loading the weights.
func TestTokenizerMatchesTheEngine(t *testing.T) {
	folder, file := tinyPvllm(t)
	eng := newEngine(t, func(c *pvllm.Config) { c.ModelPath = folder })
	texts := []string{"Hello world", "Once upon a time, café 你好", strings.Repeat("a b ", 300)}
	for _, path := range []string{folder, file, filepath.Join(folder, "tokenizer.model")} {
		tok := openTokenizer(t, path)
		for _, text := range texts {
			for _, add := range []bool{true, false} {
				want, err := eng.Tokenize(text, add)
				if err != nil {
					t.Fatal(err)
				}
				got, err := tok.Encode(text, add)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: Encode(%.20q, %v) = %v, %v; the engine %v", path, text, add, got, err, want)
				}
				wantText, _ := eng.Detokenize(want)
				if gotText, err := tok.Decode(want); err != nil || gotText != wantText {
					t.Errorf("%s: Decode = %q, %v; the engine %q", path, gotText, err, wantText)
				}
			}
		}
		info, err := tok.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.VocabSize != 384 || info.BOSID != 1 || info.EOSID != 2 || info.BOSToken != "<s>" ||
			info.Kind != "sentencepiece" || !info.AddsBOS || info.HasChatTemplate || info.Source == "" {
			t.Errorf("%s: info %+v", path, info)
		}
		if _, err := tok.Decode([]int32{1 << 20}); !errors.Is(err, pvllm.StatusInvalidArgument) {
			t.Errorf("%s: Decode(out of vocabulary): %v, want InvalidArgument", path, err)
		}
	}
}

// A folder holding only a tokenizer (and chat templates) is enough: here
// testdata/bos_tokenizer, a tokenizer.json whose template writes the BOS.
// The rendering and the ids are the engine's.
func TestTokenizerOnlyFolder(t *testing.T) {
	dir := filepath.Join("testdata", "bos_tokenizer")
	tok := openTokenizer(t, dir)
	info, err := tok.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.VocabSize != 258 || info.BOSID != bosID || info.BOSToken != "<|begin_of_text|>" ||
		info.EOSToken != "<|end_of_text|>" || info.Kind != "tokenizer.json" || !info.AddsBOS ||
		!info.HasChatTemplate || !strings.HasSuffix(info.Source, "tokenizer.json") {
		t.Errorf("info %+v", info)
	}
	eng := newEngine(t, func(c *pvllm.Config) { c.ModelPath = bosModel(t) })
	got, err := tok.ApplyChatTemplate(hello, nil)
	want, _ := eng.ApplyChatTemplate(hello, nil)
	if err != nil || got != want || !strings.HasPrefix(got, "<|begin_of_text|><user>") {
		t.Errorf("ApplyChatTemplate = %q, %v; the engine %q", got, err, want)
	}
	override := &pvllm.ChatTemplateOptions{ChatTemplate: "{{ bos_token }}{{ messages[0].content }}",
		NoGenerationPrompt: true}
	if got, err := tok.ApplyChatTemplate(hello, override); err != nil || got != "<|begin_of_text|>Hello!" {
		t.Errorf("ChatTemplate: %q, %v", got, err)
	}
	ids, err := tok.Encode(want, false)
	engIDs, _ := eng.Tokenize(want, false)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint(engIDs) || ids[0] != bosID || ids[1] == bosID {
		t.Errorf("Encode(rendering) = %v, %v; the engine %v", ids, err, engIDs)
	}

	// A folder with only a tokenizer.model.
	only := t.TempDir()
	model, err := os.ReadFile(filepath.Join(tinyModel(t), "tokenizer.model"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(only, "tokenizer.model"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	sp := openTokenizer(t, only)
	if ids, err := sp.Encode("Hello world", true); err != nil || len(ids) < 2 || ids[0] != 1 {
		t.Errorf("tokenizer.model alone: %v, %v", ids, err)
	}
	if _, err := sp.ApplyChatTemplate(hello, nil); !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("no chat template: %v, want NotFound", err)
	}
}

// Chat templates without a tokenizer render; encoding says there is no
// tokenizer.
func TestTokenizerChatTemplatesAlone(t *testing.T) {
	tok := openTokenizer(t, filepath.Join("..", "..", "..", "tests", "data", "chat_template_tiny"))
	if got, err := tok.ApplyChatTemplate(hello, nil); err != nil || got != "<s>[USER] Hello!\n[BOT]" {
		t.Errorf("ApplyChatTemplate = %q, %v", got, err)
	}
	if _, err := tok.Encode("Hi", true); !errors.Is(err, pvllm.StatusTokenizerError) {
		t.Errorf("Encode: %v, want TokenizerError", err)
	}
	if info, err := tok.Info(); err != nil || info.Kind != "" || !info.HasChatTemplate {
		t.Errorf("info %+v, %v", info, err)
	}
}

func TestTokenizerBadPaths(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-model")
	_, err := pvllm.OpenTokenizer(missing)
	var perr *pvllm.Error
	if !errors.As(err, &perr) || perr.Status != pvllm.StatusNotFound || !strings.Contains(perr.Message, missing) {
		t.Errorf("a missing path: %v, want NotFound naming it", err)
	} else if want := "pvllm: PVLLM_STATUS_NOT_FOUND: " + perr.Message; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if _, err := pvllm.OpenTokenizer(t.TempDir()); !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("an empty folder: %v, want NotFound", err)
	}
	other := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(other, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pvllm.OpenTokenizer(other); !errors.Is(err, pvllm.StatusUnsupported) {
		t.Errorf("a file of another kind: %v, want Unsupported", err)
	}
	if _, err := pvllm.OpenTokenizer(""); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("an empty path: %v, want InvalidArgument", err)
	}
}

func TestTokenizerCloseAndConcurrentUse(t *testing.T) {
	tok, err := pvllm.OpenTokenizer(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tok.Encode("The cat sat", true)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if got, err := tok.Encode("The cat sat", true); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("Encode = %v, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := tok.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tok.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := tok.Encode("x", true); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Encode after Close: %v", err)
	}
	if _, err := tok.Decode([]int32{5}); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Decode after Close: %v", err)
	}
	if _, err := tok.ApplyChatTemplate(hello, nil); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("ApplyChatTemplate after Close: %v", err)
	}
	if _, err := tok.Info(); !errors.Is(err, pvllm.ErrClosed) {
		t.Errorf("Info after Close: %v", err)
	}
}
