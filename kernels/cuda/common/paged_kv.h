// The paged KV cache of one layer as the kernels see it (FlashInfer's
// paged_kv_t): where K and V live, how a sequence's positions map to
// blocks, and the sizes that fix the layout. Every kernel that reads or
// writes the cache takes one in its params (KvWriteParams,
// DecodeAttentionParams, PrefillAttentionParams); each kernel's header says
// which sizes it serves. Plain C++, so host code includes it without the
// CUDA headers.
//
// Layout, K and V alike: [num_blocks, num_kv_heads, block_size, head_dim]
// (HND inside a block), contiguous, in the dtype of the params that carry
// the struct (fp16, bf16 or fp32) — the same layout as the CPU backend's
// pool, so the block manager and slot mapping are shared.
//
// 8-bit caches (cache_dtype kInt8 or kFp8E4M3): each (block, kv head) is
// kv_head_block_bytes(cache_dtype, block_size, head_dim) bytes (the CPU
// backend's int8 layout): block_size rows of head_dim one-byte codes, then
// block_size fp16 scales, one per token row (absmax / 127 for int8, absmax
// / 448 for fp8 e4m3). Value d of the row at offset o of kv head h in
// block b is code * scale with
//   code  at byte (b * num_kv_heads + h) * head_bytes + o * head_dim + d,
//   scale at byte (b * num_kv_heads + h) * head_bytes + block_size * head_dim + 2 * o,
// head_bytes = block_size * (head_dim + 2). The attention kernels apply K's
// scale to the score and V's to the softmax weight.
//   - Position p of sequence s lives in block
//     block_tables[s * max_blocks_per_seq + p / block_size] at offset
//     p % block_size; its slot is block * block_size + offset.
//   - Slot s is in block s / block_size at offset s % block_size; element d
//     of kv head h there is at
//     ((block * num_kv_heads + h) * block_size + offset) * head_dim + d.
//   - Inside a block one kv head's tokens are contiguous rows of head_dim
//     elements, so a run of tokens of one head is read with 16-byte vectors.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"
#include "core/kv/kv_cache_dtype.h"

namespace pvllm {

struct PagedKv {
  void* k_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim], 16-byte aligned
  void* v_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim], 16-byte aligned
  // [num_seqs, max_blocks_per_seq] block ids, row s for sequence s of the
  // batch; entries past a sequence's last block are never read, nor (with a
  // sliding window) those of blocks wholly before the window, which may be
  // -1. The attention kernels walk it; the KV write addresses slots and
  // ignores it.
  const int32_t* block_tables = nullptr;
  int32_t max_blocks_per_seq = 0;  // the width of a block_tables row
  int32_t block_size = 0;          // tokens per block
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // elements per K (or V) row of one kv head
  // What the cache stores: kAuto (or the params' own dtype named) for rows
  // in the params' dtype; kInt8 or kFp8E4M3 for 8-bit codes with scales.
  KvCacheDtype cache_dtype = KvCacheDtype::kAuto;
};

inline bool paged_kv_is_8bit(const PagedKv& kv) {
  return kv.cache_dtype == KvCacheDtype::kInt8 || kv.cache_dtype == KvCacheDtype::kFp8E4M3;
}

// Whether a cache of kv.cache_dtype can be read or written by kernels whose
// params run in `dtype`: 8-bit caches with any, kAuto with any, and f16 /
// bf16 / f32 only with that same dtype.
inline bool paged_kv_dtype_ok(const PagedKv& kv, DType dtype) {
  switch (kv.cache_dtype) {
    case KvCacheDtype::kAuto:
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kFp8E4M3:
      return true;
    case KvCacheDtype::kF16:
      return dtype == DType::kF16;
    case KvCacheDtype::kBF16:
      return dtype == DType::kBF16;
    case KvCacheDtype::kF32:
      return dtype == DType::kF32;
  }
  return false;
}

// Byte offsets inside an 8-bit cache (the layout above), shared by the KV
// write, the attention kernels (constexpr, so device code calls them) and
// the host tests. `chunk` is block * num_kv_heads + kv head; `offset` the
// token's row in the block.
constexpr int64_t kv8_head_bytes(int32_t block_size, int32_t head_dim) {
  return static_cast<int64_t>(block_size) * (static_cast<int64_t>(head_dim) + 2);
}
// The row's first code.
constexpr int64_t kv8_code_offset(int64_t chunk, int64_t offset, int32_t block_size,
                                  int32_t head_dim) {
  return chunk * kv8_head_bytes(block_size, head_dim) + offset * head_dim;
}
// The row's fp16 scale (2-byte aligned: block_size * head_dim is even for
// every block size the engine takes).
constexpr int64_t kv8_scale_offset(int64_t chunk, int64_t offset, int32_t block_size,
                                   int32_t head_dim) {
  return chunk * kv8_head_bytes(block_size, head_dim) +
         static_cast<int64_t>(block_size) * head_dim + 2 * offset;
}

}  // namespace pvllm
