#include "core/base/file_bytes.h"

#include <fstream>
#include <iterator>

namespace pvllm {

Status read_file_bytes(const std::string& path, std::string* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return IoError("cannot open " + path);
  out->assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  if (file.bad()) return IoError("cannot read " + path);
  return Status::Ok();
}

}  // namespace pvllm
