#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/embedding.h"

namespace pvllm {

namespace {

using cuda_ops::Vec;

constexpr int kThreadsPerBlock = 256;

// grid: (num_tokens). A pure copy of VEC-element vectors; the dtype only
// fixes the element size, so T is the 2-byte storage type.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreadsPerBlock)
    embedding_kernel(const int32_t* __restrict__ ids,  // [num_tokens]
                     const T* __restrict__ table,      // [vocab, hidden]
                     T* __restrict__ out,              // [num_tokens, hidden]
                     int32_t hidden, int32_t vocab) {
  using V = Vec<T, VEC>;
  const int64_t row = blockIdx.x;
  const int32_t id = ids[row];
  const bool in_range = id >= 0 && id < vocab;
  const int32_t num_vectors = hidden / VEC;
  const V* src = reinterpret_cast<const V*>(table + (in_range ? int64_t{id} * hidden : 0));
  V* dst = reinterpret_cast<V*>(out + row * hidden);
  V zero;
#pragma unroll
  for (int k = 0; k < VEC; ++k) zero.v[k] = T{};
  for (int32_t i = threadIdx.x; i < num_vectors; i += blockDim.x) dst[i] = in_range ? src[i] : zero;
}

}  // namespace

int pvllm_cuda_embedding(const EmbeddingParams& params, void* stream) {
  const bool valid = params.ids != nullptr && params.table != nullptr && params.out != nullptr &&
                     params.num_tokens >= 0 && params.hidden > 0 && params.vocab > 0 &&
                     cuda_ops::is_kernel_dtype(params.dtype);
  if (!valid) return cudaErrorInvalidValue;
  if (params.num_tokens == 0) return cudaSuccess;

  const bool use_vectors = params.hidden % 8 == 0 && cuda_ops::aligned16(params.table) &&
                           cuda_ops::aligned16(params.out);
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(params.num_tokens));
  // A copy of 2-byte (both half types share one instantiation) or 4-byte
  // elements.
  if (params.dtype == DType::kF32) {
    using T = uint32_t;
    PVLLM_DISPATCH_VEC(use_vectors, VEC, {
      embedding_kernel<T, VEC><<<grid, kThreadsPerBlock, 0, s>>>(
          params.ids, static_cast<const T*>(params.table), static_cast<T*>(params.out),
          params.hidden, params.vocab);
    });
  } else {
    using T = uint16_t;
    PVLLM_DISPATCH_VEC(use_vectors, VEC, {
      embedding_kernel<T, VEC><<<grid, kThreadsPerBlock, 0, s>>>(
          params.ids, static_cast<const T*>(params.table), static_cast<T*>(params.out),
          params.hidden, params.vocab);
    });
  }
  return cudaGetLastError();
}

}  // namespace pvllm
