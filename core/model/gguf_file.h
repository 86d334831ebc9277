// The GGUF container (llama.cpp's model files), versions 2 and 3,
// little-endian:
//
//   "GGUF" | version u32 | tensor count u64 | metadata count u64
//   metadata: key (u64 length + bytes) | value type u32 | value
//   tensor infos: name | n_dims u32 | dims u64[n_dims] | ggml type u32 | offset u64
//   padding to `general.alignment` (32 when absent), then the data section;
//   each tensor's offset counts from the data section's start.
//
// This header opens and checks a file (or every part of a split model) and
// hands out plain structs. Every count and length is checked against the
// bytes left in the file before anything is allocated for it, so what a
// hostile file costs is bounded by its own size, never by what a length
// field claims: at worst about 15 times its size in memory (a file of
// nothing but tiny metadata entries). Nothing here decides whether
// a model can be served: tensors of types pvllm does not serve are read like
// any other (unserved_types lists them for the loader to refuse by name).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/mapped_file.h"
#include "core/base/status.h"
#include "core/model/ggml_types.h"

namespace pvllm::gguf {

inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;
inline constexpr char kAlignmentKey[] = "general.alignment";  // u32, a power of two
// The split keys every part of a split model holds (llama.cpp's gguf-split).
inline constexpr char kSplitNoKey[] = "split.no";                       // 0-based part index
inline constexpr char kSplitCountKey[] = "split.count";                 // number of parts
inline constexpr char kSplitTensorsCountKey[] = "split.tensors.count";  // tensors in all parts

// Metadata value types, pinned to GGUF's ids.
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u8", "i32", "f32", "bool", "string", "array", …
const char* value_type_name(ValueType type);

// An array value: elements of one type (arrays of arrays are refused).
struct Array {
  ValueType type = ValueType::kU8;  // of every element; never kArray
  uint64_t size = 0;                // number of elements
  // Number and bool elements: `size` little-endian values of `type`, in
  // place in the mapped file (valid while the File, or a copy of its part's
  // MappedFile, lives); null for strings and empty arrays.
  const unsigned char* data = nullptr;
  std::vector<std::string> strings;  // string elements
};

// One metadata value; only the member its type names is set.
struct Value {
  ValueType type = ValueType::kU8;
  uint64_t u = 0;      // kU8, kU16, kU32, kU64; kBool as 0 or 1
  int64_t i = 0;       // kI8, kI16, kI32, kI64
  double f = 0;        // kF32 (widened exactly), kF64
  std::string string;  // kString
  Array array;         // kArray
};

struct KeyValue {
  std::string key;
  Value value;
};

// One file's metadata, in file order, found by key. The getters' statuses
// name the file and the key: NOT_FOUND when the key is absent,
// CORRUPT_MODEL when its value has another type (saying which).
class Metadata {
 public:
  Metadata() = default;
  explicit Metadata(std::string path) : path_(std::move(path)) {}

  const std::vector<KeyValue>& entries() const { return entries_; }
  // The value of `key`, or null.
  const Value* find(const std::string& key) const;
  // Appends an entry; false, adding nothing, when its key is present.
  bool add(KeyValue entry);

  // Exactly the named type.
  Status get_u32(const std::string& key, uint32_t* out) const;
  Status get_i32(const std::string& key, int32_t* out) const;
  Status get_u64(const std::string& key, uint64_t* out) const;
  Status get_f32(const std::string& key, float* out) const;
  Status get_bool(const std::string& key, bool* out) const;
  Status get_string(const std::string& key, std::string* out) const;
  // Any integer type holding a value >= 0 (writers differ in the width
  // they give counts; a negative value is CORRUPT_MODEL).
  Status get_uint(const std::string& key, uint64_t* out) const;
  // An array of exactly `element` (the array stays in the Metadata).
  Status get_array(const std::string& key, ValueType element, const Array** out) const;
  Status get_string_array(const std::string& key, std::vector<std::string>* out) const;
  Status get_f32_array(const std::string& key, std::vector<float>* out) const;
  Status get_i32_array(const std::string& key, std::vector<int32_t>* out) const;
  // An array of any integer type, widened (u64 values past INT64_MAX are
  // CORRUPT_MODEL).
  Status get_int_array(const std::string& key, std::vector<int64_t>* out) const;

 private:
  Status find_typed(const std::string& key, ValueType type, const Value** out) const;
  Status wrong_type(const std::string& key, const Value& value, const std::string& wanted) const;

