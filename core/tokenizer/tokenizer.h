// The tokenizer: a thin wrapper over sentencepiece, and an incremental
// detokenizer that turns a growing list of token ids into text deltas that
// never split a UTF-8 character.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pvllm {

class Tokenizer {
 public:
  // Loads a sentencepiece model file (tokenizer.model).
  static Status load(const std::string& path, std::unique_ptr<Tokenizer>* out);
  // Loads from the serialized model proto (bytes of a tokenizer.model).
  static Status load_from_bytes(std::string_view bytes, std::unique_ptr<Tokenizer>* out);
  ~Tokenizer();

  // Encodes text; prepends BOS when add_bos.
  Status encode(std::string_view text, bool add_bos, std::vector<int32_t>* ids) const;
  // Decodes ids to text the way sentencepiece does (BOS/EOS dropped, the
  // leading space of the first piece stripped). Ids outside the vocabulary
  // are an error.
  Status decode(const std::vector<int32_t>& ids, std::string* text) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool is_valid_id(int32_t id) const { return id >= 0 && id < vocab_size(); }

  // The raw surface bytes one token contributes when it follows other text:
  // "▁" becomes a space, a byte-fallback piece <0xAB> becomes that byte,
  // control tokens (BOS/EOS/UNK) contribute "". Used by the incremental
  // detokenizer.
  const std::string& token_bytes(int32_t id) const;

 private:
  Tokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> token_bytes_;  // [vocab_size]
};

// Turns generated token ids into text deltas. The concatenation of every
// delta plus flush() is the generated tokens' text as it reads after the
// prompt: the "▁" of the first generated token is a space because text
// precedes it — unless the prompt ended with BOS (or was empty), where the
// leading space is dropped as sentencepiece and llama2.c do. Bytes of an incomplete UTF-8 character
// (byte-fallback pieces) are held back until the character completes;
// flush() emits what is held (invalid bytes as U+FFFD).
class IncrementalDetokenizer {
 public:
  // `last_prompt_token` is the prompt's final id, or -1 for no prompt.
  IncrementalDetokenizer(const Tokenizer* tokenizer, int32_t last_prompt_token);
  // Returns the text that token `id` completes (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held back, replacing incomplete sequences.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool strip_leading_space_;  // until the first non-empty piece
  std::string pending_;       // bytes of an incomplete UTF-8 character
};

// Number of bytes at the start of `s` that form complete, valid UTF-8
// characters, stopping before a trailing incomplete sequence.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace pvllm
