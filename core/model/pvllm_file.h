// The .pvllm model file (docs/format.md): a 64-byte preamble, a FlatBuffers
// header (format/pvllm_model.fbs) and the tensors' bytes, each at a
// multiple of 4096. This header opens and checks a file and hands its
// header out as plain structs, so nothing outside core/model sees
// FlatBuffers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/mapped_file.h"
#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/model/model.h"
#include "core/model/model_config.h"

namespace pvllm::pvllm_format {

inline constexpr char kMagic[8] = {'P', 'V', 'L', 'L', 'M', '\r', '\n', '\x1a'};
inline constexpr uint32_t kMajorVersion = 1;
inline constexpr uint32_t kMinorVersion = 0;
inline constexpr uint64_t kAlignment = 4096;  // of every tensor's offset
inline constexpr uint64_t kPreambleBytes = 64;

// The first 64 bytes, little-endian.
struct Preamble {
  char magic[8];
  uint32_t major_version;
  uint32_t minor_version;
  uint64_t header_offset;    // 64
  uint64_t header_size;      // the FlatBuffer's bytes
  uint64_t data_offset;      // the first tensor's offset (a multiple of 4096)
  uint64_t file_size;        // the whole file's bytes
  uint64_t header_checksum;  // XXH3-64 of the FlatBuffer's bytes
  uint64_t reserved;         // 0
};
static_assert(sizeof(Preamble) == kPreambleBytes, "the preamble is 64 bytes");

// XXH3-64 with seed 0: the checksum of the header and of every tensor.
uint64_t checksum(const void* data, size_t size);

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  Layout layout = Layout::kRowMajor;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;
};

// A file's header, checked and read out.
struct FileHeader {
  uint32_t major_version = 0;
  uint32_t minor_version = 0;
  uint64_t header_size = 0;
  uint64_t data_offset = 0;
  uint64_t file_size = 0;
  ModelConfig config;
  ModelFormat source_format = ModelFormat::kHuggingFace;
  std::string source;
  std::string writer;
  EmbeddedTokenizer tokenizer;  // views of the mapping, or of `storage`
  std::vector<TensorEntry> tensors;
  // read_header's copy of the header's bytes, which the tokenizer's views
  // point into (null for open_file: they point into the mapping).
  std::shared_ptr<const std::vector<unsigned char>> storage;
};

// Maps `path` and checks, before reading any field: the preamble (magic,
// version, extents within the file), the header's checksum, the FlatBuffers
// verifier; then the config (64-bit range checks, ModelConfig::validate)
// and the tensor table (known dtype and layout, positive dimensions, a size
// that matches the shape, 4096-aligned offsets inside the data area, no
// overlaps, unique names). Tensor checksums are not checked here.
// Statuses: NOT_FOUND or IO_ERROR for the file, UNSUPPORTED for another
// major version, CORRUPT_MODEL for everything else, each naming the file
// and what is wrong.
Status open_file(const std::string& path, std::shared_ptr<MappedFile>* file, FileHeader* header);

// The same checks with only the preamble and header read (two reads, no
// mapping): what inspecting a file, its tokenizer or its chat templates
// needs. The tensor table is checked against the file's size.
Status read_header(const std::string& path, FileHeader* header);

}  // namespace pvllm::pvllm_format
