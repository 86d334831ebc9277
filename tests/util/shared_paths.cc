// Locates the shared reference material named by $PVLLM_SHARED_DIR.
#include "tests/util/shared_paths.h"

#include <cstdlib>
#include <filesystem>

namespace pvllm::testing {

std::string shared_dir() {
  const char* dir = std::getenv("PVLLM_SHARED_DIR");
  if (dir == nullptr || *dir == '\0') return "";
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) ? std::string(dir) : std::string();
}

std::string shared_path(const std::string& relative) {
  const std::string dir = shared_dir();
  if (dir.empty()) return "";
  const std::string path = dir + "/" + relative;
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? path : std::string();
}

}  // namespace pvllm::testing
