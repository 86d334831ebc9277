// The non-throwing half of pvllm.hpp, driven from a file built with
// -fno-exceptions (cpp_header_noexcept.cc); cpp_header_test.cc compares
// what it generates with the throwing wrappers.
#pragma once

#include <pvllm/pvllm.h>

#include <cstddef>
#include <cstdint>

struct NoexceptRun {
  pvllm_status status = PVLLM_STATUS_OK;  // of the first call that failed
  char message[256] = "";                 // its message
  int32_t tokens[64] = {};                // [num_tokens] generated, sample 0
  size_t num_tokens = 0;
};

// Greedy tokens (at most 64) for a text prompt, through EnginePtr, ErrorPtr,
// out_ptr, defaults and OutputBatch only.
NoexceptRun greedy_without_exceptions(const char* model_path, const char* prompt,
                                      int32_t max_tokens) noexcept;
