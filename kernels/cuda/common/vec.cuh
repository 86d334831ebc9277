// Vector helpers shared by the kernels: fp16/bf16 <-> fp32, N-element
// vectors that load and store as one instruction (N = 8 halves = 16 bytes),
// block sums, the 16-byte alignment check of the launchers, and cp.async
// copies from global to shared memory. Private to kernels/cuda; host code
// never includes it.
//
// It sits beside the kernels rather than in common/ because it holds device
// functions: nvcc's -lineinfo tables name the folder of every header that
// contributes device code, and scripts/gpu_bundle.sh --verify admits only
// kernels/cuda itself among the checkout's paths in a binary. The headers
// in common/ hold macros, plain structs and host code only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm::cuda_ops {

// 16 bytes: the widest single load/store of a thread.
constexpr int kVecBytes = 16;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round to nearest even.
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
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

// Maximum and sum over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Sum over the block; every thread gets the result. `scratch` holds 32
// floats in shared memory; blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// ---- cp.async: global -> shared without a register round trip ------------

// Starts copying 16 bytes; both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}
// Closes the copies started since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Commits the copies started so far and waits for every one of them.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

// ---- host side of the launchers ------------------------------------------

// Whether `p` may be read and written with 16-byte vectors.
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(kVecBytes) == 0;
}

inline bool is_half_dtype(DType dtype) { return dtype == DType::kF16 || dtype == DType::kBF16; }

// The dtypes of the element-wise kernels (norms, RoPE, bias, SiLU, embedding,
// KV write) and of the generic attention: fp16, bf16 and fp32.
inline bool is_kernel_dtype(DType dtype) { return is_half_dtype(dtype) || dtype == DType::kF32; }

// Elements of `dtype` in one 16-byte vector: 8 (fp16, bf16) or 4 (fp32).
inline int elems_per_vector(DType dtype) { return dtype == DType::kF32 ? 4 : 8; }

}  // namespace pvllm::cuda_ops
