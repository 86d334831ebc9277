// Device helpers shared by the elementwise op kernels (rmsnorm, activation,
// embedding, rope): fp16/bf16 <-> fp32 and N-element vectors that load and
// store as one instruction (N = 8 halves = 16 bytes). Private to
// kernels/cuda; host code never includes it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm::cuda_ops {

// 16 bytes: the widest single load/store of a thread.
constexpr int kVecBytes = 16;

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// N consecutive elements, aligned to their full size so that a load or a
// store of the whole vector is a single instruction (N * sizeof(T) <= 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Sum over the block; every thread gets the result. `scratch` holds 32
// floats in shared memory; blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

inline bool aligned_to(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

inline bool is_half_dtype(DType dtype) { return dtype == DType::kF16 || dtype == DType::kBF16; }

}  // namespace pvllm::cuda_ops

// Runs the statements with `T` bound to the device type of `dtype`
// (kF16 -> __half, kBF16 -> __nv_bfloat16); any other dtype returns
// cudaErrorInvalidValue from the enclosing launcher.
#define PVLLM_DISPATCH_HALF_DTYPE(dtype, T, ...) \
  switch (dtype) {                               \
    case ::pvllm::DType::kF16: {                 \
      using T = __half;                          \
      __VA_ARGS__;                               \
      break;                                     \
    }                                            \
    case ::pvllm::DType::kBF16: {                \
      using T = __nv_bfloat16;                   \
      __VA_ARGS__;                               \
      break;                                     \
    }                                            \
    default:                                     \
      return cudaErrorInvalidValue;              \
  }

// Runs the statements with `VEC` a compile-time vector width: 8 when
// `use_vectors` (the caller checked sizes and alignment), else 1.
#define PVLLM_DISPATCH_VEC(use_vectors, VEC, ...) \
  if (use_vectors) {                              \
    constexpr int VEC = 8;                        \
    __VA_ARGS__;                                  \
  } else {                                        \
    constexpr int VEC = 1;                        \
    __VA_ARGS__;                                  \
  }
