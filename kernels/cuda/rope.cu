#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/rope.h"

namespace pvllm {

namespace {

using cuda_ops::from_float;
using cuda_ops::to_float;

constexpr int kThreadsPerBlock = 128;

// Rotates one pair (element offsets i0 and i1) of one head.
template <typename T>
__device__ __forceinline__ void rotate_pair(T* head, int i0, int i1, float c, float s) {
  const float a = to_float(head[i0]);
  const float b = to_float(head[i1]);
  head[i0] = from_float<T>(a * c - b * s);
  head[i1] = from_float<T>(a * s + b * c);
}

// grid: (num_tokens). The token's cos/sin for the HEAD_DIM / 2 frequencies
// (of its freq_rows row, or row 0) are computed once into shared memory, then the block's threads
// walk every (head, pair) of q and k.
template <typename T, int HEAD_DIM, bool INTERLEAVED>
__global__ void __launch_bounds__(kThreadsPerBlock)
    rope_kernel(T* __restrict__ q,                      // [num_tokens, num_heads, HEAD_DIM]
                T* __restrict__ k,                      // [num_tokens, num_kv_heads, HEAD_DIM]
                const int32_t* __restrict__ positions,  // [num_tokens]
                const float* __restrict__ inv_freq,     // [rows, HEAD_DIM / 2]
                const int32_t* __restrict__ freq_rows,  // [num_tokens] or nullptr
                int32_t num_heads, int32_t num_kv_heads, int64_t q_token_stride,
                int64_t k_token_stride) {
  constexpr int kHalf = HEAD_DIM / 2;
  __shared__ float cos_s[kHalf];
  __shared__ float sin_s[kHalf];
  const int64_t token = blockIdx.x;
  const float pos = static_cast<float>(positions[token]);
  if (freq_rows != nullptr) inv_freq += int64_t{freq_rows[token]} * kHalf;
  for (int j = threadIdx.x; j < kHalf; j += blockDim.x) {
    sincosf(pos * inv_freq[j], &sin_s[j], &cos_s[j]);
  }
  __syncthreads();

  const int32_t num_pairs = (num_heads + num_kv_heads) * kHalf;
  for (int32_t p = threadIdx.x; p < num_pairs; p += blockDim.x) {
    const int32_t head = p / kHalf;
    const int j = p % kHalf;
    T* base = head < num_heads ? q + token * q_token_stride + int64_t{head} * HEAD_DIM
                               : k + token * k_token_stride + int64_t{head - num_heads} * HEAD_DIM;
    if constexpr (INTERLEAVED) {
      rotate_pair(base, 2 * j, 2 * j + 1, cos_s[j], sin_s[j]);
    } else {
      rotate_pair(base, j, j + kHalf, cos_s[j], sin_s[j]);
    }
  }
}

template <typename T, int HEAD_DIM>
void launch(const RopeParams& p, int64_t q_stride, int64_t k_stride, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.num_tokens));
  if (p.style == RopeStyle::kInterleaved) {
    rope_kernel<T, HEAD_DIM, true><<<grid, kThreadsPerBlock, 0, s>>>(
        static_cast<T*>(p.q), static_cast<T*>(p.k), p.positions, p.inv_freq, p.freq_rows,
        p.num_heads, p.num_kv_heads, q_stride, k_stride);
  } else {
    rope_kernel<T, HEAD_DIM, false><<<grid, kThreadsPerBlock, 0, s>>>(
        static_cast<T*>(p.q), static_cast<T*>(p.k), p.positions, p.inv_freq, p.freq_rows,
        p.num_heads, p.num_kv_heads, q_stride, k_stride);
  }
}

}  // namespace

// Rope's own list of head dims (rope.h), wider than the attention kernels'
// PVLLM_DISPATCH_HEAD_DIM; anything else returns cudaErrorInvalidValue.
#define PVLLM_DISPATCH_ROPE_HEAD_DIM(head_dim, HEAD_DIM, ...) \
  switch (head_dim) {                                         \
    PVLLM_DISPATCH_CASE(8, HEAD_DIM, __VA_ARGS__)             \
    PVLLM_DISPATCH_CASE(16, HEAD_DIM, __VA_ARGS__)            \
    PVLLM_DISPATCH_CASE(32, HEAD_DIM, __VA_ARGS__)            \
    PVLLM_DISPATCH_CASE(64, HEAD_DIM, __VA_ARGS__)            \
    PVLLM_DISPATCH_CASE(80, HEAD_DIM, __VA_ARGS__)            \
    PVLLM_DISPATCH_CASE(96, HEAD_DIM, __VA_ARGS__)            \
    PVLLM_DISPATCH_CASE(112, HEAD_DIM, __VA_ARGS__)           \
    PVLLM_DISPATCH_CASE(128, HEAD_DIM, __VA_ARGS__)           \
    PVLLM_DISPATCH_CASE(192, HEAD_DIM, __VA_ARGS__)           \
    PVLLM_DISPATCH_CASE(256, HEAD_DIM, __VA_ARGS__)           \
    PVLLM_DISPATCH_REFUSE()                                   \
  }

namespace {

// cudaSuccess when the dispatch takes head_dim, else what it refuses with.
int rope_head_dim_check(int32_t head_dim) {
  PVLLM_DISPATCH_ROPE_HEAD_DIM(head_dim, HEAD_DIM, { (void)HEAD_DIM; });
  return cudaSuccess;
}

}  // namespace

bool pvllm_cuda_rope_serves_head_dim(int32_t head_dim) {
  return rope_head_dim_check(head_dim) == cudaSuccess;
}

int pvllm_cuda_rope(const RopeParams& params, void* stream) {
  const int64_t q_row = int64_t{params.num_heads} * params.head_dim;
  const int64_t k_row = int64_t{params.num_kv_heads} * params.head_dim;
  const int64_t q_stride = params.q_token_stride == 0 ? q_row : params.q_token_stride;
  const int64_t k_stride = params.k_token_stride == 0 ? k_row : params.k_token_stride;
  const bool valid =
      params.q != nullptr && params.positions != nullptr && params.inv_freq != nullptr &&
      params.num_tokens >= 0 && params.num_heads > 0 && params.num_kv_heads >= 0 &&
      (params.num_kv_heads == 0 || params.k != nullptr) && q_stride >= q_row && k_stride >= k_row &&
      cuda_ops::is_kernel_dtype(params.dtype) &&
      (params.style == RopeStyle::kInterleaved || params.style == RopeStyle::kRotateHalf);
  if (!valid) return cudaErrorInvalidValue;

  // An unsupported head_dim is an error even when there is nothing to do.
  const auto s = static_cast<cudaStream_t>(stream);
  PVLLM_DISPATCH_DTYPE(params.dtype, T, PVLLM_DISPATCH_ROPE_HEAD_DIM(params.head_dim, HEAD_DIM, {
                         if (params.num_tokens == 0) return cudaSuccess;
                         launch<T, HEAD_DIM>(params, q_stride, k_stride, s);
                       }));
  return cudaGetLastError();
}

}  // namespace pvllm
