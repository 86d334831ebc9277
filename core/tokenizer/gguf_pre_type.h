// What llama.cpp does for each value of a GGUF file's tokenizer.ggml.pre
// (the pre-tokenizer of a byte-level BPE vocabulary): the split patterns it
// applies in turn (each match its own piece, the text between too), whether
// a word that is itself a token skips merging, and whether BOS is added by
// default. Only values whose patterns PCRE2 runs as llama.cpp does are
// listed; any other is Unsupported, never tokenized another way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/tokenizer/pre_tokenizer.h"

namespace pvllm {

struct GgufPreType {
  std::vector<std::string> patterns;  // PCRE2 syntax, applied in order
  bool ignore_merges = false;         // Llama 3: a word in the vocabulary is one token
  bool add_bos = false;               // when tokenizer.ggml.add_bos_token is absent
};

// The pre type named `pre` ("" is llama.cpp's "default", as it reads a file
// without the key). UNSUPPORTED naming the value for one not listed.
Status find_gguf_pre_type(const std::string& pre, GgufPreType* out);

// The pre-tokenizer for `type`: its patterns as Split steps, then the
// byte-level alphabet (core/tokenizer/byte_level.h).
Status make_gguf_pre_tokenizer(const GgufPreType& type, std::unique_ptr<PreTokenizer>* out);

}  // namespace pvllm
