// tokenizer.json decoders, reduced to what streaming needs: the bytes each
// model token contributes on its own, plus the number of leading spaces
// removed from the start of the decoded text. decode(ids) is then the
// concatenation of the tokens' bytes with those spaces stripped, which an
// incremental detokenizer reproduces token by token.
//
// Implemented: ByteLevel, Metaspace (its first-token space), ByteFallback,
// Replace with a String pattern, Fuse, Strip of leading spaces, Sequence.
// Orders whose result depends on token boundaries (ByteFallback or a
// multi-character Replace after Fuse, Strip before Fuse, Strip of anything
// but leading spaces) are Unsupported.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tokenizer/json_fields.h"

namespace pvllm {

class TokenDecoder {
 public:
  static Status parse(const nlohmann::json& config, std::unique_ptr<TokenDecoder>* out);

  // The bytes model token `token` contributes (not necessarily valid UTF-8:
  // a byte token or a byte-level piece of a character).
  std::string token_bytes(const std::string& token) const;
  // Leading spaces decode() strips from the start of the text.
  int num_leading_spaces_stripped() const { return num_leading_spaces_stripped_; }

 private:
  struct Step {
    enum class Kind { kReplace, kByteLevel, kByteFallback } kind;
    std::string from, to;  // kReplace
  };
  Status parse_step(const nlohmann::json& config, const std::string& path);

  std::vector<Step> steps_;
  bool fused_ = false;
  bool after_strip_ = false;  // a Strip has been read: nothing may follow
  int num_leading_spaces_stripped_ = 0;
};

}  // namespace pvllm
