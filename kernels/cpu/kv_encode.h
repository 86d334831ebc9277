// How the CPU backend stores one K or V row (head_dim values of one token
// and kv head) in its cache, and reads one value back. The layout of a
// (block, kv head) is paged_attention.h's; here only the values.
//
//   f32:  the floats as they are.
//   f16, bf16: each value rounded to nearest even.
//   int8: d = fp16(absmax / 127) is the row's scale (the largest finite
//         fp16 when absmax / 127 exceeds it), code = round_half_even(x / d)
//         computed as x * (1 / d), clamped to [-127, 127]; a row of zeros (or
//         below fp16's smallest subnormal times 127) stores d = 0 and codes 0.
//         The value read back is code * d. NaN stores code 0.
// Encoding is scalar code built for the baseline target, so every ISA
// variant stores the same bytes.
#pragma once

#include <cstdint>

#include "core/kv/kv_cache_dtype.h"

namespace pvllm::cpu {

// The int8 row scale for a row whose largest magnitude is `absmax`: *scale
// gets its fp16 bits, and the factor codes are computed with (1 / scale, or
// 0 for a zero scale) is returned. Shared by every encoder of int8 rows.
float int8_row_scale(float absmax, uint16_t* scale);

// The int8 code of x * inverse: rounded half to even, clamped to
// [-127, 127], NaN -> 0.
int8_t int8_code(float x, float inverse);

// Writes row x[0, n) as `dtype` (kF32, kF16, kBF16 or kInt8) at `dst` (n
// elements); for kInt8 also its scale at *scale (fp16 bits).
void encode_kv_row(KvCacheDtype dtype, const float* x, int32_t n, void* dst, uint16_t* scale);

// Element i of a row stored as `dtype`, as attention reads it (scale: the
// row's fp16 scale, kInt8 only).
float decode_kv_value(KvCacheDtype dtype, const void* row, int32_t i, uint16_t scale);

}  // namespace pvllm::cpu
