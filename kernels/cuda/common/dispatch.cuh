// The dispatch macros: each turns one runtime dimension into a compile-time
// constant, with an explicit list of the values it serves and a default
// that refuses anything else by returning cudaErrorInvalidValue from the
// enclosing launcher (pure host code, so a launcher refuses a shape before
// its first CUDA call). One macro per dimension, shared by every kernel; a
// kernel whose list differs (rope's head dims) writes its own switch of
// PVLLM_DISPATCH_CASE entries with the same default. Nest them:
//
//   PVLLM_DISPATCH_HALF_DTYPE(dtype, T, PVLLM_DISPATCH_HEAD_DIM(head_dim, HEAD_DIM, {
//     launch = &launch_kernel<T, HEAD_DIM>;
//   }));
//
// The statements run once per listed value, inside a `switch` case: `break`
// leaves the dispatch, `return` the launcher.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/base/tensor.h"

// One listed value: runs the statements with NAME an `int` constant equal
// to VALUE.
#define PVLLM_DISPATCH_CASE(VALUE, NAME, ...) \
  case VALUE: {                               \
    constexpr int NAME = VALUE;               \
    __VA_ARGS__;                              \
    break;                                    \
  }

// The default of every dispatch: the value is not on the list.
#define PVLLM_DISPATCH_REFUSE() \
  default:                      \
    return cudaErrorInvalidValue;

// The two half types' cases: the statements with `T` bound to __half
// (kF16) or __nv_bfloat16 (kBF16).
#define PVLLM_DISPATCH_HALF_CASES(T, ...) \
  case ::pvllm::DType::kF16: {            \
    using T = __half;                     \
    __VA_ARGS__;                          \
    break;                                \
  }                                       \
  case ::pvllm::DType::kBF16: {           \
    using T = __nv_bfloat16;              \
    __VA_ARGS__;                          \
    break;                                \
  }

// Runs the statements with `T` bound to the device type of `dtype`
// (kF16 -> __half, kBF16 -> __nv_bfloat16); any other dtype is refused.
#define PVLLM_DISPATCH_HALF_DTYPE(dtype, T, ...) \
  switch (dtype) {                               \
    PVLLM_DISPATCH_HALF_CASES(T, __VA_ARGS__)    \
    PVLLM_DISPATCH_REFUSE()                      \
  }

// Runs the statements with `T` bound to the device type of `dtype`: the
// half types as above, and kF32 -> float.
#define PVLLM_DISPATCH_DTYPE(dtype, T, ...)   \
  switch (dtype) {                            \
    PVLLM_DISPATCH_HALF_CASES(T, __VA_ARGS__) \
    case ::pvllm::DType::kF32: {              \
      using T = float;                        \
      __VA_ARGS__;                            \
      break;                                  \
    }                                         \
      PVLLM_DISPATCH_REFUSE()                 \
  }

// The head dims of the attention kernels (decode and prefill): 64 and 128.
#define PVLLM_DISPATCH_HEAD_DIM(head_dim, HEAD_DIM, ...) \
  switch (head_dim) {                                    \
    PVLLM_DISPATCH_CASE(64, HEAD_DIM, __VA_ARGS__)       \
    PVLLM_DISPATCH_CASE(128, HEAD_DIM, __VA_ARGS__)      \
    PVLLM_DISPATCH_REFUSE()                              \
  }

// The KV cache block sizes of the kernels that walk block tables (decode
// and prefill attention): 16, 32 and 256 tokens.
#define PVLLM_DISPATCH_BLOCK_SIZE(block_size, BLOCK_SIZE, ...) \
  switch (block_size) {                                        \
    PVLLM_DISPATCH_CASE(16, BLOCK_SIZE, __VA_ARGS__)           \
    PVLLM_DISPATCH_CASE(32, BLOCK_SIZE, __VA_ARGS__)           \
    PVLLM_DISPATCH_CASE(256, BLOCK_SIZE, __VA_ARGS__)          \
    PVLLM_DISPATCH_REFUSE()                                    \
  }

// Runs the statements with `VEC` a compile-time vector width: one 16-byte
// vector of the element type T in scope (8 fp16 / bf16, 4 fp32) when
// `use_vectors` (the caller checked sizes, a multiple of 8 elements, and
// 16-byte alignment), else 1. Both values are always served: no default.
#define PVLLM_DISPATCH_VEC(use_vectors, VEC, ...)         \
  if (use_vectors) {                                      \
    constexpr int VEC = 16 / static_cast<int>(sizeof(T)); \
    __VA_ARGS__;                                          \
  } else {                                                \
    constexpr int VEC = 1;                                \
    __VA_ARGS__;                                          \
  }
