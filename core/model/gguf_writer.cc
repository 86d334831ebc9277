// GGUF metadata written back out (gguf_writer.h), little-endian, each value
// in the type it was read with: numbers narrowed back exactly from the
// widened members of gguf::Value, number arrays copied as they lie.
#include "core/model/gguf_writer.h"

#include <cstdint>
#include <cstring>

#include "core/model/gguf_bytes.h"

namespace pvllm::gguf {

namespace {

template <typename T>
void put(std::string* out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // pvllm builds for little-endian hosts only
  out->append(reinterpret_cast<const char*>(b), sizeof(T));
}

void put_string(std::string* out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out->append(s);
}

void put_value(std::string* out, const Value& v) {
  switch (v.type) {
    case ValueType::kU8:
    case ValueType::kBool:
      return put(out, static_cast<uint8_t>(v.u));
    case ValueType::kI8:
      return put(out, static_cast<int8_t>(v.i));
    case ValueType::kU16:
      return put(out, static_cast<uint16_t>(v.u));
    case ValueType::kI16:
      return put(out, static_cast<int16_t>(v.i));
    case ValueType::kU32:
      return put(out, static_cast<uint32_t>(v.u));
    case ValueType::kI32:
      return put(out, static_cast<int32_t>(v.i));
    case ValueType::kF32:
      return put(out, static_cast<float>(v.f));  // widened exactly when read
    case ValueType::kU64:
      return put(out, v.u);
    case ValueType::kI64:
      return put(out, v.i);
    case ValueType::kF64:
      return put(out, v.f);
    case ValueType::kString:
      return put_string(out, v.string);
    case ValueType::kArray: {
      const Array& a = v.array;
      put(out, static_cast<uint32_t>(a.type));
      put<uint64_t>(out, a.size);
      if (a.type == ValueType::kString) {
        for (const std::string& s : a.strings) put_string(out, s);
      } else if (a.size > 0) {
        out->append(reinterpret_cast<const char*>(a.data), a.size * bytes::gguf_fixed_size(a.type));
      }
      return;
    }
  }
}

}  // namespace

std::string write_metadata(const Metadata& metadata,
                           const std::function<bool(const std::string& key)>& keep) {
  std::string body;
  uint64_t count = 0;
  for (const KeyValue& kv : metadata.entries()) {
    if (!keep(kv.key)) continue;
    put_string(&body, kv.key);
    put(&body, static_cast<uint32_t>(kv.value.type));
    put_value(&body, kv.value);
    ++count;
  }
  std::string out = "GGUF";
  put<uint32_t>(&out, 3);      // version
  put<uint64_t>(&out, 0);      // tensors
  put<uint64_t>(&out, count);  // metadata entries
  return out + body;
}

bool is_tokenizer_key(const std::string& key) {
  return key.rfind("tokenizer.", 0) == 0 || key == "general.name";
}

}  // namespace pvllm::gguf
