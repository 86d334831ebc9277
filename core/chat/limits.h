// What one rendering may build: a chat prompt is kilobytes, so a template
// that outgrows these is a runaway (a string doubled in a loop, loops nested
// over range()), refused with INVALID_ARGUMENT before it can exhaust the
// host's memory or hang the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/chat/error.h"

namespace pvllm::chat {

constexpr size_t kMaxStringBytes = size_t{16} << 20;  // any string, the output included
constexpr size_t kMaxListItems = size_t{1} << 20;     // any list a template builds
constexpr int64_t kMaxRenderSteps = 5'000'000;        // statements, expressions, iterations

inline void check_string_size(size_t bytes) {
  if (bytes > kMaxStringBytes) {
    invalid("the template builds a string of more than " + std::to_string(kMaxStringBytes >> 20) +
            " MiB");
  }
}

inline void check_list_size(size_t items) {
  if (items > kMaxListItems) {
    invalid("the template builds a list of more than " + std::to_string(kMaxListItems) + " items");
  }
}

}  // namespace pvllm::chat
