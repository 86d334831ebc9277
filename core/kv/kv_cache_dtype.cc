#include "core/kv/kv_cache_dtype.h"

#include <algorithm>
#include <cctype>

namespace pvllm {

namespace {

struct Name {
  const char* name;
  KvCacheDtype dtype;
};

constexpr Name kNames[] = {
    {"auto", KvCacheDtype::kAuto},   {"f32", KvCacheDtype::kF32},
    {"fp32", KvCacheDtype::kF32},    {"f16", KvCacheDtype::kF16},
    {"fp16", KvCacheDtype::kF16},    {"bf16", KvCacheDtype::kBF16},
    {"int8", KvCacheDtype::kInt8},   {"fp8_e4m3", KvCacheDtype::kFp8E4M3},
    {"fp8", KvCacheDtype::kFp8E4M3},
};

bool equal_ignoring_case(std::string_view a, const char* b) {
  const std::string_view bv(b);
  return a.size() == bv.size() && std::equal(a.begin(), a.end(), bv.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == y;
         });
}

}  // namespace

const char* kv_cache_dtype_name(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto:
      return "auto";
    case KvCacheDtype::kF16:
      return "f16";
    case KvCacheDtype::kBF16:
      return "bf16";
    case KvCacheDtype::kInt8:
      return "int8";
    case KvCacheDtype::kFp8E4M3:
      return "fp8_e4m3";
    case KvCacheDtype::kF32:
      return "f32";
  }
  return "?";
}

const char* kv_cache_dtype_names() { return "auto, f32, f16, bf16, int8, fp8_e4m3"; }

Status parse_kv_cache_dtype(std::string_view name, KvCacheDtype* out) {
  for (const Name& n : kNames) {
    if (equal_ignoring_case(name, n.name)) {
      *out = n.dtype;
      return Status::Ok();
    }
  }
  return InvalidArgument("kv cache dtype \"" + std::string(name) + "\" is not one of " +
                         kv_cache_dtype_names());
}

Status check_kv_cache_dtype(int32_t value) {
  if (value < 0 || value > static_cast<int32_t>(KvCacheDtype::kF32)) {
    return InvalidArgument(
        "kv_cache_dtype must be 0 (auto), 1 (f16), 2 (bf16), 3 (int8), 4 (fp8_e4m3) or 5 (f32), "
        "got " +
        std::to_string(value));
  }
  return Status::Ok();
}

bool kv_cache_dtype_is_8bit(KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kInt8 || dtype == KvCacheDtype::kFp8E4M3;
}

Status host_kv_cache_dtype(KvCacheDtype requested, KvCacheDtype* out) {
  PVLLM_RETURN_IF_ERROR(check_kv_cache_dtype(static_cast<int32_t>(requested)));
  if (requested == KvCacheDtype::kFp8E4M3) {
    return Unsupported(
        "kv_cache_dtype fp8_e4m3 runs on CUDA only; the cpu backend stores auto (f32), f32, f16, "
        "bf16 or int8");
  }
  *out = requested == KvCacheDtype::kAuto ? KvCacheDtype::kF32 : requested;
  return Status::Ok();
}

Status cuda_kv_cache_dtype(KvCacheDtype requested, DType activation, KvCacheDtype* out) {
  PVLLM_RETURN_IF_ERROR(check_kv_cache_dtype(static_cast<int32_t>(requested)));
  KvCacheDtype own = KvCacheDtype::kAuto;
  switch (activation) {
    case DType::kBF16:
      own = KvCacheDtype::kBF16;
      break;
    case DType::kF16:
      own = KvCacheDtype::kF16;
      break;
    case DType::kF32:
      own = KvCacheDtype::kF32;
      break;
    default:
      return InvalidArgument(std::string("the CUDA backend runs in bf16, f16 or f32, not ") +
                             dtype_name(activation));
  }
  if (requested == KvCacheDtype::kAuto) {
    *out = own;
    return Status::Ok();
  }
  if (kv_cache_dtype_is_8bit(requested) || requested == own) {
    *out = requested;
    return Status::Ok();
  }
  return Unsupported(std::string("kv_cache_dtype ") + kv_cache_dtype_name(requested) +
                     ": the CUDA backend running in " + kv_cache_dtype_name(own) +
                     " stores auto (" + kv_cache_dtype_name(own) + "), " +
                     kv_cache_dtype_name(own) + ", int8 or fp8_e4m3");
}

size_t kv_head_block_bytes(KvCacheDtype dtype, int32_t block_size, int32_t head_dim) {
  const size_t rows = static_cast<size_t>(block_size);
  const size_t values = rows * static_cast<size_t>(head_dim);
  switch (dtype) {
    case KvCacheDtype::kF16:
    case KvCacheDtype::kBF16:
      return values * 2;
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kFp8E4M3:
      return values + rows * 2;  // the codes, then one fp16 scale per row
    case KvCacheDtype::kAuto:
    case KvCacheDtype::kF32:
      break;
  }
  return values * 4;
}

}  // namespace pvllm
