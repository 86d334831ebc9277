#include "core/base/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pvllm {

void log_warning(const std::string& message) {
  static const bool off = [] {
    const char* v = std::getenv("PVLLM_LOG");
    return v != nullptr && std::strcmp(v, "off") == 0;
  }();
  if (off) return;
  // One fprintf call: lines from several threads do not interleave.
  std::fprintf(stderr, "pvllm: warning: %s\n", message.c_str());
}

}  // namespace pvllm
