// Prefill attention over the paged KV cache: variable-length causal
// attention for a batch of prompt chunks (chunked prefill, prefix-cache
// hits), on tensor cores. Plain C++ so host code includes it without the
// CUDA headers; the kernel lives in prefill_attention.cu.
//
// Plan / run split: the tile schedule (which (sequence, query tile) each
// CUDA block handles) depends only on query_start and context_lens, so the
// host builds it once per step with plan_prefill_attention, copies it to the
// device, and every layer's launch reuses it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/tensor.h"
#include "kernels/cuda/common/paged_kv.h"

namespace pvllm {

// Query rows per CUDA block (4 warps x 16 rows), in every variant.
constexpr int32_t kPrefillQueryTile = 64;

// Which kernel runs the product. Both compute the same function and take
// the same plan; the engine uses the default. kWmma is the first kernel,
// kept beside its successor until a GPU has measured both (bench/
// attention_bench times the two in one run, cuda_kernels_test checks both).
enum class PrefillVariant : int32_t {
  // mma.sync m16n8k16 with the scores, probabilities and output held in
  // registers, K/V tiles double-buffered through cp.async (FlashAttention-2's
  // structure): prefill_attention_mma.cu.
  kMma = 0,
  // wmma 16x16x16 with scores and output round-tripping through shared
  // memory, K/V single-buffered: prefill_attention_wmma.cu.
  kWmma = 1,
};

// Host side of the plan. Returns the work items flattened as
// [num_work_items, 2] = (sequence, first query row of the tile inside that
// sequence's chunk): one item per kPrefillQueryTile rows of each chunk,
// longest key range first so the long tiles start early and the short ones
// fill the tail. query_start [num_seqs + 1] and context_lens [num_seqs] are
// host arrays with the same meaning as in PrefillAttentionParams.
// sliding_window as in PrefillAttentionParams (it shortens the key ranges
// the order is made from).
std::vector<int32_t> plan_prefill_attention(const int32_t* query_start, const int32_t* context_lens,
                                            int32_t num_seqs, int32_t sliding_window = 0);

struct PrefillAttentionParams {
  // [num_tokens, num_heads, head_dim]; token t's row starts at
  // t * q_token_stride elements (a view into the fused QKV output works).
  const void* q = nullptr;
  void* out = nullptr;  // [num_tokens, num_heads, head_dim]
  // The layer's cache, read; row i of its block tables is sequence i's.
  // Served by the fast kernels (fp16 / bf16): head_dim 64 or 128;
  // block_size 16, 32 or 256; num_kv_heads divides num_heads (head h reads
  // kv head h / (num_heads / num_kv_heads)); max_blocks_per_seq > 0. fp32,
  // another head_dim (1 to 256), or an 8-bit cache (cache_dtype kInt8 /
  // kFp8E4M3) goes to the generic kernel (attention_generic.h): any block
  // size, no alignment asked, `variant` not read. A cache_dtype naming
  // another 16/32-bit dtype than `dtype` is refused.
  PagedKv paged_kv;
  const int32_t* query_start = nullptr;   // [num_seqs + 1]; seq i owns q rows [qs[i], qs[i+1])
  const int32_t* context_lens = nullptr;  // [num_seqs] tokens in context, this chunk's included
  const int32_t* work_items = nullptr;    // [num_work_items, 2] from plan_prefill_attention
  DType dtype = DType::kBF16;             // kF16, kBF16 or kF32: q, out and the cache
  int32_t num_work_items = 0;
  int32_t num_seqs = 0;
  int32_t num_heads = 0;
  float scale = 0.0f;  // applied to q.k; the model uses 1 / sqrt(head_dim)
  // Elements between two tokens' q rows: 0 = packed (num_heads * head_dim);
  // else at least that and a multiple of 8 (16-byte rows).
  int64_t q_token_stride = 0;
  // > 0: sliding-window attention; a query at position p attends to the
  // positions max(0, p - sliding_window + 1) .. p. Block-table entries of
  // positions before the window of a chunk's first row are never read (the
  // KV manager may have freed those blocks and set them to -1). 0: causal
  // attention over the whole context.
  int32_t sliding_window = 0;
  PrefillVariant variant = PrefillVariant::kMma;
};

// Query row j of sequence i's chunk (q_len rows) has position
// context_lens[i] - q_len + j and attends to positions [0, that position]
// (the last sliding_window of them with a window).
// Every K/V it attends to, old and new, is read from the paged cache (the
// chunk's own rows were written by pvllm_cuda_write_kv first). Asynchronous
// on `stream` (a cudaStream_t; nullptr is the default stream). Returns a
// cudaError_t value: cudaSuccess (0); cudaErrorInvalidValue for an
// unsupported dtype / head_dim / block_size, variant or q stride, or a null
// or misaligned pointer
// (checked before any CUDA call; nothing launched); or the launch error.
int pvllm_cuda_prefill_attention(const PrefillAttentionParams& params, void* stream);

}  // namespace pvllm
