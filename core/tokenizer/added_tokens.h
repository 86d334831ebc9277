// The added tokens of tokenizer.json (special ones like <|begin_of_text|>
// and plain ones like Qwen's <think>): they are cut out of the raw text
// before normalizing, and each occurrence becomes its own id. Matching is
// leftmost-longest over all added tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/json_fields.h"

namespace pvllm {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;  // skipped when decoding
};

// Reads "added_tokens". Options that change matching (single_word, lstrip,
// rstrip; normalized when the file has a normalizer) are Unsupported.
Status parse_added_tokens(const nlohmann::json& root, std::vector<AddedToken>* out);

// A stretch of the input: an added token (id >= 0) or text to tokenize.
struct TextSegment {
  std::string_view text;
  int32_t added_id;  // -1 for plain text
  size_t offset;     // of text in the input, in bytes
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);
  // `text` as plain-text segments (non-empty) and added tokens, in order.
  std::vector<TextSegment> split(std::string_view text) const;

 private:
  struct Candidate {
    std::string content;
    int32_t id;
  };
  // [first byte] -> the tokens starting with it, longest first.
  std::vector<std::vector<Candidate>> by_first_byte_;
};

}  // namespace pvllm
