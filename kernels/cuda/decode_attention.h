// Decode attention over the paged KV cache: one query token per sequence.
// Plain C++ so host code includes it without the CUDA headers; the kernels
// live in decode_attention.cu.
//
// The cache is one layer's PagedKv (kernels/cuda/common/paged_kv.h, which
// states the layout): position p of sequence s lives in block
// block_tables[s][p / block_size] at offset p % block_size — the same as the
// CPU backend.
//
// Work split. One CUDA block serves all query heads of one kv head (GQA), so
// each K/V block is read once per (sequence, kv head, split). When
// num_seqs * num_kv_heads is small against the SM count, each sequence's
// context is cut into num_splits contiguous partitions handled by separate
// CUDA blocks (flash-decoding); they write partial outputs and their softmax
// max and sum to the workspace, and a merge kernel combines them with the
// log-sum-exp rule.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/tensor.h"
#include "kernels/cuda/common/paged_kv.h"

namespace pvllm {

// The split count never exceeds this, so the workspace stays bounded.
constexpr int32_t kDecodeMaxSplits = 32;
// The automatic plan gives every split at least this many tokens of the
// longest context: shorter partitions cost more in merging than they win.
constexpr int32_t kDecodeMinTokensPerSplit = 256;
// Query heads per kv head served by one CUDA block, at most.
constexpr int32_t kDecodeMaxGroupSize = 16;

struct DecodeAttentionParams {
  // [num_seqs, num_heads, head_dim]; sequence s's row starts at
  // s * q_token_stride elements, so q may be a view into the fused QKV GEMM
  // output.
  const void* q = nullptr;
  void* out = nullptr;  // [num_seqs, num_heads, head_dim]
  // The layer's cache, read; row s of its block tables is sequence s's.
  // Served by the fast kernel (fp16 / bf16): head_dim 64 or 128;
  // block_size 16, 32 or 256; num_kv_heads divides num_heads, num_heads /
  // num_kv_heads <= kDecodeMaxGroupSize; max_blocks_per_seq > 0. fp32,
  // another head_dim (1 to 256), or an 8-bit cache (cache_dtype kInt8 /
  // kFp8E4M3) goes to the generic kernel (attention_generic.h): any block
  // size and group, never split, no alignment asked of q, out or the cache.
  // A cache_dtype naming another 16/32-bit dtype than `dtype` is refused.
  PagedKv paged_kv;
  const int32_t* context_lens = nullptr;  // [num_seqs] tokens in context, this step's included
  // Split-KV scratch of pvllm_cuda_decode_attention_workspace_bytes(params)
  // bytes, 16-byte aligned; may be null when that is 0. Laid out as
  //   partial_out fp32 [num_seqs, num_heads, num_splits, head_dim]
  //   partial_max fp32 [num_seqs, num_heads, num_splits]
  //   partial_sum fp32 [num_seqs, num_heads, num_splits]
  void* workspace = nullptr;
  DType dtype = DType::kBF16;  // kF16, kBF16 or kF32: q, out and the cache
  int32_t num_seqs = 0;
  int32_t num_heads = 0;
  int32_t max_context_len = 0;  // bound on context_lens, for planning the split count
  float scale = 0.0f;           // applied to q.k; the model uses 1 / sqrt(head_dim)
  // Elements between two sequences' q rows: 0 = packed (num_heads *
  // head_dim); else at least that and a multiple of 8 (16-byte rows).
  int64_t q_token_stride = 0;
  // 0: choose the split count from the SM count and the sizes. n > 0: use
  // min(n, kDecodeMaxSplits) splits (1 = the single-pass path); tests use it
  // to force both paths.
  int32_t num_splits_override = 0;
  // > 0: sliding-window attention; the query (at position context_len - 1)
  // attends to the last min(context_len, sliding_window) positions only.
  // Block-table entries of positions before the window are never read (the
  // KV manager may have freed those blocks and set them to -1). 0: the whole
  // context.
  int32_t sliding_window = 0;
};

// The number of context partitions the launcher will use for these sizes.
// Queries the SM count of the current device once and caches it (132 is
// assumed if the query fails). Depends only on sizes, never on pointers.
int32_t pvllm_cuda_decode_attention_num_splits(const DecodeAttentionParams& params);

// Bytes of workspace the launcher needs for these sizes (0 on the
// single-pass path).
size_t pvllm_cuda_decode_attention_workspace_bytes(const DecodeAttentionParams& params);

// For each sequence s and head h, out[s][h] = softmax(scale * q[s][h] . K) V
// over positions [start, context_lens[s]), start = 0 or, with a sliding
// window W, max(0, context_lens[s] - W); a sequence with context 0 gets
// zeros. The split plan divides [start, context_len) and counts at most W
// tokens per sequence.
// Online softmax in fp32. Asynchronous on `stream` (a cudaStream_t; nullptr
// is the default stream). Returns a cudaError_t value: cudaSuccess (0);
// cudaErrorInvalidValue for an unsupported dtype / head_dim / block_size /
// group size or q stride, a null or misaligned pointer, or a missing
// workspace on the split path (the shape checks happen before any CUDA call; nothing is
// launched); or the launch error.
int pvllm_cuda_decode_attention(const DecodeAttentionParams& params, void* stream);

}  // namespace pvllm
