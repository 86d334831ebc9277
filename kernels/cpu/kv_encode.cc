#include "kernels/cpu/kv_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/tensor.h"

namespace pvllm::cpu {

namespace {

constexpr uint16_t kMaxFiniteF16 = 0x7bff;  // 65504

void encode_int8(const float* x, int32_t n, int8_t* codes, uint16_t* scale) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) amax = a;  // NaN compares false: it never becomes the max
  }
  const float inverse = int8_row_scale(amax, scale);
  for (int32_t i = 0; i < n; ++i) codes[i] = int8_code(x[i], inverse);
}

}  // namespace

float int8_row_scale(float absmax, uint16_t* scale) {
  uint16_t h = float_to_fp16(absmax / 127.0f);
  if ((h & 0x7fff) > kMaxFiniteF16) h = kMaxFiniteF16;  // +inf: saturate
  const float d = fp16_to_float(h);
  *scale = h;
  return d > 0.0f ? 1.0f / d : 0.0f;
}

int8_t int8_code(float x, float inverse) {
  const float v = x * inverse;
  // nearbyint rounds half to even in the default rounding mode.
  return static_cast<int8_t>(std::isnan(v) ? 0.0f : std::clamp(std::nearbyint(v), -127.0f, 127.0f));
}

void encode_kv_row(KvCacheDtype dtype, const float* x, int32_t n, void* dst, uint16_t* scale) {
  switch (dtype) {
    case KvCacheDtype::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int32_t i = 0; i < n; ++i) out[i] = float_to_fp16(x[i]);
      return;
    }
    case KvCacheDtype::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int32_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i]);
      return;
    }
    case KvCacheDtype::kInt8:
      encode_int8(x, n, static_cast<int8_t*>(dst), scale);
      return;
    default:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
  }
}

float decode_kv_value(KvCacheDtype dtype, const void* row, int32_t i, uint16_t scale) {
  switch (dtype) {
    case KvCacheDtype::kF16:
      return fp16_to_float(static_cast<const uint16_t*>(row)[i]);
    case KvCacheDtype::kBF16:
      return load_as_float(DType::kBF16, row, i);
    case KvCacheDtype::kInt8:
      return static_cast<float>(static_cast<const int8_t*>(row)[i]) * fp16_to_float(scale);
    default:
      return static_cast<const float*>(row)[i];
  }
}

}  // namespace pvllm::cpu
