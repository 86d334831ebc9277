#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/head_norm.h"

namespace pvllm {

namespace {

using cuda_ops::from_float;
using cuda_ops::to_float;
using cuda_ops::warp_sum;

constexpr int kThreadsPerBlock = 128;
constexpr int kRowsPerBlock = kThreadsPerBlock / 32;  // one warp per row
constexpr int kElemsPerLane = kHeadNormMaxHeadDim / 32;

// grid: (ceil(num_tokens * (num_heads + num_kv_heads) / kRowsPerBlock)).
// Row r is head r % heads_per_token of token r / heads_per_token, q heads
// first. Lane l holds elements l, l + 32, ... of the row in registers, so
// the row is read and written once.
template <typename T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    head_rmsnorm_kernel(T* __restrict__ q, T* __restrict__ k, const T* __restrict__ q_weight,
                        const T* __restrict__ k_weight, int64_t num_rows, int32_t num_heads,
                        int32_t num_kv_heads, int32_t head_dim, int64_t q_token_stride,
                        int64_t k_token_stride, float eps) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= num_rows) return;  // a whole warp leaves together
  const int lane = threadIdx.x % 32;
  const int32_t heads_per_token = num_heads + num_kv_heads;
  const int64_t token = r / heads_per_token;
  const int32_t head = static_cast<int32_t>(r % heads_per_token);
  const bool is_q = head < num_heads;
  T* row = is_q ? q + token * q_token_stride + int64_t{head} * head_dim
                : k + token * k_token_stride + int64_t{head - num_heads} * head_dim;
  const T* weight = is_q ? q_weight : k_weight;

  float v[kElemsPerLane];
  float sum_squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kElemsPerLane; ++i) {
    const int d = lane + 32 * i;
    v[i] = d < head_dim ? to_float(row[d]) : 0.0f;
    sum_squares += v[i] * v[i];
  }
  sum_squares = warp_sum(sum_squares);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(head_dim) + eps);
#pragma unroll
  for (int i = 0; i < kElemsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < head_dim) row[d] = from_float<T>((v[i] * inv_rms) * to_float(weight[d]));
  }
}

}  // namespace

int pvllm_cuda_head_rmsnorm(const HeadNormParams& p, void* stream) {
  const int64_t q_row = int64_t{p.num_heads} * p.head_dim;
  const int64_t k_row = int64_t{p.num_kv_heads} * p.head_dim;
  const int64_t q_stride = p.q_token_stride == 0 ? q_row : p.q_token_stride;
  const int64_t k_stride = p.k_token_stride == 0 ? k_row : p.k_token_stride;
  const bool valid = p.q != nullptr && p.q_weight != nullptr && p.num_tokens >= 0 &&
                     p.num_heads > 0 && p.num_kv_heads >= 0 &&
                     (p.num_kv_heads == 0 || (p.k != nullptr && p.k_weight != nullptr)) &&
                     p.head_dim > 0 && p.head_dim <= kHeadNormMaxHeadDim && q_stride >= q_row &&
                     k_stride >= k_row && p.eps >= 0.0f && cuda_ops::is_kernel_dtype(p.dtype);
  if (!valid) return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;

  const int64_t num_rows = int64_t{p.num_tokens} * (p.num_heads + p.num_kv_heads);
  const dim3 grid(static_cast<unsigned>((num_rows + kRowsPerBlock - 1) / kRowsPerBlock));
  const auto s = static_cast<cudaStream_t>(stream);
  PVLLM_DISPATCH_DTYPE(p.dtype, T, {
    head_rmsnorm_kernel<T><<<grid, kThreadsPerBlock, 0, s>>>(
        static_cast<T*>(p.q), static_cast<T*>(p.k), static_cast<const T*>(p.q_weight),
        static_cast<const T*>(p.k_weight), num_rows, p.num_heads, p.num_kv_heads, p.head_dim,
        q_stride, k_stride, p.eps);
  });
  return cudaGetLastError();
}

}  // namespace pvllm
