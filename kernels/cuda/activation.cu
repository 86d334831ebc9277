#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"

namespace pvllm {

namespace {

using cuda_ops::from_float;
using cuda_ops::to_float;
using cuda_ops::Vec;

constexpr int kThreadsPerBlock = 256;

// grid: (num_tokens, column blocks). Each thread handles VEC consecutive
// outputs of one row; gate and up are read with the same vector width.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreadsPerBlock)
    silu_mul_kernel(const T* __restrict__ in,  // [num_tokens, 2 * intermediate]
                    T* __restrict__ out,       // [num_tokens, intermediate]
                    int32_t intermediate) {
  using V = Vec<T, VEC>;
  const int64_t row = blockIdx.x;
  const int32_t num_vectors = intermediate / VEC;
  const V* gate = reinterpret_cast<const V*>(in + row * 2 * intermediate);
  const V* up = reinterpret_cast<const V*>(in + row * 2 * intermediate + intermediate);
  V* out_row = reinterpret_cast<V*>(out + row * intermediate);
  for (int32_t i = blockIdx.y * blockDim.x + threadIdx.x; i < num_vectors;
       i += gridDim.y * blockDim.x) {
    const V g = gate[i];
    const V u = up[i];
    V o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float gf = to_float(g.v[k]);
      o.v[k] = from_float<T>(gf / (1.0f + expf(-gf)) * to_float(u.v[k]));
    }
    out_row[i] = o;
  }
}

}  // namespace

int pvllm_cuda_silu_mul(const SiluMulParams& params, void* stream) {
  const bool valid = params.in != nullptr && params.out != nullptr && params.num_tokens >= 0 &&
                     params.intermediate > 0 && cuda_ops::is_kernel_dtype(params.dtype);
  if (!valid) return cudaErrorInvalidValue;
  if (params.num_tokens == 0) return cudaSuccess;

  const bool use_vectors = params.intermediate % 8 == 0 && cuda_ops::aligned16(params.in) &&
                           cuda_ops::aligned16(params.out);
  const auto s = static_cast<cudaStream_t>(stream);
  PVLLM_DISPATCH_DTYPE(
      params.dtype, T, PVLLM_DISPATCH_VEC(use_vectors, VEC, {
        // Enough column blocks that a row's vectors are spread over several
        // CUDA blocks (a small batch still fills the GPU), at most 64.
        const int64_t num_vectors = params.intermediate / VEC;
        const int64_t col_blocks = (num_vectors + kThreadsPerBlock - 1) / kThreadsPerBlock;
        const dim3 grid(static_cast<unsigned>(params.num_tokens),
                        static_cast<unsigned>(col_blocks < 64 ? col_blocks : 64));
        silu_mul_kernel<T, VEC><<<grid, kThreadsPerBlock, 0, s>>>(
            static_cast<const T*>(params.in), static_cast<T*>(params.out), params.intermediate);
      }));
  return cudaGetLastError();
}

}  // namespace pvllm
