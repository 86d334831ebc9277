// The tokenizer a GGUF file carries in its metadata (gguf_vocab.h),
// tokenizing as llama.cpp's llama_tokenize does:
//
//   text ─▶ special and user-defined tokens cut out ─▶ per run of text:
//     "llama": sentencepiece BPE (gguf_spm.h), a space before each run
//     "gpt2":  the pre-tokenizer tokenizer.ggml.pre names, byte-level BPE
//   ─▶ BOS first and EOS last when add_special and the file asks for them
//
// Decoding drops control and unknown tokens, writes user-defined ones as
// they are, and strips the space the sentencepiece prefix adds (as
// SentencePieceTokenizer does; llama.cpp keeps it after a BOS).
// Differences from llama.cpp, all for vocabularies no converter writes:
// special tokens whose texts overlap are cut leftmost-longest (llama.cpp
// cuts the longest everywhere first); sentencepiece never merges text into
// a control token (llama.cpp would, where a control token's text is also
// the concatenation of two tokens).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/gguf_file.h"
#include "core/tokenizer/added_tokens.h"
#include "core/tokenizer/bpe_model.h"
#include "core/tokenizer/gguf_vocab.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/string_map.h"
#include "core/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pvllm {

class GgufTokenizer : public Tokenizer {
 public:
  // Opens the GGUF file (any part of a split one) and reads its tokenizer;
  // statuses as gguf::open and read_gguf_vocab.
  static Status load_file(const std::string& path, std::unique_ptr<Tokenizer>* out);
  // The tokenizer of `metadata`, from the file at `path` (named in errors).
  static Status from_metadata(const gguf::Metadata& metadata, const std::string& path,
                              std::unique_ptr<GgufTokenizer>* out);
  ~GgufTokenizer() override;

  // tokenize(text, add_special, /*parse_special=*/true).
  Status encode(std::string_view text, bool add_special, std::vector<int32_t>* ids) const override;
  // llama.cpp's llama_tokenize. `add_special`: BOS and EOS as the file asks
  // (add_bos_token, add_eos_token, or llama.cpp's defaults). `parse_special`:
  // control and unknown tokens written in the text are those tokens
  // (user-defined ones always are). Invalid UTF-8 is InvalidArgument.
  Status tokenize(std::string_view text, bool add_special, bool parse_special,
                  std::vector<int32_t>* ids) const;
  Status decode(const std::vector<int32_t>& ids, std::string* text) const override;

  int32_t vocab_size() const override { return vocab_.num_tokens(); }
  int32_t bos_id() const override { return vocab_.bos_id; }
  int32_t eos_id() const override { return vocab_.eos_id; }
  int32_t eot_id() const { return vocab_.eot_id; }  // -1 when there is none
  bool adds_bos() const { return vocab_.add_bos; }
  bool adds_eos() const { return vocab_.add_eos; }
  int32_t token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  const std::string& token_bytes(int32_t id) const override;
  int num_leading_spaces_stripped() const override { return vocab_.add_space_prefix ? 1 : 0; }
  const char* kind() const override { return "gguf"; }

 private:
  GgufTokenizer();
  Status build(const std::string& path);
  // Appends the ids of one run of text between special tokens.
  Status encode_run(std::string_view text, std::vector<int32_t>* ids) const;

  GgufVocab vocab_;  // merges released once the BPE model holds them
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;  // kSpm
  std::unique_ptr<PreTokenizer> pre_tokenizer_;                // kBpe
  std::unique_ptr<BpeModel> bpe_;                              // kBpe
  // Control, unknown and user-defined tokens; user-defined ones alone.
  std::unique_ptr<AddedTokenMatcher> special_matcher_;
  std::unique_ptr<AddedTokenMatcher> user_defined_matcher_;
  StringMap<int32_t> ids_;                // token -> id
  std::vector<std::string> token_bytes_;  // [vocab_size]
};

}  // namespace pvllm
