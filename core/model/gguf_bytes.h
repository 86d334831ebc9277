// What the GGUF reader's files share (gguf_file.cc, gguf_metadata.cc,
// gguf_split.cc): the byte sizes and kinds of value types, little-endian
// loads, array elements, and names quoted safely in messages. Private to
// core/model.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/model/gguf_file.h"

namespace pvllm::gguf::bytes {

// Names in messages: hostile files hold long keys of any bytes.
constexpr size_t kMaxQuotedBytes = 96;

// The bytes of one value of a fixed-size type; 0 for strings and arrays.
inline uint64_t gguf_fixed_size(ValueType type) {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

inline bool gguf_is_integer(ValueType type) {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

inline bool gguf_is_signed(ValueType type) {
  return type == ValueType::kI8 || type == ValueType::kI16 || type == ValueType::kI32 ||
         type == ValueType::kI64;
}

// `s` cut to kMaxQuotedBytes, bytes outside printable ASCII as '?'.
inline std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxQuotedBytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > kMaxQuotedBytes) out += "...";
  return out;
}

inline std::string quoted(const std::string& s) { return "'" + printable(s) + "'"; }

inline std::string describe_type(const Value& value) {
  if (value.type != ValueType::kArray) return value_type_name(value.type);
  return std::string("array of ") + value_type_name(value.array.type);
}

// A little-endian value of T from p, whatever the host's byte order.
template <typename T>
inline T load_le(const unsigned char* p) {
  using Bits = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  Bits bits = 0;
  for (size_t b = 0; b < sizeof(T); ++b) bits = static_cast<Bits>(bits | Bits{p[b]} << (8 * b));
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// Element i of a number or bool array, its bits zero-extended.
inline uint64_t element_bits(const Array& array, uint64_t i) {
  const unsigned char* p = array.data + i * gguf_fixed_size(array.type);
  switch (gguf_fixed_size(array.type)) {
    case 1:
      return p[0];
    case 2:
      return load_le<uint16_t>(p);
    case 4:
      return load_le<uint32_t>(p);
    default:
      return load_le<uint64_t>(p);
  }
}

// Element i of an integer array, sign-extended where the type is signed.
inline int64_t element_int(const Array& array, uint64_t i) {
  const uint64_t bits = element_bits(array, i);
  switch (array.type) {
    case ValueType::kI8:
      return static_cast<int8_t>(bits);
    case ValueType::kI16:
      return static_cast<int16_t>(bits);
    case ValueType::kI32:
      return static_cast<int32_t>(bits);
    default:
      return static_cast<int64_t>(bits);
  }
}

}  // namespace pvllm::gguf::bytes
