// Warp-level tensor-core helpers (sm_80 and later): ldmatrix loads from
// shared memory and the mma.sync m16n8k16 product with fp32 accumulators,
// for fp16 and bf16. Private to kernels/cuda; host code never includes it.
//
// Fragment layouts, as the PTX ISA defines them for m16n8k16 (lane = 4 *
// group + t, group = lane / 4, t = lane % 4):
//   A (16 x 16, row-major), four 32-bit registers of two elements each:
//     a[0] = row group,     cols 2t, 2t + 1
//     a[1] = row group + 8, cols 2t, 2t + 1
//     a[2] = row group,     cols 2t + 8, 2t + 9
//     a[3] = row group + 8, cols 2t + 8, 2t + 9
//   B (16 x 8, k x n), two registers: b0 = rows (k) 2t, 2t + 1 of col (n)
//     group; b1 = rows 2t + 8, 2t + 9 of that col.
//   C / D (16 x 8, fp32), four floats: c[0], c[1] = row group, cols 2t,
//     2t + 1; c[2], c[3] = row group + 8, the same cols.
// The lower 16 bits of a register hold the element of the lower index.
//
// ldmatrix_x4 loads four 8 x 8 matrices of 16-bit elements: lane i gives the
// address of row i % 8 of matrix i / 8 (16 contiguous bytes, 16-byte
// aligned), and register j of every lane receives matrix j, lane holding
// row lane / 4, elements 2 (lane % 4) and 2 (lane % 4) + 1 — an A or B
// fragment register as above. The _trans form hands out the transpose:
// lane holds rows 2 (lane % 4) and 2 (lane % 4) + 1 of column lane / 4,
// which makes a B fragment of a matrix stored k-major (V in P.V).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace pvllm::cuda_ops {

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}

// c += a b for one 16 x 8 x 16 tile, T = __half or __nv_bfloat16.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&c)[4], const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded (to nearest even) into one register, lo in the lower
// 16 bits: a fragment register from two accumulator values.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace pvllm::cuda_ops
