// The tokenizer interface, its loader, and an incremental detokenizer that
// turns a growing list of token ids into text deltas that never split a
// UTF-8 character. Three implementations: sentencepiece's tokenizer.model
// (sentencepiece_tokenizer.h), Hugging Face's tokenizer.json
// (json_tokenizer.h) and a GGUF file's metadata (gguf_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/model/model.h"
#include "core/tokenizer/utf8.h"

namespace pvllm {

class Tokenizer {
 public:
  // Loads the tokenizer of any model path (core/model/model_files.h): a
  // model folder, a llama2.c .bin (the tokenizer beside it), a .pvllm file
  // (the tokenizer it carries; only its header is read), or a tokenizer
  // file or its folder. NOT_FOUND naming what was looked for when the path
  // has no tokenizer.
  static Status load(const std::string& path, std::unique_ptr<Tokenizer>* out);
  // Loads one tokenizer file: tokenizer.json (by the .json extension; it
  // reads tokenizer_config.json beside it for the BOS and EOS names), a
  // GGUF file's metadata (by the .gguf extension; gguf_tokenizer.h) or a
  // sentencepiece model.
  static Status load_file(const std::string& file, std::unique_ptr<Tokenizer>* out);
  // The tokenizer a .pvllm file carries. NOT_FOUND when it has none.
  static Status load_embedded(const EmbeddedTokenizer& embedded, std::unique_ptr<Tokenizer>* out);
  virtual ~Tokenizer() = default;

  // Encodes text. `add_special`: add the special tokens the tokenizer adds
  // around a text (BOS for Llama; nothing for Qwen). Special tokens written
  // in the text (<|im_start|>) are always recognized. Invalid UTF-8 is
  // InvalidArgument (tokenizer.json).
  virtual Status encode(std::string_view text, bool add_special,
                        std::vector<int32_t>* ids) const = 0;
  // Decodes ids to text, skipping special tokens (BOS, EOS, <|im_end|>)
  // and removing the leading space the tokenizer's decoder removes. Ids
  // outside [0, vocab_size()) are InvalidArgument.
  virtual Status decode(const std::vector<int32_t>& ids, std::string* text) const = 0;

  // One past the largest id the tokenizer knows (added tokens included).
  // A model's vocabulary may be larger (padding rows).
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when there is none
  virtual int32_t eos_id() const = 0;  // -1 when there is none
  bool is_valid_id(int32_t id) const { return id >= 0 && id < vocab_size(); }

  // The id of token string `token` ("<|eot_id|>", "▁the"), -1 when absent.
  virtual int32_t token_to_id(std::string_view token) const = 0;
  // The token string of `id`; "" when out of range.
  virtual std::string id_to_token(int32_t id) const = 0;

  // The raw surface bytes one token contributes when it follows other text:
  // "▁the" gives " the", a byte token <0xAB> or a byte-level piece gives its
  // bytes, special tokens give "". Used by the incremental detokenizer.
  virtual const std::string& token_bytes(int32_t id) const = 0;
  // How many leading spaces decode() strips from the start of a text
  // (sentencepiece's dummy prefix: 1; byte-level BPE: 0).
  virtual int num_leading_spaces_stripped() const = 0;
  // "sentencepiece", "tokenizer.json" or "gguf".
  virtual const char* kind() const = 0;
};

// Turns generated token ids into text deltas. The concatenation of every
// delta plus flush() is the generated tokens' text as it reads after the
// prompt: the "▁" of the first generated token is a space because text
// precedes it — unless the prompt ended with BOS (or was empty), where the
// tokenizer's leading-space stripping applies as in decode(). Bytes of an
// incomplete UTF-8 character (byte tokens, byte-level pieces) are held back
// until the character completes; flush() emits what is held (invalid bytes
// as U+FFFD).
class IncrementalDetokenizer {
 public:
  // `last_prompt_token` is the prompt's final id, or -1 for no prompt.
  // `tokenizer` may be null only for one that is never pushed to.
  IncrementalDetokenizer(const Tokenizer* tokenizer, int32_t last_prompt_token);
  // Returns the text that token `id` completes (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held back, replacing incomplete sequences.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  int spaces_to_strip_;  // until the first piece with other text
  std::string pending_;  // bytes of an incomplete UTF-8 character
};

}  // namespace pvllm
