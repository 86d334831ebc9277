// The 8-bit KV cache's codes on the device (common/paged_kv.h has the
// layout): how the KV write encodes a row and how attention reads a code.
// The int8 encoding is kernels/cpu/kv_encode.h's, byte for byte: the row's
// scale d = fp16(absmax / 127) (the largest finite fp16 when that
// overflows), code = round_half_even(x * (1 / d)) clamped to [-127, 127],
// 0 for NaN or a zero scale. fp8 e4m3 is the same with absmax / 448 and
// code = the e4m3 nearest x * (1 / d) (ties to even, saturating at ±448).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace pvllm::cuda_ops {

// The code kinds: template arguments of the kernels that read or write them.
enum class KvCode : int { kInt8 = 0, kFp8E4M3 = 1 };

template <KvCode C>
struct KvCodeTraits;
template <>
struct KvCodeTraits<KvCode::kInt8> {
  static constexpr float kMax = 127.0f;
};
template <>
struct KvCodeTraits<KvCode::kFp8E4M3> {
  static constexpr float kMax = 448.0f;
};

// The row scale for a row whose largest magnitude is `absmax`: *bits gets
// its fp16 bits; returns the factor the codes are computed with.
template <KvCode C>
__device__ __forceinline__ float kv_row_scale(float absmax, uint16_t* bits) {
  uint16_t h = __half_as_ushort(__float2half_rn(absmax / KvCodeTraits<C>::kMax));
  if ((h & 0x7fff) > 0x7bff) h = 0x7bff;  // +inf: the largest finite fp16
  *bits = h;
  const float d = __half2float(__ushort_as_half(h));
  return d > 0.0f ? 1.0f / d : 0.0f;
}

template <KvCode C>
__device__ __forceinline__ uint8_t kv_encode(float x, float inverse) {
  const float v = __fmul_rn(x, inverse);
  if (isnan(v)) return 0;
  if constexpr (C == KvCode::kInt8) {
    return static_cast<uint8_t>(static_cast<int8_t>(fminf(fmaxf(rintf(v), -127.0f), 127.0f)));
  } else {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
}

template <KvCode C>
__device__ __forceinline__ float kv_decode(uint8_t code) {
  if constexpr (C == KvCode::kInt8) {
    return static_cast<float>(static_cast<int8_t>(code));
  } else {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
  }
}

__device__ __forceinline__ float kv_scale_value(const unsigned char* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(p)));
}

}  // namespace pvllm::cuda_ops
