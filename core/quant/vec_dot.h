// The reference dot product of one quantized weight row with one quantized
// activation row (activation.h): the scalar statement of what the CPU
// kernels compute, which they must reproduce bit for bit.
//
// The integer part (block_dot). For each weight block and the activation
// block beside it (same elements; a K or IQ4_XS super-block pairs with one
// BlockQ8x256, every other type's block with one BlockQ8x32), with c[i] the
// weight's codes (unpack.h) and a[i] the activation's int8 codes:
//   Q8_0, Q4_0, Q5_0, IQ4_NL   isum = sum_i c[i] * a[i]
//   Q4_1, Q5_1                 isum = sum_i c[i] * a[i];  imin = a.sum
//   Q2_K (16 sub-blocks s)     isum = sum_s (scales[s] & 15) * sum_{i in s} c[i] * a[i]
//                              imin = sum_s (scales[s] >> 4) * a.bsums[s]
//   Q3_K (16 of 16)            isum = sum_s (q3k_scale(s) - 32) * sum_{i in s} c[i] * a[i]
//   Q4_K, Q5_K (8 of 32)       isum = sum_s sc[s] * sum_{i in s} c[i] * a[i]
//                              imin = sum_s m[s] * (a.bsums[2s] + a.bsums[2s + 1])
//   Q6_K (16 of 16)            isum = sum_s scales[s] * sum_{i in s} c[i] * a[i]
//   IQ4_XS (8 of 32)           isum = sum_s (iq4xs_scale(s) - 32) * sum_{i in s} c[i] * a[i]
// Every sum is exact in int32 (the largest, Q6_K's and IQ4_XS's, stay under
// 2^28): a kernel may group and order the integer work any way it likes,
// but no intermediate may saturate (no int16 pmaddubsw sums that can
// overflow, for instance) — the value is the exact integer.
//
// The float part, the arithmetic contract. With the block's weight scale ws
// (its fp16 d as float), its signed min factor wm (Q4_1, Q5_1: +m; Q2_K,
// Q4_K, Q5_K: -dmin; as float) and the activation block's scale ad:
//
//   float acc = 0.0f;
//   for each block b = 0, 1, ... in row order:
//     acc = fmaf(ws * ad, (float)isum, acc);
//     if the type has a min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K; every block,
//     even when wm is 0):
//       acc = fmaf(wm * ad, (float)imin, acc);
//   return acc;
//
// Every operation is one IEEE binary32 operation, round to nearest even:
// "ws * ad" and "wm * ad" are products rounded to float, (float)isum is the
// int32 converted with rounding to nearest even (exact up to 2^24; what
// cvtdq2ps does), fmaf is a fused multiply-add (one rounding). Nothing
// else: no reassociation across blocks, no partial sums in other
// precisions. A kernel holding 8 or 16 weight rows in vector lanes runs
// this same sequence per lane (ad broadcast, ws and wm per lane).
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm::quant {

// One block's contribution, before the float contract combines it.
struct BlockDot {
  float ws = 0.0f;   // the weight block's scale
  int32_t isum = 0;  // the integer dot product, sub-block scales applied
  float wm = 0.0f;   // the signed min factor (0 for types without a min)
  int32_t imin = 0;  // the min's integer part (0 for types without a min)
};

// True for the types whose blocks have a min term (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K).
bool has_min_term(DType weight);

// The integer part of block `w` (one block of `weight`, any alignment)
// against activation block `a` (a BlockQ8x32 or BlockQ8x256 as
// activation_kind(weight) says). A plain `weight` is a broken invariant.
BlockDot block_dot(DType weight, const void* w, const void* a);

// The dot product of n elements: weight row `w` (n / block blocks of
// `weight`, any alignment) with activation row `a` (the blocks of
// quantize_activation_row(activation_kind(weight), ...), 4-byte aligned),
// following the contract above. n must be a multiple of the weight's block
// and `weight` quantized (PVLLM_CHECK).
float vec_dot(DType weight, const void* w, const void* a, int64_t n);

}  // namespace pvllm::quant
