// What the prefill attention kernels (prefill_attention_mma.cu and
// prefill_attention_wmma.cu) share: the tile of query rows a CUDA block
// owns and the keys it reads, the gathers of Q and of K/V tiles into shared
// memory, and the launch. Private to kernels/cuda; device code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/prefill_attention_variants.h"

namespace pvllm::prefill_detail {

constexpr int kPrefillThreads = 128;  // 4 warps, 16 query rows each
constexpr int kPrefillKeyTile = 64;   // keys per iteration
static_assert(kPrefillQueryTile == 16 * kPrefillThreads / 32);

// The kPrefillQueryTile query rows of one sequence's chunk and one head that
// CUDA block (blockIdx.x, blockIdx.y) owns, and the keys they read.
struct PrefillTile {
  int seq;
  int q_row0;  // the tile's first row inside the chunk
  int head;
  int kv_head;      // head / group
  int first_token;  // the chunk's first row in q and out
  int num_rows;     // rows of the tile inside the chunk
  int first_pos;    // the position of the tile's row 0
  int num_keys;     // keys up to the last row's position
  // The first key any row of the tile sees: 0, or the window start of row
  // 0. Keys (and block-table entries) before it are never read.
  int key_begin;
  const int32_t* table;  // the sequence's block-table row
};

__device__ inline PrefillTile prefill_tile(const PrefillAttentionParams& p) {
  PrefillTile t;
  t.seq = p.work_items[2 * blockIdx.x];
  t.q_row0 = p.work_items[2 * blockIdx.x + 1];
  t.head = blockIdx.y;
  t.kv_head = t.head / (p.num_heads / p.paged_kv.num_kv_heads);
  t.first_token = p.query_start[t.seq];
  const int q_len = p.query_start[t.seq + 1] - t.first_token;
  t.num_rows = min(kPrefillQueryTile, q_len - t.q_row0);
  t.first_pos = p.context_lens[t.seq] - q_len + t.q_row0;
  t.num_keys = t.first_pos + t.num_rows;
  t.key_begin = p.sliding_window > 0 ? max(0, t.first_pos - p.sliding_window + 1) : 0;
  t.table = p.paged_kv.block_tables + static_cast<int64_t>(t.seq) * p.paged_kv.max_blocks_per_seq;
  return t;
}

// Starts copying the tile's Q rows into q_smem (rows `stride` elements
// apart), zeroing rows past the chunk. cp.async: the caller commits and
// waits.
template <typename T, int HEAD_DIM>
__device__ inline void load_q_tile(const PrefillAttentionParams& p, const PrefillTile& t, T* q_smem,
                                   int stride) {
  constexpr int kRowVectors = HEAD_DIM / 8;  // 16-byte vectors per row
  const T* __restrict__ q = static_cast<const T*>(p.q);
  for (int v = threadIdx.x; v < kPrefillQueryTile * kRowVectors; v += kPrefillThreads) {
    const int r = v / kRowVectors;
    const int col = (v % kRowVectors) * 8;
    T* dst = q_smem + r * stride + col;
    if (r < t.num_rows) {
      const int64_t token = t.first_token + t.q_row0 + r;
      cuda_ops::cp_async16(
          dst, q + token * p.q_token_stride + static_cast<int64_t>(t.head) * HEAD_DIM + col);
    } else {
      *reinterpret_cast<int4*>(dst) = make_int4(0, 0, 0, 0);
    }
  }
}

// Starts gathering the K and V rows of keys [key0, key0 + kPrefillKeyTile)
// of the tile's kv head through the block table into k_smem and v_smem
// (rows `stride` elements apart). Keys at or past num_keys are zeroed, so a
// zero probability never meets a stale NaN. cp.async: the caller commits
// and waits.
template <typename T, int HEAD_DIM, int BLOCK_SIZE>
__device__ inline void load_kv_tile(const PrefillAttentionParams& p, const PrefillTile& t, int key0,
                                    T* k_smem, T* v_smem, int stride) {
  constexpr int kRowVectors = HEAD_DIM / 8;
  const T* __restrict__ k_cache = static_cast<const T*>(p.paged_kv.k_cache);
  const T* __restrict__ v_cache = static_cast<const T*>(p.paged_kv.v_cache);
  for (int v = threadIdx.x; v < kPrefillKeyTile * kRowVectors; v += kPrefillThreads) {
    const int r = v / kRowVectors;
    const int col = (v % kRowVectors) * 8;
    const int key = key0 + r;
    T* k_dst = k_smem + r * stride + col;
    T* v_dst = v_smem + r * stride + col;
    if (key < t.num_keys) {
      const int64_t block = t.table[key / BLOCK_SIZE];
      const int64_t src =
          ((block * p.paged_kv.num_kv_heads + t.kv_head) * BLOCK_SIZE + key % BLOCK_SIZE) *
              HEAD_DIM +
          col;
      cuda_ops::cp_async16(k_dst, k_cache + src);
      cuda_ops::cp_async16(v_dst, v_cache + src);
    } else {
      *reinterpret_cast<int4*>(k_dst) = make_int4(0, 0, 0, 0);
      *reinterpret_cast<int4*>(v_dst) = make_int4(0, 0, 0, 0);
    }
  }
}

// Launches Kernel<T, HEAD_DIM, BLOCK_SIZE>::kernel() (a class template with
// `static auto kernel()`, the __global__ function taking the params, and
// `static constexpr int kSmemBytes`) over the grid (num_work_items,
// num_heads), opting in to its dynamic shared memory (above 48 KiB needs
// it).
template <template <typename, int, int> class Kernel, typename T, int HEAD_DIM, int BLOCK_SIZE>
int launch_prefill(const PrefillAttentionParams& p, void* stream) {
  using K = Kernel<T, HEAD_DIM, BLOCK_SIZE>;
  const cudaError_t attr =
      cudaFuncSetAttribute(K::kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, K::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(p.num_work_items), static_cast<unsigned>(p.num_heads));
  K::kernel()<<<grid, kPrefillThreads, K::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  return cudaGetLastError();
}

// The launcher of Kernel for these sizes (see prefill_attention_variants.h).
template <template <typename, int, int> class Kernel>
int find_prefill_launcher(DType dtype, int32_t head_dim, int32_t block_size,
                          PrefillLaunchFn* launch) {
  PVLLM_DISPATCH_HALF_DTYPE(dtype, T, PVLLM_DISPATCH_HEAD_DIM(head_dim, HEAD_DIM, {
                              PVLLM_DISPATCH_BLOCK_SIZE(block_size, BLOCK_SIZE, {
                                *launch = &launch_prefill<Kernel, T, HEAD_DIM, BLOCK_SIZE>;
                              });
                            }));
  return cudaSuccess;
}

}  // namespace pvllm::prefill_detail
