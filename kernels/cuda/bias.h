// Bias add after a projection: the q/k/v bias of Qwen2-style models (one
// bias row over the fused QKV GEMM output) and the o_proj bias. Plain C++
// header; the launcher is in bias.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm {

struct BiasAddParams {
  // [num_tokens, cols], dtype, in place; token t's row starts at
  // t * token_stride elements (0: packed, cols).
  void* x = nullptr;
  const void* bias = nullptr;  // [cols], dtype
  int32_t num_tokens = 0;
  int32_t cols = 0;
  int64_t token_stride = 0;
  DType dtype = DType::kBF16;  // kF16, kBF16 or kF32; the add is fp32, rounded once
};

// x[t, c] = round(x[t, c] + bias[c]). Any cols >= 1; 8 elements per load
// when cols and the stride are multiples of 8 and both pointers are 16-byte
// aligned. Asynchronous on `stream`. Returns a cudaError_t value:
// cudaSuccess (also for num_tokens == 0, nothing launched),
// cudaErrorInvalidValue for a bad size, stride, dtype or null pointer
// (before any CUDA call), or the launch error.
int pvllm_cuda_add_bias(const BiasAddParams& params, void* stream);

}  // namespace pvllm
