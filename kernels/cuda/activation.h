// SiLU(gate) * up, the SwiGLU activation of a Llama MLP, over the output of
// a fused gate/up GEMM. Plain C++ header; the launcher is in activation.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm {

struct SiluMulParams {
  // [num_tokens, 2 * intermediate], dtype: row t is gate (columns
  // [0, intermediate)) then up (columns [intermediate, 2 * intermediate)).
  const void* in = nullptr;
  void* out = nullptr;  // [num_tokens, intermediate], dtype; must not overlap `in`
  int32_t num_tokens = 0;
  int32_t intermediate = 0;
  DType dtype = DType::kBF16;  // kF16, kBF16 or kF32; the math is fp32
};

// out[t, i] = round(silu(gate[t, i]) * up[t, i]), silu(g) = g / (1 + exp(-g))
// in fp32 (expf, not the fast intrinsic). Any intermediate >= 1; 8 elements
// per load when intermediate % 8 == 0 and both pointers are 16-byte aligned.
// Asynchronous on `stream`. Returns a cudaError_t value: cudaSuccess (also
// for num_tokens == 0, nothing launched), cudaErrorInvalidValue for a bad
// size, dtype or null pointer (before any CUDA call), or the launch error.
int pvllm_cuda_silu_mul(const SiluMulParams& params, void* stream);

}  // namespace pvllm
