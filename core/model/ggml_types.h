// The ggml tensor types, by the id GGUF files store for them (ggml's
// `enum ggml_type`; ids 4, 5, 31-33 and 36-38 were removed from ggml and
// are unknown here). Each type stores its elements in blocks: `block_size`
// elements in `block_bytes` bytes (1 and the element's size for the plain
// types), and a row of a tensor is a whole number of blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pvllm::ggml {

// Pinned to ggml's ids: they are what a GGUF tensor info holds.
enum class Type : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
};

struct TypeInfo {
  Type type;
  const char* name;      // ggml's spelling in capitals: "Q4_K", "BF16"
  uint32_t block_size;   // elements per block
  uint32_t block_bytes;  // bytes per block
  bool served;           // pvllm loads tensors of this type (the types the GGUF loader is to serve)
};

// The type with id `id`, or null when ggml defines none (or removed it).
const TypeInfo* find_type(uint32_t id);
// The entry of a known type.
const TypeInfo& type_info(Type type);
const char* type_name(Type type);
bool is_served(Type type);
// Every known type, in id order.
const std::vector<TypeInfo>& all_types();

// The bytes of one row of `row_length` elements of `type`: row_length must
// be at least 1 and a multiple of the type's block size. Statuses:
// CORRUPT_MODEL naming `tensor`, the type and the length otherwise, or when
// the size does not fit in 64 bits.
Status row_bytes(Type type, int64_t row_length, const std::string& tensor, uint64_t* out);

// The bytes of a whole tensor of `dims` (ggml order: dims[0] is the row,
// each at least 1): row_bytes of dims[0] times the other dims, every
// product checked for 64-bit overflow. Statuses as row_bytes.
Status tensor_bytes(Type type, const std::vector<int64_t>& dims, const std::string& tensor,
                    uint64_t* out);

}  // namespace pvllm::ggml
