// Per-head RMSNorm of q and k before RoPE (Qwen3's q_norm / k_norm): every
// head_dim-long row of q and of k is normalised with its own weight vector,
// in place, on the (possibly strided) layout RoPE reads. Plain C++ header;
// the launcher is in head_norm.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm {

// The longest head this kernel normalises (one warp, 8 elements a lane).
constexpr int32_t kHeadNormMaxHeadDim = 256;

struct HeadNormParams {
  // [num_tokens, num_heads, head_dim], dtype, in place; token t starts at
  // t * q_token_stride elements (0: packed, num_heads * head_dim), so q may
  // be a view into the fused QKV GEMM output.
  void* q = nullptr;
  // [num_tokens, num_kv_heads, head_dim], dtype, in place; token t starts at
  // t * k_token_stride elements (0: packed, num_kv_heads * head_dim).
  void* k = nullptr;
  const void* q_weight = nullptr;  // [head_dim], dtype
  const void* k_weight = nullptr;  // [head_dim], dtype
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // 1 .. kHeadNormMaxHeadDim
  int64_t q_token_stride = 0;
  int64_t k_token_stride = 0;
  float eps = 1e-6f;
  DType dtype = DType::kBF16;  // kF16, kBF16 or kF32; the math is fp32
};

// For every head row x of q (weight q_weight) and of k (weight k_weight):
// x = round(x / sqrt(mean(x^2) + eps) * weight), as kernels/cpu rmsnorm()
// over rows of head_dim. One warp per row. Asynchronous on `stream`.
// Returns a cudaError_t value: cudaSuccess (also for num_tokens == 0,
// nothing launched), cudaErrorInvalidValue for a bad size, stride, dtype or
// null pointer (before any CUDA call), or the launch error.
int pvllm_cuda_head_rmsnorm(const HeadNormParams& params, void* stream);

}  // namespace pvllm
