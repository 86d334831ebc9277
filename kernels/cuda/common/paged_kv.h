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
// the struct (fp16 or bf16) — the same layout as the CPU backend's fp32
// pool, so the block manager and slot mapping are shared.
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
};

}  // namespace pvllm
