// Where the shared reference material (real checkpoints, golden outputs)
// lives: $PVLLM_SHARED_DIR, a folder with models/ and golden/. Tests that
// need it skip with a reason when it is absent.
#pragma once

#include <string>

namespace pvllm::testing {

// $PVLLM_SHARED_DIR, or "" when unset or not a folder.
std::string shared_dir();
// shared_dir() + "/" + relative, or "" when that file or folder is missing.
std::string shared_path(const std::string& relative);

}  // namespace pvllm::testing

// Declares `var` as the path of `relative` under the shared folder, or
// skips the test with the reason.
#define PVLLM_SHARED_OR_SKIP(var, relative)                                         \
  const std::string var = ::pvllm::testing::shared_path(relative);                  \
  if (var.empty()) {                                                                \
    GTEST_SKIP() << "needs " << (relative)                                          \
                 << " under $PVLLM_SHARED_DIR (unset or missing; .ci/run sets it)"; \
  }
