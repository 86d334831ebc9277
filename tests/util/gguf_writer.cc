// GGUF bytes for tests, written field by field as the specs stand.
#include "tests/util/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace pvllm::testing {

namespace {

using gguf::ValueType;

template <typename T>
std::vector<unsigned char> gguf_le_bytes(T v) {
  std::vector<unsigned char> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));  // the tests run on little-endian hosts
  return out;
}

uint64_t gguf_align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

void gguf_put_u32(std::vector<unsigned char>* out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out->push_back(static_cast<unsigned char>(v >> (8 * b)));
}

void gguf_put_u64(std::vector<unsigned char>* out, uint64_t v) {
  for (int b = 0; b < 8; ++b) out->push_back(static_cast<unsigned char>(v >> (8 * b)));
}

void gguf_put_string(std::vector<unsigned char>* out, const std::string& s) {
  gguf_put_u64(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

void GgufWriter::add(const std::string& key, ValueType type, std::vector<unsigned char> value) {
  add_raw(key, static_cast<uint32_t>(type), std::move(value));
}

void GgufWriter::add_raw(const std::string& key, uint32_t type, std::vector<unsigned char> value) {
  GgufKv kv;
  kv.key = key;
  kv.type = type;
  kv.value = std::move(value);
  kvs.push_back(std::move(kv));
}

void GgufWriter::add_u8(const std::string& key, uint8_t v) {
  add(key, ValueType::kU8, gguf_le_bytes(v));
}
void GgufWriter::add_i8(const std::string& key, int8_t v) {
  add(key, ValueType::kI8, gguf_le_bytes(v));
}
void GgufWriter::add_u16(const std::string& key, uint16_t v) {
  add(key, ValueType::kU16, gguf_le_bytes(v));
}
void GgufWriter::add_i16(const std::string& key, int16_t v) {
  add(key, ValueType::kI16, gguf_le_bytes(v));
}
void GgufWriter::add_u32(const std::string& key, uint32_t v) {
  add(key, ValueType::kU32, gguf_le_bytes(v));
}
void GgufWriter::add_i32(const std::string& key, int32_t v) {
  add(key, ValueType::kI32, gguf_le_bytes(v));
}
void GgufWriter::add_f32(const std::string& key, float v) {
  add(key, ValueType::kF32, gguf_le_bytes(v));
}
void GgufWriter::add_bool(const std::string& key, bool v) {
  add(key, ValueType::kBool, {static_cast<unsigned char>(v ? 1 : 0)});
}
void GgufWriter::add_string(const std::string& key, const std::string& v) {
  std::vector<unsigned char> value;
  gguf_put_string(&value, v);
  add(key, ValueType::kString, std::move(value));
}
void GgufWriter::add_u64(const std::string& key, uint64_t v) {
  add(key, ValueType::kU64, gguf_le_bytes(v));
}
void GgufWriter::add_i64(const std::string& key, int64_t v) {
  add(key, ValueType::kI64, gguf_le_bytes(v));
}
void GgufWriter::add_f64(const std::string& key, double v) {
  add(key, ValueType::kF64, gguf_le_bytes(v));
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  std::vector<unsigned char> elements;
  for (const std::string& s : values) gguf_put_string(&elements, s);
  add_raw_array(key, static_cast<uint32_t>(ValueType::kString), values.size(), elements);
}

void GgufWriter::add_raw_array(const std::string& key, uint32_t element_type, uint64_t count,
                               const std::vector<unsigned char>& elements) {
  std::vector<unsigned char> value;
  gguf_put_u32(&value, element_type);
  gguf_put_u64(&value, count);
  value.insert(value.end(), elements.begin(), elements.end());
  add(key, ValueType::kArray, std::move(value));
}

void GgufWriter::set_alignment(uint32_t a) {
  alignment = a;
  add_u32(gguf::kAlignmentKey, a);
}

GgufTensorSpec& GgufWriter::add_tensor(const std::string& name, const std::vector<uint64_t>& dims,
                                       ggml::Type type) {
  GgufTensorSpec spec;
  spec.name = name;
  spec.dims = dims;
  spec.type = static_cast<uint32_t>(type);
  const ggml::TypeInfo& info = ggml::type_info(type);
  uint64_t elements = 1;
  for (uint64_t d : dims) elements *= d;
  const uint64_t size = elements / info.block_size * info.block_bytes;
  spec.data.resize(size);
  for (uint64_t i = 0; i < size; ++i) {
    spec.data[i] = static_cast<unsigned char>(i * 7 + tensors.size() * 31 + 1);
  }
  tensors.push_back(std::move(spec));
  return tensors.back();
}

std::vector<unsigned char> GgufWriter::bytes(uint64_t* data_offset) const {
  // Where each tensor's data lands, from the data section's start.
  std::vector<uint64_t> placed;
  uint64_t end = 0;
  for (const GgufTensorSpec& t : tensors) {
    placed.push_back(gguf_align_up(end, alignment));
    end = placed.back() + t.data.size();
  }

  std::vector<unsigned char> out(magic.begin(), magic.end());
  gguf_put_u32(&out, version);
  gguf_put_u64(&out, tensor_count.value_or(tensors.size()));
  gguf_put_u64(&out, kv_count.value_or(kvs.size()));
  for (const GgufKv& kv : kvs) {
    gguf_put_u64(&out, kv.key_length.value_or(kv.key.size()));
    out.insert(out.end(), kv.key.begin(), kv.key.end());
    gguf_put_u32(&out, kv.type);
    out.insert(out.end(), kv.value.begin(), kv.value.end());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorSpec& t = tensors[i];
    gguf_put_u64(&out, t.name_length.value_or(t.name.size()));
    out.insert(out.end(), t.name.begin(), t.name.end());
    gguf_put_u32(&out, t.n_dims.value_or(static_cast<uint32_t>(t.dims.size())));
    for (uint64_t d : t.dims) gguf_put_u64(&out, d);
    gguf_put_u32(&out, t.type);
    gguf_put_u64(&out, t.offset.value_or(placed[i]));
  }
  const uint64_t data_start = gguf_align_up(out.size(), alignment);
  if (data_offset != nullptr) *data_offset = data_start;
  out.resize(data_start, 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.resize(data_start + placed[i], 0);
    out.insert(out.end(), tensors[i].data.begin(), tensors[i].data.end());
  }
  return out;
}

std::string GgufWriter::write(const std::string& path) const { return write_bytes(path, bytes()); }

std::string write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
  return path;
}

}  // namespace pvllm::testing
