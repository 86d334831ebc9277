package pvllm_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// newChatEngine opens an engine on a tiny model whose folder holds
// tests/data/chat_template_tiny's template.
func newChatEngine(t *testing.T) *pvllm.Engine {
	t.Helper()
	config, err := os.ReadFile(filepath.Join("..", "..", "..", "tests", "data", "chat_template_tiny",
		"tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return newEngine(t, func(c *pvllm.Config) {
		if err := os.WriteFile(filepath.Join(c.ModelPath, "tokenizer_config.json"), config, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

const hello = `[{"role": "user", "content": "Hello!"}]`

// The expected texts are those of tests/data/chat_goldens/tiny.json
// (rendered by @huggingface/jinja).
func TestApplyChatTemplate(t *testing.T) {
	eng := newChatEngine(t)
	got, err := eng.ApplyChatTemplate(hello, &pvllm.ChatTemplateOptions{NoGenerationPrompt: true})
	if err != nil || got != "<s>[USER] Hello!\n" {
		t.Errorf("got %q, %v", got, err)
	}
	got, err = eng.ApplyChatTemplate(hello, nil)
	if err != nil || got != "<s>[USER] Hello!\n[BOT]" {
		t.Errorf("got %q, %v", got, err)
	}
	long := strings.Repeat("y", 1000) // past the first buffer
	got, err = eng.ApplyChatTemplate(`[{"role": "user", "content": "`+long+`"}]`, nil)
	if err != nil || got != "<s>[USER] "+long+"\n[BOT]" {
		t.Errorf("long content: got %d bytes, %v", len(got), err)
	}
}

func TestApplyChatTemplateErrors(t *testing.T) {
	eng := newChatEngine(t)
	_, err := eng.ApplyChatTemplate(`[{"role": "robot", "content": "beep"}]`, nil)
	var pe *pvllm.Error
	if !errors.As(err, &pe) || pe.Status != pvllm.StatusInvalidArgument || pe.Message != "unknown role: robot" {
		t.Errorf("unknown role: %v", err)
	}
	if _, err := eng.ApplyChatTemplate("[{", nil); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("bad JSON: %v", err)
	}
	if _, err := eng.ApplyChatTemplate(hello, &pvllm.ChatTemplateOptions{TemplateName: "tool_use"}); !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("unknown template name: %v", err)
	}
	if _, err := newEngine(t).ApplyChatTemplate(hello, nil); !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("no template: %v", err)
	}
}

// bosModel makes a tiny model whose tokenizer is testdata/bos_tokenizer: a
// tokenizer.json (byte-level BPE over the 256 bytes, no merges) with
// <|begin_of_text|> (id 256) that it adds before a text, and a chat
// template that writes {{ bos_token }} first, as Llama 3's does.
func bosModel(t *testing.T) string {
	t.Helper()
	tok, err := filepath.Abs(filepath.Join("testdata", "bos_tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	return tinyModel(t, "--tokenizer", tok)
}

const bosID = 256

// promptIDs runs req (greedy, 3 tokens) asking for its prompt logprobs and
// returns the prompt the engine ran: its length, and every id but the first
// (the prompt logprobs start at the second token).
func promptIDs(t *testing.T, eng *pvllm.Engine, req pvllm.Request) (n int64, rest []int32, out []int32) {
	t.Helper()
	req.Params = exactly(3)
	req.Params.PromptLogprobs = 0
	s, err := eng.Submit(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Collect()
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range res.PromptLogprobs {
		rest = append(rest, lp.TokenID)
	}
	return res.Metrics.NumPromptTokens, rest, res.Samples[0].TokenIDs
}

// A chat template writes the BOS itself: ChatRequest submits its text
// without adding another, so the engine runs exactly one BOS, first, and
// continues it as it continues those ids. The same text with the special
// tokens added (the default) would start with two.
func TestChatRequestSubmitsOneBOS(t *testing.T) {
	eng := newEngine(t, func(c *pvllm.Config) { c.ModelPath = bosModel(t) })
	req, err := eng.ChatRequest(hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !req.NoAddSpecialTokens || req.Prompt != "<|begin_of_text|><user>Hello!\n<assistant>" ||
		req.PromptTokens != nil || req.Params.MaxTokens != pvllm.DefaultSamplingParams().MaxTokens {
		t.Fatalf("ChatRequest: %+v", req)
	}
	want, err := eng.Tokenize(req.Prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 3 || want[0] != bosID || want[1] == bosID {
		t.Fatalf("the rendering encodes to %v; want one BOS (%d) first", want, bosID)
	}

	n, rest, tokens := promptIDs(t, eng, req)
	if n != int64(len(want)) || fmt.Sprint(rest) != fmt.Sprint(want[1:]) {
		t.Errorf("ChatRequest ran a %d-token prompt ...%v; want %v (one BOS)", n, rest, want)
	}
	_, _, byIDs := promptIDs(t, eng, pvllm.Request{PromptTokens: want})
	if fmt.Sprint(tokens) != fmt.Sprint(byIDs) {
		t.Errorf("ChatRequest generated %v, the ids %v", tokens, byIDs)
	}
	res, err := eng.Chat(testContext(t), hello, nil, exactly(3))
	if err != nil || fmt.Sprint(res.Samples[0].TokenIDs) != fmt.Sprint(byIDs) ||
		res.Metrics.NumPromptTokens != int64(len(want)) {
		t.Errorf("Chat: %v, %+v; want %v from a %d-token prompt", err, res, byIDs, len(want))
	}

	// Without the flag the tokenizer adds its BOS before the template's.
	n, rest, _ = promptIDs(t, eng, pvllm.Request{Prompt: req.Prompt})
	if n != int64(len(want))+1 || len(rest) == 0 || rest[0] != bosID {
		t.Errorf("the default request ran a %d-token prompt ...%v; want two BOS", n, rest)
	}
}

// NoAddSpecialTokens tokenizes a text prompt as Tokenize(text, false) does;
// the zero value adds the BOS as before.
func TestNoAddSpecialTokens(t *testing.T) {
	eng := newEngine(t)
	with, err := eng.Tokenize("Hello world", true)
	if err != nil {
		t.Fatal(err)
	}
	without, err := eng.Tokenize("Hello world", false)
	if err != nil {
		t.Fatal(err)
	}
	n, rest, tokens := promptIDs(t, eng, pvllm.Request{Prompt: "Hello world", NoAddSpecialTokens: true})
	_, _, byIDs := promptIDs(t, eng, pvllm.Request{PromptTokens: without})
	if n != int64(len(without)) || fmt.Sprint(rest) != fmt.Sprint(without[1:]) ||
		fmt.Sprint(tokens) != fmt.Sprint(byIDs) {
		t.Errorf("NoAddSpecialTokens: a %d-token prompt ...%v generating %v; want %v generating %v",
			n, rest, tokens, without, byIDs)
	}
	n, rest, _ = promptIDs(t, eng, pvllm.Request{Prompt: "Hello world"})
	if n != int64(len(with)) || fmt.Sprint(rest) != fmt.Sprint(with[1:]) {
		t.Errorf("default: a %d-token prompt ...%v; want %v", n, rest, with)
	}
}

// ChatTemplateOptions.ChatTemplate renders instead of the model's template,
// also for a model that has none, with the model's special tokens.
func TestChatTemplateOverride(t *testing.T) {
	const tmpl = "{{ bos_token }}{% for m in messages %}({{ m.role }}: {{ m.content }}){% endfor %}" +
		"{% if add_generation_prompt %}(assistant:{% endif %}"
	opts := &pvllm.ChatTemplateOptions{ChatTemplate: tmpl}
	for name, eng := range map[string]*pvllm.Engine{"no template": newEngine(t),
		"its own template": newChatEngine(t)} {
		got, err := eng.ApplyChatTemplate(hello, opts)
		if err != nil || got != "<s>(user: Hello!)(assistant:" {
			t.Errorf("%s: %q, %v", name, got, err)
		}
		req, err := eng.ChatRequest(hello, opts)
		if err != nil || req.Prompt != "<s>(user: Hello!)(assistant:" || !req.NoAddSpecialTokens {
			t.Errorf("%s: ChatRequest %+v, %v", name, req, err)
		}
	}
	eng := newEngine(t)
	if _, err := eng.ApplyChatTemplate(hello, &pvllm.ChatTemplateOptions{ChatTemplate: "a\x00b"}); !errors.Is(err, pvllm.StatusInvalidArgument) {
		t.Errorf("a NUL byte: %v, want InvalidArgument", err)
	}
	if _, err := eng.ApplyChatTemplate(hello, &pvllm.ChatTemplateOptions{ChatTemplate: "{% for %}"}); err == nil {
		t.Error("a malformed template rendered")
	}
	if _, err := eng.ChatRequest(hello, nil); !errors.Is(err, pvllm.StatusNotFound) {
		t.Errorf("ChatRequest without a template: %v, want NotFound", err)
	}
}
