// A read-only memory map of a whole file; weights point into it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/base/status.h"

namespace pvllm {

class MappedFile {
 public:
  // Maps `path` read-only. Empty files map to size 0 with a null data().
  static Status open(const std::string& path, std::shared_ptr<MappedFile>* out);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace pvllm
