// KV write: copies one step's new K and V rows (after RoPE) into their slots
// of the paged cache. Plain C++ so host code includes it without the CUDA
// headers; the launcher lives in kv_write.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"
#include "kernels/cuda/common/paged_kv.h"

namespace pvllm {

struct KvWriteParams {
  // [num_tokens, paged_kv.num_kv_heads, paged_kv.head_dim] each; token t's
  // row starts at t * k_token_stride (v_token_stride) elements, so both may
  // be views into the fused QKV GEMM output.
  const void* k = nullptr;
  const void* v = nullptr;
  // The layer's cache, written. block_tables and max_blocks_per_seq are not
  // read (slots address the cache); num_kv_heads > 0; block_size any
  // positive size (the slot arithmetic does not care). A cache in the rows'
  // dtype asks head_dim a multiple of 8 (fp16 / bf16) or 4 (fp32): a row is
  // a whole number of 16-byte vectors, copied bit for bit. An 8-bit cache
  // (cache_dtype kInt8 / kFp8E4M3) takes any head_dim: each row is encoded
  // against its own fp16 scale (common/kv_quant.cuh, the CPU's int8 rule).
  PagedKv paged_kv;
  const int64_t* slot_mapping = nullptr;  // [num_tokens] block * block_size + offset; < 0 skips
  DType dtype = DType::kBF16;             // kF16, kBF16 or kF32: the rows (and a non-8-bit cache)
  int32_t num_tokens = 0;
  // Elements between two tokens' rows: 0 = packed (num_kv_heads * head_dim);
  // else at least that and, unless the cache is 8-bit, a multiple of 8
  // (fp32: 4), 16-byte rows.
  int64_t k_token_stride = 0;
  int64_t v_token_stride = 0;
};

// Writes row t's K and V to slot slot_mapping[t] for every kv head; rows with
// a negative slot (padding) are skipped. Slots must lie inside the pool (the
// caller's block manager guarantees it). Asynchronous on `stream` (a
// cudaStream_t; nullptr is the default stream). Returns a cudaError_t value:
// cudaSuccess (0); cudaErrorInvalidValue for an unsupported dtype, shape or
// stride, a null or misaligned pointer (checked before any CUDA call, nothing
// launched); or the launch error.
int pvllm_cuda_write_kv(const KvWriteParams& params, void* stream);

}  // namespace pvllm
