package pvllm

// Tokenizers without an engine (pvllm.h since 0.9): a model's tokenizer
// and chat templates, read without its weights.

/*
#include <stdlib.h>
#include <pvllm/pvllm.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Tokenizer is a model's tokenizer and chat templates without its weights
// (pvllm_tokenizer, libpvllm 0.9): what a tool that counts tokens or
// renders chat prompts needs, in milliseconds rather than the seconds an
// Engine takes to load. It gives the same ids as an Engine over the same
// path. All methods are safe for concurrent use.
//
// Close frees it; a finalizer calls Close for a Tokenizer that became
// unreachable, as for an Engine.
type Tokenizer struct {
	// mu guards h: every C call holds a read lock; Close takes the write
	// lock to free h, so the free never overlaps a call.
	mu sync.RWMutex
	h  *C.pvllm_tokenizer // nil once closed
}

// TokenizerInfo is what a Tokenizer is (pvllm_tokenizer_info).
type TokenizerInfo struct {
	VocabSize int   // one past the largest id, added tokens included
	BOSID     int32 // -1 when there is none
	EOSID     int32 // -1 when there is none
	// The BOS and EOS texts the chat templates read (tokenizer_config.json's
	// bos_token and eos_token), else the tokenizer's own; "" when none. A
	// chat model's EOSToken ends a turn: a stop string for a chat.
	BOSToken string
	EOSToken string
	// Kind is "sentencepiece" (tokenizer.model) or "tokenizer.json"; ""
	// for a folder with chat templates alone.
	Kind string
	// Source is the file the tokenizer was read from, or the .pvllm file
	// that carries it; "" for chat templates alone.
	Source string
	// AddsBOS: Encode(text, true) puts BOS first.
	AddsBOS bool
	// HasChatTemplate: the model has a chat template of its own.
	HasChatTemplate bool
}

// OpenTokenizer opens the tokenizer and chat templates of the model at
// path: any path New accepts (a Hugging Face folder, a llama2.c .bin with
// its tokenizer beside it, a .pvllm file), a tokenizer.model or
// tokenizer.json file, or a folder holding only a tokenizer. A folder with
// chat templates (tokenizer_config.json, chat_template.jinja) and no
// tokenizer opens too: it renders, and Encode and Decode fail with
// StatusTokenizerError. Errors: StatusNotFound (no such path, or nothing
// to read there: the message names what was looked for), StatusUnsupported
// (a file of another kind, or a library older than 0.9),
// StatusInvalidArgument, StatusIOError, StatusCorruptModel,
// StatusTokenizerError.
func OpenTokenizer(path string) (*Tokenizer, error) {
	// The functions are missing from an older library: calling one would
	// fail in the dynamic linker instead of returning an error.
	if VersionNumber() < versionTokenizers {
		return nil, &Error{Status: StatusUnsupported,
			Message: "tokenizers: libpvllm " + Version() + " is older than 0.9"}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var h *C.pvllm_tokenizer
	var cerr *C.pvllm_error
	if err := takeError(C.pvllm_tokenizer_open(cpath, &h, &cerr), cerr); err != nil {
		return nil, err
	}
	t := &Tokenizer{h: h}
	runtime.SetFinalizer(t, func(t *Tokenizer) { t.Close() })
	return t, nil
}

// Close frees the tokenizer. Calling it again does nothing; every other
// method returns ErrClosed afterwards.
func (t *Tokenizer) Close() error {
	runtime.SetFinalizer(t, nil)
	t.mu.Lock()
	defer t.mu.Unlock()
	C.pvllm_tokenizer_free(t.h)
	t.h = nil
	return nil
}

// Encode encodes text, adding the special tokens the tokenizer puts around
// a text (BOS for Llama-style tokenizers) when addSpecialTokens is set, as
// a text prompt gets them. Special tokens written in the text count either
// way.
func (t *Tokenizer) Encode(text string, addSpecialTokens bool) ([]int32, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.h == nil {
		return nil, ErrClosed
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	return readIDs(len(text)+2, func(ids *C.int32_t, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status {
		return C.pvllm_tokenizer_encode(t.h, ctext, cBool(addSpecialTokens), ids, capacity, n, cerr)
	})
}

// Decode decodes ids into text; special tokens (BOS, EOS) are left out.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.h == nil {
		return "", ErrClosed
	}
	if len(ids) == 0 {
		return "", nil
	}
	return readText(8*len(ids)+16, func(buf *C.char, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status {
		return C.pvllm_tokenizer_decode(t.h, (*C.int32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)),
			buf, capacity, n, cerr)
	})
}

// ApplyChatTemplate renders the model's chat template (or opts.ChatTemplate)
// over messagesJSON, as Engine.ApplyChatTemplate does.
func (t *Tokenizer) ApplyChatTemplate(messagesJSON string, opts *ChatTemplateOptions) (string, error) {
	var params C.pvllm_chat_template_params
	free, err := cChatTemplateParams(messagesJSON, opts, &params)
	if err != nil {
		return "", err
	}
	defer free()
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.h == nil {
		return "", ErrClosed
	}
	return readText(256, func(buf *C.char, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status {
		return C.pvllm_tokenizer_apply_chat_template(t.h, &params, buf, capacity, n, cerr)
	})
}

// Info says what the tokenizer is.
func (t *Tokenizer) Info() (TokenizerInfo, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.h == nil {
		return TokenizerInfo{}, ErrClosed
	}
	var c C.pvllm_tokenizer_info
	C.pvllm_tokenizer_info_init(&c, C.size_t(unsafe.Sizeof(c)))
	var cerr *C.pvllm_error
	if err := takeError(C.pvllm_tokenizer_get_info(t.h, &c, &cerr), cerr); err != nil {
		return TokenizerInfo{}, err
	}
	// The strings belong to the tokenizer: copied while the read lock
	// keeps it alive.
	return TokenizerInfo{
		VocabSize:       int(c.vocab_size),
		BOSID:           int32(c.bos_id),
		EOSID:           int32(c.eos_id),
		BOSToken:        C.GoString(c.bos_token),
		EOSToken:        C.GoString(c.eos_token),
		Kind:            C.GoString(c.kind),
		Source:          C.GoString(c.source),
		AddsBOS:         c.adds_bos != 0,
		HasChatTemplate: c.has_chat_template != 0,
	}, nil
}
