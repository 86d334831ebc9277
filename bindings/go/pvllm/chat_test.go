package pvllm_test

import (
	"errors"
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
