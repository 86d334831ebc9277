#include "fuzz/temp_files.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace pvllm::fuzz {

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pvllm_fuzz_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      perror("pvllm fuzz: mkdtemp");
      abort();
    }
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

const std::string& temp_dir() {
  static TempDir dir;
  return dir.path;
}

std::string write_temp_file(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = temp_dir() + "/" + name;
  FILE* f = fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror("pvllm fuzz: writing the input");
    abort();
  }
  return path;
}

}  // namespace pvllm::fuzz