  std::string path_;
  std::vector<KeyValue> entries_;
  std::unordered_map<std::string, size_t> index_;
};

struct TensorInfo {
  std::string name;
  // ggml order: dims[0] is the row, the contiguous dimension (a [rows,
  // cols] matrix is {cols, rows}); 1 to 4 entries, each >= 1, their product
  // within int64.
  std::vector<int64_t> dims;
  ggml::Type type = ggml::Type::kF32;
  uint64_t offset = 0;       // as stored: from its part's data section, a multiple of the alignment
  uint32_t part = 0;         // index into File::parts
  uint64_t file_offset = 0;  // the tensor's first byte in its part's file
  uint64_t size = 0;         // bytes: ggml::tensor_bytes of type and dims

  int64_t num_elements() const;
};

// One GGUF file.
struct Part {
  std::string path;
  std::shared_ptr<MappedFile> file;
  uint32_t version = 0;                    // 2 or 3
  uint64_t alignment = kDefaultAlignment;  // general.alignment, or 32
  uint64_t data_offset = 0;                // the data section's first byte: a multiple of alignment
  uint64_t num_tensors = 0;                // tensor infos in this part
  Metadata metadata;
};

// A model: one GGUF file, or every part of a split one in order.
struct File {
  std::vector<Part> parts;
  // Every part's tensors, part by part in file order; names are unique.
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string, size_t> tensor_index;  // name -> index into tensors

  // The model's metadata: the first part's (gguf-split writes it there;
  // later parts hold only the split keys).
  const Metadata& metadata() const;
  const TensorInfo* find_tensor(const std::string& name) const;
  // The tensor's `size` bytes, in its part's mapping.
  const unsigned char* tensor_data(const TensorInfo& tensor) const;
};

// Opens `path`. A name <prefix>-NNNNN-of-MMMMM.gguf (llama.cpp's split
// naming, 5 digits each) opens all MMMMM parts, whichever of them `path`
// names; each must hold split.no (its 0-based index), split.count (MMMMM)
// and split.tensors.count (the same in every part, and the number of
// tensors in all of them). A file not named so must not have split.count
// above 1. Tensor names must be unique across parts.
// Statuses: NOT_FOUND or IO_ERROR for a file that cannot be mapped (a
// missing part is named, with its place in the split); UNSUPPORTED for
// GGUF version 1, versions past 3, big-endian files, arrays of arrays and
// ggml type ids this build does not know (named by number); CORRUPT_MODEL,
// naming the file and the field or tensor, for everything else: a wrong
// magic, a file truncated anywhere, counts or lengths larger than the bytes
// left, unknown value types, bool bytes other than 0 or 1, duplicate keys
// or tensor names, a general.alignment that is not a u32 power of two,
// n_dims outside 1..4, a dimension of 0 or past int64, an element count
// past int64, a row (dims[0]) that is not a multiple of its type's block, a
// byte size past 64 bits, an offset not a multiple of the alignment, a
// tensor reaching past the end of the file, two tensors overlapping, split
// keys missing or disagreeing. On failure `out` is unchanged.
Status open(const std::string& path, File* out);

// Parses one mapped GGUF file as part `part_index`: its Part, and its
// tensors appended to `tensors`. No split checks (open's). Statuses as open.
Status parse(std::shared_ptr<MappedFile> file, uint32_t part_index, Part* part,
             std::vector<TensorInfo>* tensors);

// Parses GGUF bytes held in memory that carry metadata and no tensors (the
// tokenizer a .pvllm file carries, gguf_writer.h), `name` naming them in
// statuses, which are parse's (a tensor info is CORRUPT_MODEL). Array
// elements point into `bytes`, which must outlive `out`.
Status parse_metadata(std::string_view bytes, const std::string& name, Metadata* out);

// llama.cpp's split file names: <prefix>-NNNNN-of-MMMMM.gguf, parts
// numbered from 1.
struct SplitName {
  std::string prefix;
  uint32_t part = 0;   // 1..count
  uint32_t count = 0;  // >= 1
};
// True when `path` is named so (with 1 <= part <= count).
bool parse_split_name(const std::string& path, SplitName* out);
std::string split_path(const std::string& prefix, uint32_t part, uint32_t count);

// The types in `file` that ggml defines but pvllm does not serve, in id
// order, each with how many tensors have it and the first one's name.
struct UnservedType {
  ggml::Type type = ggml::Type::kF32;
  uint64_t num_tensors = 0;
  std::string first_tensor;
};
std::vector<UnservedType> unserved_types(const File& file);

}  // namespace pvllm::gguf
