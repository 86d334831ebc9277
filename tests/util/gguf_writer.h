// A writer of GGUF bytes for tests (the layout core/model/gguf_file.h
// reads): header, typed metadata, tensor infos, padding and data. Every
// field the reader checks can be damaged: the counts, key and name lengths,
// value and element types, n_dims, dims, ggml type ids and offsets are
// public and written as they stand; cutting or patching bytes() does the
// rest.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/ggml_types.h"
#include "core/model/gguf_file.h"

namespace pvllm::testing {

// Little-endian encoders, for values written raw.
void gguf_put_u32(std::vector<unsigned char>* out, uint32_t v);
void gguf_put_u64(std::vector<unsigned char>* out, uint64_t v);
// A GGUF string: u64 length, then the bytes.
void gguf_put_string(std::vector<unsigned char>* out, const std::string& s);

// One metadata entry as written: key length, key, type id, value bytes.
struct GgufKv {
  std::string key;
  std::optional<uint64_t> key_length;  // written instead of key.size()
  uint32_t type = 0;                   // the value type id
  std::vector<unsigned char> value;    // the encoded value (after the type id)
};

// One tensor as written: its info, and its bytes at the next aligned place.
struct GgufTensorSpec {
  std::string name;
  std::optional<uint64_t> name_length;  // written instead of name.size()
  std::optional<uint32_t> n_dims;       // written instead of dims.size()
  std::vector<uint64_t> dims;           // ggml order: dims[0] is the row
  uint32_t type = 0;                    // the ggml type id
  std::optional<uint64_t> offset;       // written instead of where data lands
  std::vector<unsigned char> data;
};

class GgufWriter {
 public:
  uint32_t version = 3;
  std::array<unsigned char, 4> magic = {'G', 'G', 'U', 'F'};
  std::optional<uint64_t> tensor_count;  // written instead of tensors.size()
  std::optional<uint64_t> kv_count;      // written instead of kvs.size()
  // Of the padding before the data section and between tensors (the key is
  // written only by set_alignment, or by hand).
  uint64_t alignment = gguf::kDefaultAlignment;
  std::vector<GgufKv> kvs;
  std::vector<GgufTensorSpec> tensors;

  void add_u8(const std::string& key, uint8_t v);
  void add_i8(const std::string& key, int8_t v);
  void add_u16(const std::string& key, uint16_t v);
  void add_i16(const std::string& key, int16_t v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_u64(const std::string& key, uint64_t v);
  void add_i64(const std::string& key, int64_t v);
  void add_f64(const std::string& key, double v);
  // An array of numbers or bools: each of `values` as `element` (its
  // size in bytes must be sizeof(T)).
  template <typename T>
  void add_array(const std::string& key, gguf::ValueType element, const std::vector<T>& values) {
    std::vector<unsigned char> bytes;
    for (const T& v : values) {
      const unsigned char* p = reinterpret_cast<const unsigned char*>(&v);
      bytes.insert(bytes.end(), p, p + sizeof(T));  // the tests run on little-endian hosts
    }
    add_raw_array(key, static_cast<uint32_t>(element), values.size(), bytes);
  }
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  // An array entry with any element type id, count and element bytes.
  void add_raw_array(const std::string& key, uint32_t element_type, uint64_t count,
                     const std::vector<unsigned char>& elements);
  // An entry with any type id and value bytes.
  void add_raw(const std::string& key, uint32_t type, std::vector<unsigned char> value);
  // Pads to `a` and writes general.alignment as a u32.
  void set_alignment(uint32_t a);

  // A tensor of `type` and `dims` holding the bytes they need (a pattern
  // that differs per tensor); returns it to damage.
  GgufTensorSpec& add_tensor(const std::string& name, const std::vector<uint64_t>& dims,
                             ggml::Type type);

  // The file's bytes; data_offset (if given) gets where the data section starts.
  std::vector<unsigned char> bytes(uint64_t* data_offset = nullptr) const;
  // Writes bytes() to `path` and returns it.
  std::string write(const std::string& path) const;

 private:
  void add(const std::string& key, gguf::ValueType type, std::vector<unsigned char> value);
};

// Writes `bytes` to `path` and returns it.
std::string write_bytes(const std::string& path, const std::vector<unsigned char>& bytes);

}  // namespace pvllm::testing
