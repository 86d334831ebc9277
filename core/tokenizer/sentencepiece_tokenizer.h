// The sentencepiece tokenizer (tokenizer.model) behind the Tokenizer
// interface.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
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

  // add_special prepends BOS. The texts of control and unknown pieces
  // written in the text ("<s>", "</s>", "<unk>") are those tokens, as
  // Hugging Face's Llama tokenizers read them: a chat template's "<s>" is
  // BOS. The text between them is encoded as sentencepiece does, each run
  // with its own dummy-prefix space (Hugging Face's legacy behaviour).
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
  const char* kind() const override { return "sentencepiece"; }

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  Status encode_plain(std::string_view text, std::vector<int32_t>* ids) const;

  std::vector<std::string> token_bytes_;  // [vocab_size]
  // The control and unknown pieces by text, longest first.
  std::vector<std::pair<std::string, int32_t>> special_pieces_;
};

}  // namespace pvllm
