// The Hugging Face tokenizer.json tokenizer (Llama 3, Qwen, Mistral):
//
//   text ─▶ added tokens cut out ─▶ per segment: normalizer ─▶
//   pre-tokenizer ─▶ BPE per word ─▶ post-processor (BOS when add_special)
//
// and decoding as the concatenation of per-token bytes (token_decoder.h).
// Whatever the file asks for that is not implemented (another model type,
// an unknown pre-tokenizer, an option value) fails loading with
// Unsupported naming the field and value; nothing is tokenized differently
// in silence.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/added_tokens.h"
#include "core/tokenizer/bpe_model.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/post_processor.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/string_map.h"
#include "core/tokenizer/token_decoder.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm {

class JsonTokenizer : public Tokenizer {
 public:
  // Loads tokenizer.json at `path`; BOS and EOS are named by
  // tokenizer_config.json beside it when present (bos_token, eos_token),
  // else BOS is the template's first special token and there is no EOS.
  static Status load_file(const std::string& path, std::unique_ptr<Tokenizer>* out);
  // Loads from the file's text; `config_text` is tokenizer_config.json's
  // (empty when there is none).
  static Status load_from_text(std::string_view text, std::string_view config_text,
                               std::unique_ptr<Tokenizer>* out);

  Status encode(std::string_view text, bool add_special, std::vector<int32_t>* ids) const override;
  Status decode(const std::vector<int32_t>& ids, std::string* text) const override;

  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  const std::string& token_bytes(int32_t id) const override;
  const char* kind() const override { return "tokenizer.json"; }
  int num_leading_spaces_stripped() const override {
    return decoder_->num_leading_spaces_stripped();
  }

 private:
  JsonTokenizer() = default;
  Status parse(const nlohmann::json& root);
  Status read_config(std::string_view config_text);
  // Appends the ids of one plain-text segment.
  Status encode_segment(std::string_view text, bool first_segment, std::vector<int32_t>* ids) const;

  std::vector<AddedToken> added_tokens_;
  std::unique_ptr<AddedTokenMatcher> matcher_;
  StringMap<int32_t> added_ids_;                 // content -> id
  std::unique_ptr<Normalizer> normalizer_;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer_;  // may be null
  std::unique_ptr<BpeModel> model_;
  PostProcessor post_processor_;
  std::unique_ptr<TokenDecoder> decoder_;

  std::vector<std::string> tokens_;       // [vocab_size] id -> token string
  std::vector<std::string> token_bytes_;  // [vocab_size]
  std::vector<bool> is_special_;          // [vocab_size]
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
};

}  // namespace pvllm
