// The activation side of the integer dot products: a row of float
// activations quantized to int8 blocks, so that a weight row in a quantized
// type is multiplied with integer arithmetic inside each block (vec_dot.h).
// These are pvllm's own formats (they never reach a file), chosen for the
// CPU kernels: ggml's q8_0/q8_1/q8_K play the same part, with an fp16 scale
// for the small blocks (ours is fp32: one rounding fewer).
//
// Quantizing a block of values x[0, k) (k = 32 or 256), exactly:
//   amax = max |x[i]|                       (the inputs must be finite)
//   d    = amax / 127.0f                    (one IEEE division, rounded to nearest)
//   if d < FLT_MIN (2^-126: amax == 0, or so small, under 127 * 2^-126, that
//   d would be subnormal and lose the relative precision the bound below needs):
//     d = 0 and every q[i] = 0
//   else:
//     q[i] = nearbyintf(x[i] / d)           (IEEE division, then round to nearest
//                                            integer, ties to even: the default
//                                            rounding mode; never outside
//                                            [-127, 127] since |x[i]| <= amax)
// and the sums are the exact integer sums of the q's. So |x[i] - d * q[i]|
// is at most d / 2 up to the rounding of the division x[i] / d (2^-24 of
// |x[i] / d| <= 127): at most d * (1/2 + 2^-17). A SIMD kernel reproduces
// this with a max-abs reduction, one division by 127, a vector division and
// a round-to-nearest conversion (cvtps2dq under the default MXCSR).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm::quant {

// Which activation blocks a weight type's dot product reads.
enum class ActivationKind : uint8_t {
  kNone = 0,    // plain weights (F32, F16, BF16): activations stay float
  kQ8x32 = 1,   // BlockQ8x32: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
  kQ8x256 = 2,  // BlockQ8x256: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS
};

// 32 activations: x[i] ~ d * qs[i]. `sum` is the exact sum of the 32 qs,
// filled for every block; the dot products of the types with a min (Q4_1,
// Q5_1) use it, so one quantized row serves every 32-block weight type.
struct BlockQ8x32 {
  float d;
  int32_t sum;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8x32) == 40);

// 256 activations: x[i] ~ d * qs[i]; bsums[s] is the exact sum of qs[16s,
// 16s + 16) (at most 16 * 127 in magnitude), what the K types' min terms read.
struct BlockQ8x256 {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8x256) == 292);

ActivationKind activation_kind(DType weight);
// Elements per block of `kind` (32 or 256; 0 for kNone).
int64_t activation_block_elems(ActivationKind kind);
// The bytes of n activations of `kind`, n a multiple of its block (0 for kNone
// or when n is not).
size_t activation_row_bytes(ActivationKind kind, int64_t n);

// Quantizes x[0, n) into n / block blocks of `kind` at dst (suitably aligned
// for the block struct: 4 bytes). n must be a multiple of the block and kind
// not kNone (PVLLM_CHECK).
void quantize_activation_row(ActivationKind kind, const float* x, int64_t n, void* dst);
// d * qs[i] for each element: what the blocks stand for (tests, debugging).
void dequantize_activation_row(ActivationKind kind, const void* src, int64_t n, float* out);

// One block, for kernels' tests and the row functions above.
void quantize_activation_block(const float* x, BlockQ8x32* out);
void quantize_activation_block(const float* x, BlockQ8x256* out);

}  // namespace pvllm::quant
