// The ggml type table. Block sizes and bytes follow ggml's block structs
// (ggml-common.h): QK_K is 256, the legacy quants' blocks 32 elements.
#include "core/model/ggml_types.h"

#include "core/base/check.h"

namespace pvllm::ggml {

namespace {

constexpr uint32_t kSuperBlock = 256;  // ggml's QK_K

// The table, in id order: name, elements per block, bytes per block, served.
const std::vector<TypeInfo>& ggml_type_table() {
  static const std::vector<TypeInfo> table = {
      {Type::kF32, "F32", 1, 4, true},
      {Type::kF16, "F16", 1, 2, true},
      {Type::kQ4_0, "Q4_0", 32, 18, true},   // f16 scale, 16 bytes of nibbles
      {Type::kQ4_1, "Q4_1", 32, 20, true},   // f16 scale and min, 16 bytes of nibbles
      {Type::kQ5_0, "Q5_0", 32, 22, true},   // f16 scale, 4 bytes of high bits, nibbles
      {Type::kQ5_1, "Q5_1", 32, 24, true},   // f16 scale and min, high bits, nibbles
      {Type::kQ8_0, "Q8_0", 32, 34, true},   // f16 scale, 32 int8
      {Type::kQ8_1, "Q8_1", 32, 36, false},  // f16 scale and sum, 32 int8
      {Type::kQ2_K, "Q2_K", kSuperBlock, 84, true},
      {Type::kQ3_K, "Q3_K", kSuperBlock, 110, true},
      {Type::kQ4_K, "Q4_K", kSuperBlock, 144, true},
      {Type::kQ5_K, "Q5_K", kSuperBlock, 176, true},
      {Type::kQ6_K, "Q6_K", kSuperBlock, 210, true},
      {Type::kQ8_K, "Q8_K", kSuperBlock, 292, false},  // f32 scale, 256 int8, 16 int16 sums
      {Type::kIQ2_XXS, "IQ2_XXS", kSuperBlock, 66, false},
      {Type::kIQ2_XS, "IQ2_XS", kSuperBlock, 74, false},
      {Type::kIQ3_XXS, "IQ3_XXS", kSuperBlock, 98, false},
      {Type::kIQ1_S, "IQ1_S", kSuperBlock, 50, false},
      {Type::kIQ4_NL, "IQ4_NL", 32, 18, true},
      {Type::kIQ3_S, "IQ3_S", kSuperBlock, 110, false},
      {Type::kIQ2_S, "IQ2_S", kSuperBlock, 82, false},
      {Type::kIQ4_XS, "IQ4_XS", kSuperBlock, 136, true},
      {Type::kI8, "I8", 1, 1, false},
      {Type::kI16, "I16", 1, 2, false},
      {Type::kI32, "I32", 1, 4, false},
      {Type::kI64, "I64", 1, 8, false},
      {Type::kF64, "F64", 1, 8, false},
      {Type::kIQ1_M, "IQ1_M", kSuperBlock, 56, false},
      {Type::kBF16, "BF16", 1, 2, true},
      {Type::kTQ1_0, "TQ1_0", kSuperBlock, 54, false},
      {Type::kTQ2_0, "TQ2_0", kSuperBlock, 66, false},
      {Type::kMXFP4, "MXFP4", 32, 17, false},  // e8m0 scale, 16 bytes of fp4
      {Type::kNVFP4, "NVFP4", 64, 36, false},  // 4 e4m3 scales, 32 bytes of fp4
      {Type::kQ1_0, "Q1_0", 128, 18, false},   // f16 scale, 16 bytes of bits
  };
  return table;
}

// Index by id into the table; -1 where ggml has no type.
const std::vector<int>& ggml_type_index() {
  static const std::vector<int> index = [] {
    const std::vector<TypeInfo>& table = ggml_type_table();
    std::vector<int> by_id(static_cast<uint32_t>(table.back().type) + 1, -1);
    for (size_t i = 0; i < table.size(); ++i) {
      by_id[static_cast<uint32_t>(table[i].type)] = static_cast<int>(i);
    }
    return by_id;
  }();
  return index;
}

Status ggml_size_overflow(const TypeInfo& info, const std::string& tensor) {
  return CorruptModel("tensor '" + tensor + "' of type " + info.name +
                      " has a byte size that does not fit in 64 bits");
}

}  // namespace

const TypeInfo* find_type(uint32_t id) {
  const std::vector<int>& index = ggml_type_index();
  if (id >= index.size() || index[id] < 0) return nullptr;
  return &ggml_type_table()[index[id]];
}

const TypeInfo& type_info(Type type) {
  const TypeInfo* info = find_type(static_cast<uint32_t>(type));
  PVLLM_CHECK(info != nullptr, "a ggml::Type value outside the table");
  return *info;
}

const char* type_name(Type type) { return type_info(type).name; }

bool is_served(Type type) { return type_info(type).served; }

const std::vector<TypeInfo>& all_types() { return ggml_type_table(); }

Status row_bytes(Type type, int64_t row_length, const std::string& tensor, uint64_t* out) {
  const TypeInfo& info = type_info(type);
  if (row_length < 1 || row_length % info.block_size != 0) {
    return CorruptModel("tensor '" + tensor + "' of type " + info.name + " has rows of " +
                        std::to_string(row_length) + " elements, not a positive multiple of the " +
                        std::to_string(info.block_size) + "-element block");
  }
  const uint64_t blocks = static_cast<uint64_t>(row_length) / info.block_size;
  if (__builtin_mul_overflow(blocks, uint64_t{info.block_bytes}, out)) {
    return ggml_size_overflow(info, tensor);
  }
  return Status::Ok();
}

Status tensor_bytes(Type type, const std::vector<int64_t>& dims, const std::string& tensor,
                    uint64_t* out) {
  const TypeInfo& info = type_info(type);
  if (dims.empty()) {
    return CorruptModel("tensor '" + tensor + "' of type " + info.name + " has no dimensions");
  }
  uint64_t bytes = 0;
  PVLLM_RETURN_IF_ERROR(row_bytes(type, dims[0], tensor, &bytes));
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] < 1) {
      return CorruptModel("tensor '" + tensor + "' has dimension " + std::to_string(i) + " = " +
                          std::to_string(dims[i]) + "; every dimension must be at least 1");
    }
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dims[i]), &bytes)) {
      return ggml_size_overflow(info, tensor);
    }
  }
  *out = bytes;
  return Status::Ok();
}

}  // namespace pvllm::ggml
