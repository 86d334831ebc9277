// Which shared object the running test loaded: the symbol tests inspect the
// libpvllm.so actually in use (a build tree's or a bundle's copy), never a
// path fixed at build time.
#pragma once

#include <string>

namespace pvllm::testing {

// The path of the shared object (or executable) that holds `function`, as
// the dynamic loader opened it; "" when dladdr cannot tell.
std::string library_holding(const void* function);

}  // namespace pvllm::testing
