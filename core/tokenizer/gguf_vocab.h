// The tokenizer a GGUF file describes in its metadata (tokenizer.ggml.*),
// read into plain values and checked, with llama.cpp's defaults where a key
// is absent (src/llama-vocab.cpp, llama_vocab::impl::load):
//
//   tokenizer.ggml.model        "llama" (sentencepiece BPE) or "gpt2"
//                               (byte-level BPE); others are Unsupported
//   tokenizer.ggml.pre          gpt2's pre-tokenizer (gguf_pre_type.h)
//   tokenizer.ggml.tokens       [num_tokens] strings, by id
//   tokenizer.ggml.scores       [num_tokens] f32 (llama: merge priority)
//   tokenizer.ggml.token_type   [num_tokens] ints, GgufTokenType
//   tokenizer.ggml.merges       gpt2: "left right" by rank
//   tokenizer.ggml.*_token_id   bos, eos, eot, unknown, padding
//   tokenizer.ggml.add_bos_token, add_eos_token, add_space_prefix
//
// Every inconsistency (a missing or mistyped key, an array of another
// length, a token type or id out of range, a merge that is not two tokens,
// a token listed twice) is CORRUPT_MODEL naming the file and the key.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/model/gguf_file.h"
#include "core/tokenizer/gguf_pre_type.h"

namespace pvllm {

// Token types as GGUF stores them (llama.cpp's llama_token_type).
enum class GgufTokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // BOS, EOS, <|im_start|>: matched in text, dropped when decoding
  kUserDefined = 4,  // matched in text, decoded as written
  kUnused = 5,
  kByte = 6,  // <0xAB>
};

struct GgufVocab {
  enum class Kind : uint8_t { kSpm, kBpe };
  Kind kind = Kind::kSpm;
  std::string pre;                   // tokenizer.ggml.pre as written ("" when absent)
  GgufPreType pre_type;              // kBpe only
  std::vector<std::string> tokens;   // [num_tokens], by id; none empty, none twice
  std::vector<float> scores;         // [num_tokens]; 0 when the file has none
  std::vector<GgufTokenType> types;  // [num_tokens]; kNormal when the file has none
  std::vector<std::pair<std::string, std::string>> merges;  // kBpe: by rank
  // Ids in [0, num_tokens), or -1 for none.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // end of turn: the key, else found by its text (<|eot_id|>, <|im_end|>…)
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;           // encode(add_special) starts with BOS
  bool add_eos = false;           // and ends with EOS
  bool add_space_prefix = false;  // kSpm: a space before each run of text

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

// Reads the tokenizer of `metadata` (the file at `path`, named in errors).
// NOT_FOUND when the file has none (no tokenizer.ggml.model, or "none");
// UNSUPPORTED naming the model or pre-tokenizer value this build does not
// implement; CORRUPT_MODEL as above.
Status read_gguf_vocab(const gguf::Metadata& metadata, const std::string& path, GgufVocab* out);

}  // namespace pvllm
