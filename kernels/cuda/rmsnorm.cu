#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/rmsnorm.h"

namespace pvllm {

namespace {

using cuda_ops::block_sum;
using cuda_ops::from_float;
using cuda_ops::to_float;
using cuda_ops::Vec;

constexpr int kThreadsPerBlock = 256;

// grid: (num_tokens). Pass 1 forms the (new) residual row and its sum of
// squares; pass 2 rereads it and writes the normalised row. Each thread
// touches the same vectors in both passes, so it only rereads its own
// writes and no extra barrier is needed for them.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreadsPerBlock)
    rmsnorm_kernel(const T* x,                    // [num_tokens, hidden]; may alias out
                   T* residual,                   // [num_tokens, hidden] or nullptr
                   const T* __restrict__ weight,  // [hidden]
                   T* out,                        // [num_tokens, hidden]; may alias x
                   int32_t hidden, float eps) {
  using V = Vec<T, VEC>;
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int32_t num_vectors = hidden / VEC;
  const V* x_row = reinterpret_cast<const V*>(x + row * hidden);
  V* res_row = residual ? reinterpret_cast<V*>(residual + row * hidden) : nullptr;
  // The row that gets normalised: the updated residual, or x itself.
  const V* src_row = res_row ? res_row : x_row;

  float sum_squares = 0.0f;
  for (int32_t i = threadIdx.x; i < num_vectors; i += blockDim.x) {
    V v = x_row[i];
    if (res_row) {
      const V r = res_row[i];
#pragma unroll
      for (int k = 0; k < VEC; ++k) v.v[k] = from_float<T>(to_float(v.v[k]) + to_float(r.v[k]));
      res_row[i] = v;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float f = to_float(v.v[k]);
      sum_squares += f * f;
    }
  }
  sum_squares = block_sum(sum_squares, scratch);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(hidden) + eps);

  const V* w = reinterpret_cast<const V*>(weight);
  V* out_row = reinterpret_cast<V*>(out + row * hidden);
  for (int32_t i = threadIdx.x; i < num_vectors; i += blockDim.x) {
    const V v = src_row[i];
    const V wv = w[i];
    V o;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
      o.v[k] = from_float<T>((to_float(v.v[k]) * inv_rms) * to_float(wv.v[k]));
    out_row[i] = o;
  }
}

}  // namespace

int pvllm_cuda_rmsnorm(const RmsNormParams& params, void* stream) {
  const bool valid = params.x != nullptr && params.weight != nullptr && params.out != nullptr &&
                     params.num_tokens >= 0 && params.hidden > 0 &&
                     cuda_ops::is_kernel_dtype(params.dtype) && params.eps >= 0.0f;
  if (!valid) return cudaErrorInvalidValue;
  if (params.num_tokens == 0) return cudaSuccess;

  const bool use_vectors = params.hidden % 8 == 0 && cuda_ops::aligned16(params.x) &&
                           cuda_ops::aligned16(params.weight) && cuda_ops::aligned16(params.out) &&
                           (params.residual == nullptr || cuda_ops::aligned16(params.residual));
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(params.num_tokens));
  PVLLM_DISPATCH_DTYPE(params.dtype, T, PVLLM_DISPATCH_VEC(use_vectors, VEC, {
                         rmsnorm_kernel<T, VEC><<<grid, kThreadsPerBlock, 0, s>>>(
                             static_cast<const T*>(params.x), static_cast<T*>(params.residual),
                             static_cast<const T*>(params.weight), static_cast<T*>(params.out),
                             params.hidden, params.eps);
                       }));
  return cudaGetLastError();
}

}  // namespace pvllm
