// The host reference of the CUDA backend's 8-bit KV cache: fp8 e4m3 codes
// (encoded round-to-nearest-even with saturation at ±448, decoded exactly),
// each row's encoding (int8 through kernels/cpu/kv_encode.h, the CPU
// backend's own encoder; fp8 e4m3 the same rule with absmax / 448), and a
// paged 8-bit pool laid out as kernels/cuda/common/paged_kv.h says, built
// with that header's offsets. Plain C++: the layout and fp8 tests run
// without a GPU, the kernel tests compare the device's bytes with these.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/base/tensor.h"
#include "core/kv/kv_cache_dtype.h"
#include "kernels/cpu/kv_encode.h"
#include "kernels/cuda/common/paged_kv.h"

namespace pvllm::cuda_test {

// The e4m3 code nearest x (ties to even); |x| >= 448 (and ±inf) saturate to
// ±448 (0x7e / 0xfe). NaN is the caller's to handle (the cache stores 0).
inline uint8_t fp8_e4m3_from_float(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0x1p-6f) {
    // Subnormals: m * 2^-9, m in [0, 8]; m = 8 is the smallest normal (0x08).
    const float m = std::nearbyint(a * 0x1p9f);  // exact scaling, then ties to even
    return sign | static_cast<uint8_t>(m);
  }
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): the exponent is e - 1
  int exp = e - 1;
  float q = std::nearbyint(std::ldexp(a, 3 - exp));  // in [8, 16]
  if (q == 16.0f) {
    q = 8.0f;
    ++exp;
  }
  // a < 448 keeps exp <= 8 and the code <= 0x7e.
  return sign | static_cast<uint8_t>(((exp + 7) << 3) | (static_cast<int>(q) - 8));
}

inline float fp8_e4m3_to_float(uint8_t code) {
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int exp = (code >> 3) & 0x0f;
  const int man = code & 0x07;
  if (exp == 0x0f && man == 0x07) return NAN;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);
  return sign * std::ldexp(static_cast<float>(8 + man), exp - 10);
}

// Encodes row x[0, n) as `dtype` (kInt8 or kFp8E4M3): codes[0, n) and the
// row's fp16 scale bits.
inline void encode_kv8_row(KvCacheDtype dtype, const float* x, int32_t n, uint8_t* codes,
                           uint16_t* scale) {
  if (dtype == KvCacheDtype::kInt8) {
    cpu::encode_kv_row(KvCacheDtype::kInt8, x, n, codes, scale);
    return;
  }
  float absmax = 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > absmax) absmax = a;
  }
  uint16_t h = float_to_fp16(absmax / 448.0f);
  if ((h & 0x7fff) > 0x7bff) h = 0x7bff;
  *scale = h;
  const float d = fp16_to_float(h);
  const float inverse = d > 0.0f ? 1.0f / d : 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    const float v = x[i] * inverse;
    codes[i] = std::isnan(v) ? 0 : fp8_e4m3_from_float(v);
  }
}

// One code's value before the row's scale.
inline float kv8_code_value(KvCacheDtype dtype, uint8_t code) {
  return dtype == KvCacheDtype::kInt8 ? static_cast<float>(static_cast<int8_t>(code))
                                      : fp8_e4m3_to_float(code);
}

// One layer's 8-bit K or V pool on the host: [num_blocks, num_kv_heads,
// kv8_head_bytes] bytes, as the CUDA kernels address it.
struct Kv8Pool {
  KvCacheDtype dtype = KvCacheDtype::kInt8;
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;
  std::vector<uint8_t> bytes;

  Kv8Pool(KvCacheDtype dtype_, int32_t num_blocks_, int32_t num_kv_heads_, int32_t block_size_,
          int32_t head_dim_, uint8_t fill)
      : dtype(dtype_),
        num_blocks(num_blocks_),
        num_kv_heads(num_kv_heads_),
        block_size(block_size_),
        head_dim(head_dim_),
        bytes(static_cast<size_t>(num_blocks_) * num_kv_heads_ *
                  kv8_head_bytes(block_size_, head_dim_),
              fill) {}

  // Encodes x[0, head_dim) into slot `slot`, kv head `h`.
  void write(int64_t slot, int32_t h, const float* x) {
    const int64_t chunk = (slot / block_size) * num_kv_heads + h;
    const int64_t offset = slot % block_size;
    uint16_t scale = 0;
    encode_kv8_row(dtype, x, head_dim, bytes.data() + code_at(chunk, offset), &scale);
    std::memcpy(bytes.data() + scale_at(chunk, offset), &scale, sizeof(scale));
  }
  // Element d of slot `slot`, kv head `h`, as attention reads it (code * scale).
  float value(int64_t slot, int32_t h, int32_t d) const {
    const int64_t chunk = (slot / block_size) * num_kv_heads + h;
    const int64_t offset = slot % block_size;
    return kv8_code_value(dtype, bytes[code_at(chunk, offset) + d]) * scale(slot, h);
  }
  float scale(int64_t slot, int32_t h) const {
    const int64_t chunk = (slot / block_size) * num_kv_heads + h;
    uint16_t bits = 0;
    std::memcpy(&bits, bytes.data() + scale_at(chunk, slot % block_size), sizeof(bits));
    return fp16_to_float(bits);
  }
  int64_t code_at(int64_t chunk, int64_t offset) const {
    return kv8_code_offset(chunk, offset, block_size, head_dim);
  }
  int64_t scale_at(int64_t chunk, int64_t offset) const {
    return kv8_scale_offset(chunk, offset, block_size, head_dim);
  }
};

}  // namespace pvllm::cuda_test
