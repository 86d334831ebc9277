// tokenizer.json post-processors, for one sequence: the special ids placed
// before and after the encoded text when special tokens are wanted.
// Implemented: TemplateProcessing, ByteLevel (adds nothing),
// RobertaProcessing and BertProcessing (cls ... sep), Sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tokenizer/json_fields.h"

namespace pvllm {

struct PostProcessor {
  std::vector<int32_t> prefix;  // e.g. BOS
  std::vector<int32_t> suffix;  // e.g. EOS or SEP
};

// Reads `config` (at `path`); null adds nothing.
Status parse_post_processor(const nlohmann::json& config, const std::string& path,
                            PostProcessor* out);

}  // namespace pvllm
