// Rotary position embedding applied in place to q and k. Plain C++ header;
// the launcher is in rope.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"
#include "core/model/model_config.h"

namespace pvllm {

struct RopeParams {
  // [num_tokens, num_heads, head_dim], dtype; token t starts at
  // t * q_token_stride elements (0: packed, num_heads * head_dim), so q may
  // be a view into a fused QKV GEMM output.
  void* q = nullptr;
  // [num_tokens, num_kv_heads, head_dim], dtype; token t starts at
  // t * k_token_stride elements (0: packed, num_kv_heads * head_dim).
  void* k = nullptr;
  const int32_t* positions = nullptr;  // [num_tokens], >= 0
  // [num_freq_rows, head_dim / 2] fp32, from rope_inv_freq on the host, so
  // every scaling variant (linear, llama3, dynamic) is computed once and
  // shared with the CPU backend. One row serves every token unless
  // freq_rows is given.
  const float* inv_freq = nullptr;
  // [num_tokens] the row of inv_freq token t uses (dynamic scaling: its
  // sequence's table); nullptr: row 0 for every token. Rows must exist.
  const int32_t* freq_rows = nullptr;
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // one of 8, 16, 32, 64, 80, 96, 112, 128, 192, 256
  int64_t q_token_stride = 0;
  int64_t k_token_stride = 0;
  RopeStyle style = RopeStyle::kRotateHalf;
  DType dtype = DType::kBF16;  // kF16, kBF16 or kF32; the math is fp32
};

// Pair j of every head — (2j, 2j+1) for kInterleaved, (j, j + head_dim/2)
// for kRotateHalf — becomes (a cos - b sin, a sin + b cos) with angle
// positions[t] * inv_freq[row][j] (row = freq_rows[t], or 0), as kernels/cpu
// rope().
//
// Precision: the angle is float(position) * inv_freq[j] rounded to fp32
// (as vLLM's fp32 cos/sin cache), then sincosf (full range reduction, a few
// ulp). The CPU backend forms the angle in double, so the two differ by up
// to half an fp32 ulp of the angle, <= position * 2^-24 radians (2.4e-4 at
// position 4096, 7.8e-3 at 131072) — below one bf16 ulp of the output for
// positions up to ~65k, and visible in fp16 outputs only at long contexts.
//
// Asynchronous on `stream`. Returns a cudaError_t value: cudaSuccess (also
// for num_tokens == 0, nothing launched), cudaErrorInvalidValue for an
// unsupported head_dim, a bad size, stride, dtype or null pointer (before
// any CUDA call), or the launch error.
int pvllm_cuda_rope(const RopeParams& params, void* stream);

// Whether pvllm_cuda_rope serves this head_dim (8, 16, 32, 64, 80, 96, 112,
// 128, 192 or 256: the one list, rope.cu's dispatch). Host code, no CUDA
// call.
bool pvllm_cuda_rope_serves_head_dim(int32_t head_dim);

}  // namespace pvllm
