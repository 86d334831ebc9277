// Attention over a paged K/V cache, and the write that fills it.
//
// Cache layout, per layer, for K and for V alike: [num_blocks, num_kv_heads]
// runs of kv_head_block_bytes(kv_dtype, block_size, head_dim) bytes, each
// block_size rows of head_dim elements (fp32, f16, bf16 or int8 codes,
// kv_encode.h's values) and, for int8, then block_size fp16 scales, one per
// row. Token slot s lives in block s / block_size at row s % block_size; for
// a given block and kv head the block's tokens are contiguous, so a
// sequence's keys are walked in position order one block at a time.
#pragma once

#include <cstdint>

#include "core/kv/kv_cache_dtype.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu {

struct PagedAttentionParams {
  const float* q = nullptr;                    // [num_tokens, num_heads, head_dim]
  float* out = nullptr;                        // [num_tokens, num_heads, head_dim]
  const void* k_cache = nullptr;               // the layout above
  const void* v_cache = nullptr;               // the layout above
  KvCacheDtype kv_dtype = KvCacheDtype::kF32;  // kF32, kF16, kBF16 or kInt8
  const int32_t* query_start = nullptr;        // [num_seqs + 1]; seq i owns q rows [qs[i], qs[i+1])
  const int32_t* context_lens = nullptr;       // [num_seqs] tokens in context, this step's included
  const int32_t* block_tables = nullptr;       // [num_seqs, max_blocks_per_seq]
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads =
      0;  // divides num_heads; head h reads kv head h / (num_heads / num_kv_heads)
  int32_t head_dim = 0;
  int32_t block_size = 0;
  int32_t max_blocks_per_seq = 0;
  float scale = 0.0f;  // applied to q.k; the model uses 1 / sqrt(head_dim)
  // > 0: a query at position p attends only positions max(0, p - sliding_window + 1) .. p.
  int32_t sliding_window = 0;
};

// For sequence i with q_len = qs[i+1] - qs[i] and context_len, the query at
// row j of its chunk has position context_len - q_len + j and attends to
// positions [0, that position] (causal), or with a sliding window W only
// the last W of them. The caller guarantees the block tables hold valid
// block ids for every attended position, and that the K/V of every attended
// position are already in the cache. Entries of blocks wholly before a
// row's window are never read (the KV manager may have freed them: -1).
//
// Each (token, head) is one task: scores over keys in position order, the
// max, exp and sum in that order, then the weighted sum of V in that order —
// the same procedure for every query, so results do not depend on batching
// or chunking. K and V are read as stored and widened to fp32 in registers;
// an int8 row's scale multiplies its score (K) or its softmax weight (V).
void paged_attention(const PagedAttentionParams& p, ThreadPool* pool);

struct WriteKvParams {
  const float* k = nullptr;                    // [num_tokens, num_kv_heads, head_dim]
  const float* v = nullptr;                    // [num_tokens, num_kv_heads, head_dim]
  const int64_t* slot_mapping = nullptr;       // [num_tokens] slot = block * block_size + offset
  void* k_cache = nullptr;                     // the layout above
  void* v_cache = nullptr;                     // the layout above
  KvCacheDtype kv_dtype = KvCacheDtype::kF32;  // kF32, kF16, kBF16 or kInt8
  int32_t num_tokens = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 0;
};

// Stores each row's K and V in its slot as kv_dtype (kv_encode.h). Slots
// must be in range (the caller validates).
void write_kv(const WriteKvParams& p);

}  // namespace pvllm::cpu
