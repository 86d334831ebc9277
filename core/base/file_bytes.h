// Reading a whole (small) file into memory: config, tokenizer and template
// files. Weights are mapped instead (mapped_file.h).
#pragma once

#include <string>

#include "core/base/status.h"

namespace pvllm {

// The file's bytes. IO_ERROR naming the path when it cannot be opened or
// read (NOT_FOUND is left to callers that check existence first).
Status read_file_bytes(const std::string& path, std::string* out);

}  // namespace pvllm
