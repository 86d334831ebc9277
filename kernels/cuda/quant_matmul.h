// y = x W^T with W [n, k] quantized (Q8_0, Q4_0, Q4_K) and x [m, k] in
// bf16 or fp16: the weight-only quantized matmuls (W8A16, W4A16). W is in
// the repacked layout of common/quant_layout.h (quant_repack.h makes it
// once at load, same bytes as the file); the kernels read each weight code
// once per use and turn it into a value in registers, never dequantizing
// the whole tensor. Plain C++; the kernels live in quant_matmul.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm {

// Which kernel runs.
enum class QuantMatmulPath : int32_t {
  // kGemv for m <= kQuantGemvMaxRows, else kMma.
  kAuto = 0,
  // Decode-sized m: memory-bound, each weight byte read once per up to 8
  // rows of x; every weight dequantized in fp32 exactly as core/quant does
  // (the same float operations, no FMA contraction), then fp32 FMAs with x.
  // One CUDA block (8 warps) per group of 8 weight rows and per 8 rows of x;
  // the warps split k and add their sums in shared memory. Any m.
  kGemv = 1,
  // Prefill and batches: mma.sync m16n8k16 on tensor cores. A CUDA block
  // (4 warps) owns 64 rows of x and 64 rows of W; x is staged in shared
  // memory a chunk at a time, each warp builds its B fragments in
  // registers from the codes (integers, exact in fp16 and bf16) and scales
  // each 32-element block's product in its fp32 accumulators: d * (x . q)
  // for Q8_0 and Q4_0, (d sc) (x . q) - (dmin m) sum(x) for Q4_K. Any m.
  kMma = 2,
};

inline constexpr int64_t kQuantGemvMaxRows = 8;
// The most rows of x one call takes (the GEMV's grid has a y dimension of
// at most 65535 CUDA blocks of 8 rows).
inline constexpr int64_t kQuantMatmulMaxRows = 65535 * 8;

struct QuantMatmulParams {
  DType weight_dtype = DType::kQ4_0;  // kQ8_0, kQ4_0 or kQ4_K
  const void* codes = nullptr;        // W's codes (quant_layout), 16-byte aligned
  const void* scales = nullptr;  // W's scales (quant_layout); 16-byte aligned for Q4_K, 2 otherwise
  const void* x = nullptr;       // [m, x_stride], x_dtype, 16-byte aligned; columns [0, k) read
  void* y = nullptr;             // [m, y_stride], y_dtype; columns [0, n) written
  int64_t m = 0;                 // <= kQuantMatmulMaxRows
  int64_t n = 0;                 // a multiple of 8
  int64_t k = 0;                 // a multiple of 32 (Q8_0, Q4_0) or 256 (Q4_K)
  int64_t x_stride = 0;          // elements, >= k, a multiple of 8
  int64_t y_stride = 0;          // elements, >= n, even
  DType x_dtype = DType::kBF16;  // kBF16 or kF16
  DType y_dtype = DType::kF32;   // kF32 or x_dtype (rounded to nearest)
  QuantMatmulPath path = QuantMatmulPath::kAuto;
};

// y[i, j] = sum over c of x[i, c] * W[j, c], accumulated in fp32, for
// i < m, j < n. Asynchronous on `stream` (a cudaStream_t; nullptr is the
// default stream). Returns a cudaError_t value: cudaSuccess (also for
// m == 0: nothing launched), cudaErrorInvalidValue for an unsupported type,
// shape, stride, alignment or a null pointer (checked before any CUDA call,
// nothing launched), or the launch error. y must not overlap x or W.
int pvllm_cuda_quant_matmul(const QuantMatmulParams& params, void* stream);

}  // namespace pvllm
