#include "core/quant/vec_dot.h"

#include <cmath>

#include "core/base/check.h"
#include "core/quant/activation.h"
#include "core/quant/block_formats.h"
#include "core/quant/unpack.h"

namespace pvllm::quant {
namespace {

// sum_{i < k} c[i] * a[i], exact.
int32_t dot_codes(const int8_t* c, const int8_t* a, int k) {
  int32_t sum = 0;
  for (int i = 0; i < k; ++i) sum += int32_t{c[i]} * int32_t{a[i]};
  return sum;
}

// The small blocks without a min: one scale for 32 codes.
template <typename Block>
BlockDot dot32(const void* w, const BlockQ8x32& a) {
  const auto b = load_block<Block>(w, 0);
  int8_t c[32];
  unpack(b, c);
  BlockDot out;
  out.ws = fp16_to_float(b.d);
  out.isum = dot_codes(c, a.qs, 32);
  return out;
}

// Q4_1, Q5_1: x = d * c + m, so sum x * a = d * sum c * a + m * sum a.
template <typename Block>
BlockDot dot32_min(const void* w, const BlockQ8x32& a) {
  BlockDot out = dot32<Block>(w, a);
  out.wm = fp16_to_float(load_block<Block>(w, 0).m);
  out.imin = a.sum;
  return out;
}

BlockDot dot_q2_k(const void* w, const BlockQ8x256& a) {
  const auto b = load_block<BlockQ2_K>(w, 0);
  int8_t c[256];
  unpack(b, c);
  BlockDot out;
  out.ws = fp16_to_float(b.d);
  out.wm = -fp16_to_float(b.dmin);
  for (int s = 0; s < 16; ++s) {
    out.isum += (b.scales[s] & 15) * dot_codes(c + 16 * s, a.qs + 16 * s, 16);
    out.imin += (b.scales[s] >> 4) * int32_t{a.bsums[s]};
  }
  return out;
}

BlockDot dot_q3_k(const void* w, const BlockQ8x256& a) {
  const auto b = load_block<BlockQ3_K>(w, 0);
  int8_t c[256];
  unpack(b, c);
  BlockDot out;
  out.ws = fp16_to_float(b.d);
  for (int s = 0; s < 16; ++s) {
    out.isum += (q3k_scale(s, b.scales) - 32) * dot_codes(c + 16 * s, a.qs + 16 * s, 16);
  }
  return out;
}

// Q4_K, Q5_K: x = d * sc * c - dmin * m per sub-block of 32.
template <typename Block>
BlockDot dot_k_min(const void* w, const BlockQ8x256& a) {
  const auto b = load_block<Block>(w, 0);
  int8_t c[256];
  unpack(b, c);
  BlockDot out;
  out.ws = fp16_to_float(b.d);
  out.wm = -fp16_to_float(b.dmin);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    k_scale_min(s, b.scales, &sc, &m);
    out.isum += sc * dot_codes(c + 32 * s, a.qs + 32 * s, 32);
    out.imin += m * (int32_t{a.bsums[2 * s]} + int32_t{a.bsums[2 * s + 1]});
  }
  return out;
}

BlockDot dot_q6_k(const void* w, const BlockQ8x256& a) {
  const auto b = load_block<BlockQ6_K>(w, 0);
  int8_t c[256];
  unpack(b, c);
  BlockDot out;
  out.ws = fp16_to_float(b.d);
  for (int s = 0; s < 16; ++s) {
    out.isum += b.scales[s] * dot_codes(c + 16 * s, a.qs + 16 * s, 16);
  }
  return out;
}

BlockDot dot_iq4_xs(const void* w, const BlockQ8x256& a) {
  const auto b = load_block<BlockIQ4_XS>(w, 0);
  int8_t c[256];
  unpack(b, c);
  BlockDot out;
  out.ws = fp16_to_float(b.d);
  for (int s = 0; s < 8; ++s) {
    out.isum += (iq4xs_scale(s, b) - 32) * dot_codes(c + 32 * s, a.qs + 32 * s, 32);
  }
  return out;
}

}  // namespace

bool has_min_term(DType weight) {
  switch (weight) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return true;
    default:
      return false;
  }
}

BlockDot block_dot(DType weight, const void* w, const void* a) {
  const auto& a32 = *static_cast<const BlockQ8x32*>(a);
  const auto& a256 = *static_cast<const BlockQ8x256*>(a);
  switch (weight) {
    case DType::kQ8_0:
      return dot32<BlockQ8_0>(w, a32);
    case DType::kQ4_0:
      return dot32<BlockQ4_0>(w, a32);
    case DType::kQ5_0:
      return dot32<BlockQ5_0>(w, a32);
    case DType::kIQ4_NL:
      return dot32<BlockIQ4_NL>(w, a32);
    case DType::kQ4_1:
      return dot32_min<BlockQ4_1>(w, a32);
    case DType::kQ5_1:
      return dot32_min<BlockQ5_1>(w, a32);
    case DType::kQ2_K:
      return dot_q2_k(w, a256);
    case DType::kQ3_K:
      return dot_q3_k(w, a256);
    case DType::kQ4_K:
      return dot_k_min<BlockQ4_K>(w, a256);
    case DType::kQ5_K:
      return dot_k_min<BlockQ5_K>(w, a256);
    case DType::kQ6_K:
      return dot_q6_k(w, a256);
    case DType::kIQ4_XS:
      return dot_iq4_xs(w, a256);
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      break;
  }
  PVLLM_CHECK(false, "block_dot: not a quantized type");
  return {};
}

float vec_dot(DType weight, const void* w, const void* a, int64_t n) {
  const ActivationKind kind = activation_kind(weight);
  const int64_t block = dtype_block_elems(weight);
  PVLLM_CHECK(kind != ActivationKind::kNone, "vec_dot: not a quantized type");
  PVLLM_CHECK(n >= 0 && n % block == 0, "vec_dot: n is not a whole number of blocks");
  const size_t w_bytes = dtype_block_bytes(weight);
  const size_t a_bytes = activation_row_bytes(kind, block);
  const bool with_min = has_min_term(weight);
  const auto* wp = static_cast<const unsigned char*>(w);
  const auto* ap = static_cast<const unsigned char*>(a);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / block; ++b) {
    const void* ab = ap + b * a_bytes;
    const float ad = kind == ActivationKind::kQ8x32 ? static_cast<const BlockQ8x32*>(ab)->d
                                                    : static_cast<const BlockQ8x256*>(ab)->d;
    const BlockDot t = block_dot(weight, wp + b * w_bytes, ab);
    acc = std::fmaf(t.ws * ad, static_cast<float>(t.isum), acc);
    if (with_min) acc = std::fmaf(t.wm * ad, static_cast<float>(t.imin), acc);
  }
  return acc;
}

}  // namespace pvllm::quant
