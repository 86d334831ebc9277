// A compiled PCRE2 pattern in UTF + Unicode-property mode (\s, \p{L}, \w
// follow Unicode), JIT-compiled when the platform allows. The pre-tokenizer
// patterns of tokenizer.json (GPT-2, Llama 3, Qwen, look-ahead included) run
// here.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"

namespace pvllm {

class Regex {
 public:
  // `literal`: the pattern is a plain string to find, not a regex.
  static Status compile(const std::string& pattern, bool literal, std::unique_ptr<Regex>* out);
  ~Regex();

  // The [begin, end) byte ranges of the successive non-overlapping matches
  // in `text`, which must be valid UTF-8. Empty matches are skipped. A
  // matcher failure (a PCRE2 resource limit) is a TokenizerError.
  Status find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;

 private:
  Regex() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pvllm
