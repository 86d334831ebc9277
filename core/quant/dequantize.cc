// Each format's values from its codes (unpack.h) and scales. Every float
// expression is the reference's, in its order: int-to-float conversions are
// exact, and each product or sum is rounded to float before the next.
#include "core/quant/dequantize.h"

#include <cstring>

#include "core/base/check.h"
#include "core/quant/block_formats.h"
#include "core/quant/unpack.h"

namespace pvllm::quant {
namespace {

inline float f(int v) { return static_cast<float>(v); }

// x = code * d: Q8_0, Q4_0, Q5_0.
template <typename Block>
void dequant_scaled(const void* src, int64_t nb, float* y) {
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_block<Block>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    for (int j = 0; j < 32; ++j) y[j] = f(q[j]) * d;
  }
}

// x = code * d + m: Q4_1, Q5_1.
template <typename Block>
void dequant_scaled_min(const void* src, int64_t nb, float* y) {
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_block<Block>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    const float m = fp16_to_float(b.m);
    for (int j = 0; j < 32; ++j) y[j] = f(q[j]) * d + m;
  }
}

void dequant_iq4_nl(const void* src, int64_t nb, float* y) {
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_block<BlockIQ4_NL>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    for (int j = 0; j < 32; ++j) y[j] = d * f(q[j]);
  }
}

void dequant_q2_k(const void* src, int64_t nb, float* y) {
  int8_t q[256];
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const auto b = load_block<BlockQ2_K>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    const float dmin = fp16_to_float(b.dmin);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * f(b.scales[s] & 0xF);
      const float ml = dmin * f(b.scales[s] >> 4);
      for (int e = 16 * s; e < 16 * s + 16; ++e) y[e] = dl * f(q[e]) - ml;
    }
  }
}

void dequant_q3_k(const void* src, int64_t nb, float* y) {
  int8_t q[256];
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const auto b = load_block<BlockQ3_K>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * f(q3k_scale(s, b.scales) - 32);
      for (int e = 16 * s; e < 16 * s + 16; ++e) y[e] = dl * f(q[e]);
    }
  }
}

// Q4_K, Q5_K: x = (d * sc) * code - dmin * m per 32-element sub-block.
template <typename Block>
void dequant_k_min(const void* src, int64_t nb, float* y) {
  int8_t q[256];
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const auto b = load_block<Block>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    const float dmin = fp16_to_float(b.dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      k_scale_min(s, b.scales, &sc, &m);
      const float d1 = d * f(sc);
      const float m1 = dmin * f(m);
      for (int e = 32 * s; e < 32 * s + 32; ++e) y[e] = d1 * f(q[e]) - m1;
    }
  }
}

void dequant_q6_k(const void* src, int64_t nb, float* y) {
  int8_t q[256];
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const auto b = load_block<BlockQ6_K>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    for (int e = 0; e < 256; ++e) y[e] = d * f(b.scales[e / 16]) * f(q[e]);
  }
}

void dequant_iq4_xs(const void* src, int64_t nb, float* y) {
  int8_t q[256];
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const auto b = load_block<BlockIQ4_XS>(src, i);
    unpack(b, q);
    const float d = fp16_to_float(b.d);
    for (int s = 0; s < 8; ++s) {
      const float dl = d * f(iq4xs_scale(s, b) - 32);
      for (int e = 32 * s; e < 32 * s + 32; ++e) y[e] = dl * f(q[e]);
    }
  }
}

}  // namespace

void dequantize_row(DType t, const void* src, int64_t n, float* dst) {
  const int64_t block = dtype_block_elems(t);
  PVLLM_CHECK(n >= 0 && n % block == 0, "dequantize_row: n is not a whole number of blocks");
  const int64_t nb = n / block;
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_as_float(t, src, i);
      return;
    case DType::kQ8_0:
      return dequant_scaled<BlockQ8_0>(src, nb, dst);
    case DType::kQ4_0:
      return dequant_scaled<BlockQ4_0>(src, nb, dst);
    case DType::kQ5_0:
      return dequant_scaled<BlockQ5_0>(src, nb, dst);
    case DType::kQ4_1:
      return dequant_scaled_min<BlockQ4_1>(src, nb, dst);
    case DType::kQ5_1:
      return dequant_scaled_min<BlockQ5_1>(src, nb, dst);
    case DType::kIQ4_NL:
      return dequant_iq4_nl(src, nb, dst);
    case DType::kQ2_K:
      return dequant_q2_k(src, nb, dst);
    case DType::kQ3_K:
      return dequant_q3_k(src, nb, dst);
    case DType::kQ4_K:
      return dequant_k_min<BlockQ4_K>(src, nb, dst);
    case DType::kQ5_K:
      return dequant_k_min<BlockQ5_K>(src, nb, dst);
    case DType::kQ6_K:
      return dequant_q6_k(src, nb, dst);
    case DType::kIQ4_XS:
      return dequant_iq4_xs(src, nb, dst);
  }
  PVLLM_CHECK(false, "dequantize_row: unknown dtype");
}

void tensor_to_floats(const Tensor& t, int64_t offset, int64_t count, float* out) {
  PVLLM_CHECK(t.layout == Layout::kRowMajor, "tensor_to_floats: only row-major tensors");
  const int64_t block = dtype_block_elems(t.dtype);
  PVLLM_CHECK(offset >= 0 && count >= 0 && offset % block == 0 && count % block == 0,
              "tensor_to_floats: range not block aligned");
  PVLLM_CHECK(offset + count <= t.numel(), "tensor_to_floats: range past the tensor's end");
  const auto* base = static_cast<const unsigned char*>(t.data);
  dequantize_row(t.dtype, base + dtype_row_bytes(t.dtype, offset), count, out);
}

}  // namespace pvllm::quant
