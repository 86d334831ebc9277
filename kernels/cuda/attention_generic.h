// Paged attention for the shapes the fast kernels (decode_attention.cu,
// prefill_attention_*.cu) do not serve: fp32, a head dim other than 64
// and 128, or an 8-bit (int8 / fp8 e4m3) cache. Correctness first: one
// warp per (query row, head), keys in runs of 32 (a lane each) with the
// online softmax in fp32, every element read through the block table one
// at a time. It serves the fp32 engine that is checked token for token
// against the CPU engine and run.c, and small models (stories260K's
// head_dim 8). pvllm_cuda_decode_attention and pvllm_cuda_prefill_attention
// hand such shapes here themselves; callers see one launcher per kind.
// Private to kernels/cuda; plain C++.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/prefill_attention.h"

namespace pvllm::generic_attention {

constexpr int32_t kMaxHeadDim = 256;

// Whether (dtype, head_dim, cache dtype) goes to these kernels rather than
// the fast ones: fp32, head dims other than 64 and 128, and 8-bit caches
// (the fast kernels read K/V tiles in the activation dtype only).
inline bool serves(DType dtype, int32_t head_dim, KvCacheDtype cache = KvCacheDtype::kAuto) {
  return dtype == DType::kF32 || (head_dim != 64 && head_dim != 128) ||
         cache == KvCacheDtype::kInt8 || cache == KvCacheDtype::kFp8E4M3;
}
inline bool serves(DType dtype, const PagedKv& kv) {
  return serves(dtype, kv.head_dim, kv.cache_dtype);
}

// The launchers, with the public ones' contracts, for any block size > 0,
// head_dim in [1, kMaxHeadDim], any GQA group, fp16 / bf16 / fp32, a cache
// in that dtype or 8-bit (int8, fp8 e4m3: codes dequantized in registers,
// the scales applied to the score and the softmax weight), and q strides of
// at least a row (no alignment asked). Decode never splits (no workspace).
int decode(const DecodeAttentionParams& p, void* stream);
int prefill(const PrefillAttentionParams& p, void* stream);

}  // namespace pvllm::generic_attention
