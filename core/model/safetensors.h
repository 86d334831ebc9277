// Reader for the safetensors format: an 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets}}, then the raw bytes.
// Tensors are views into the mapped file, never copies.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/base/mapped_file.h"
#include "core/base/status.h"
#include "core/base/tensor.h"

namespace pvllm {

struct SafetensorsFile {
  std::shared_ptr<MappedFile> file;
  // By tensor name; each Tensor's data points into `file`.
  std::map<std::string, Tensor> tensors;
};

// Maps `path` and parses its header. Every tensor's byte range is checked to
// lie inside the file and to match its dtype and shape. Dtypes other than
// F32/F16/BF16 give Unsupported naming the tensor; a malformed or
// truncated file gives CorruptModel naming the file (and tensor, if one).
Status open_safetensors(const std::string& path, SafetensorsFile* out);

}  // namespace pvllm
