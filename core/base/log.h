// Warnings for conditions the library recovers from on its own (a CUDA graph
// that could not be captured, ...), so that an embedder can see why
// something runs slower than it should. One line on stderr each,
// "pvllm: warning: <message>"; PVLLM_LOG=off silences them.
#pragma once

#include <string>

namespace pvllm {

void log_warning(const std::string& message);

}  // namespace pvllm
