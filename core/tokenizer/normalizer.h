// tokenizer.json normalizers: rewrite each text segment (the text between
// added tokens) before pre-tokenizing. Implemented: NFC, NFD, NFKC, NFKD
// (libutf8proc), Prepend, Replace with a String pattern, Sequence.
#pragma once

#include <memory>
#include <string>

#include "core/tokenizer/json_fields.h"

namespace pvllm {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites *text (valid UTF-8) in place.
  virtual Status apply(std::string* text) const = 0;
};

// Builds the normalizer `config` describes (at `path` in the file); a null
// config gives a null *out (no normalizer).
Status parse_normalizer(const nlohmann::json& config, const std::string& path,
                        std::unique_ptr<Normalizer>* out);

}  // namespace pvllm
