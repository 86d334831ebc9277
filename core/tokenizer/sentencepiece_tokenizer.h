// The sentencepiece tokenizer (tokenizer.model) behind the Tokenizer
// interface.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pvllm {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Loads a sentencepiece model file (tokenizer.model).
  static Status load_file(const std::string& path, std::unique_ptr<Tokenizer>* out);
  // Loads from the serialized model proto (bytes of a tokenizer.model).
  static Status load_from_bytes(std::string_view bytes, std::unique_ptr<Tokenizer>* out);
  ~SentencePieceTokenizer() override;

  // add_special prepends BOS.
  Status encode(std::string_view text, bool add_special, std::vector<int32_t>* ids) const override;
  // As sentencepiece decodes: control tokens dropped, the first piece's
  // leading space stripped.
  Status decode(const std::vector<int32_t>& ids, std::string* text) const override;

  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  int32_t bos_id() const override;
  int32_t eos_id() const override;
  int32_t token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  const std::string& token_bytes(int32_t id) const override;
  int num_leading_spaces_stripped() const override { return 1; }

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> token_bytes_;  // [vocab_size]
};

}  // namespace pvllm
