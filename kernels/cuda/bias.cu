#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/bias.h"
#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"

namespace pvllm {

namespace {

using cuda_ops::from_float;
using cuda_ops::to_float;
using cuda_ops::Vec;

constexpr int kThreadsPerBlock = 256;

// grid: (num_tokens, column blocks). Each thread adds VEC consecutive
// columns of one row.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreadsPerBlock)
    add_bias_kernel(T* __restrict__ x,           // [num_tokens, token_stride]
                    const T* __restrict__ bias,  // [cols]
                    int32_t cols, int64_t token_stride) {
  using V = Vec<T, VEC>;
  const int32_t num_vectors = cols / VEC;
  V* row = reinterpret_cast<V*>(x + static_cast<int64_t>(blockIdx.x) * token_stride);
  const V* b = reinterpret_cast<const V*>(bias);
  for (int32_t i = blockIdx.y * blockDim.x + threadIdx.x; i < num_vectors;
       i += gridDim.y * blockDim.x) {
    V v = row[i];
    const V bv = b[i];
#pragma unroll
    for (int k = 0; k < VEC; ++k) v.v[k] = from_float<T>(to_float(v.v[k]) + to_float(bv.v[k]));
    row[i] = v;
  }
}

}  // namespace

int pvllm_cuda_add_bias(const BiasAddParams& params, void* stream) {
  const int64_t stride = params.token_stride == 0 ? params.cols : params.token_stride;
  const bool valid = params.x != nullptr && params.bias != nullptr && params.num_tokens >= 0 &&
                     params.cols > 0 && stride >= params.cols &&
                     cuda_ops::is_kernel_dtype(params.dtype);
  if (!valid) return cudaErrorInvalidValue;
  if (params.num_tokens == 0) return cudaSuccess;

  const bool use_vectors = params.cols % 8 == 0 && stride % 8 == 0 &&
                           cuda_ops::aligned16(params.x) && cuda_ops::aligned16(params.bias);
  const auto s = static_cast<cudaStream_t>(stream);
  PVLLM_DISPATCH_DTYPE(
      params.dtype, T, PVLLM_DISPATCH_VEC(use_vectors, VEC, {
        const int64_t num_vectors = params.cols / VEC;
        const int64_t col_blocks = (num_vectors + kThreadsPerBlock - 1) / kThreadsPerBlock;
        const dim3 grid(static_cast<unsigned>(params.num_tokens),
                        static_cast<unsigned>(col_blocks < 64 ? col_blocks : 64));
        add_bias_kernel<T, VEC><<<grid, kThreadsPerBlock, 0, s>>>(
            static_cast<T*>(params.x), static_cast<const T*>(params.bias), params.cols, stride);
      }));
  return cudaGetLastError();
}

}  // namespace pvllm
