// tokenizer.json pre-tokenizers: cut a normalized segment into the words
// that BPE merges within. Implemented: Split (String or Regex pattern;
// Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous),
// ByteLevel (with or without the GPT-2 pattern), Metaspace (prepend_scheme
// always/first/never, split), Digits, Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tokenizer/json_fields.h"

namespace pvllm {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Rewrites *pieces (valid UTF-8, in text order) into finer or transformed
  // pieces. `first_segment`: pieces->front() starts the whole input text
  // (Metaspace's "first" prepend scheme).
  virtual Status apply(std::vector<std::string>* pieces, bool first_segment) const = 0;
};

// Builds the pre-tokenizer `config` describes (at `path` in the file); a
// null config gives a null *out (the segment is one word).
Status parse_pre_tokenizer(const nlohmann::json& config, const std::string& path,
                           std::unique_ptr<PreTokenizer>* out);

}  // namespace pvllm
