// RMSNorm, optionally fused with the residual add that precedes it in every
// Llama block (vLLM's fused_add_rms_norm). Plain C++ so host code includes
// it without the CUDA headers; the launcher lives in rmsnorm.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm {

struct RmsNormParams {
  const void* x = nullptr;       // [num_tokens, hidden] input, dtype
  void* residual = nullptr;      // [num_tokens, hidden] in/out, dtype; nullptr: plain RMSNorm
  const void* weight = nullptr;  // [hidden], dtype
  void* out = nullptr;           // [num_tokens, hidden], dtype; may alias x
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  float eps = 1e-5f;
  DType dtype = DType::kBF16;  // kF16, kBF16 or kF32; the math is fp32
};

// Per row, with residual:    residual = round(x + residual);
//                            out = round(residual / rms(residual) * weight)
//            without:        out = round(x / rms(x) * weight)
// where rms(v) = sqrt(mean(v^2) + eps), and the normalised row is the
// residual exactly as stored (rounded to dtype), so out equals a plain
// RMSNorm of the new residual. One CUDA block per row.
//
// Any hidden >= 1 is supported. When hidden % 8 == 0 and every pointer is
// 16-byte aligned the kernel moves 8 elements per load; otherwise one.
// Asynchronous on `stream` (a cudaStream_t; nullptr is the default stream).
// Returns a cudaError_t value: cudaSuccess (0, also for num_tokens == 0,
// nothing launched), cudaErrorInvalidValue for a bad size, dtype or null
// pointer (checked before any CUDA call, nothing launched), or the launch
// error.
int pvllm_cuda_rmsnorm(const RmsNormParams& params, void* stream);

}  // namespace pvllm
