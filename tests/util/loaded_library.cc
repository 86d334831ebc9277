// dladdr over a function address.
#include "tests/util/loaded_library.h"

#include <dlfcn.h>

namespace pvllm::testing {

std::string library_holding(const void* function) {
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

}  // namespace pvllm::testing
