// Block copy for copy-on-write: duplicates whole KV blocks inside the pool.
// Plain C++ so that host code (the CUDA backend, tests) includes it without
// the CUDA headers; the launcher lives in block_copy.cu.
#pragma once

#include <cstdint>

namespace pvllm {

struct BlockCopyParams {
  // Both [num_layers, num_blocks, block_bytes] in device memory; layer l
  // starts at l * layer_stride_bytes. One block holds every token slot and
  // head of that block for one layer, so a copy moves block_bytes bytes.
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  // [num_copies, 2] (src block, dst block) in device memory.
  const int32_t* pairs = nullptr;
  int32_t num_copies = 0;
  int64_t block_bytes = 0;  // a multiple of 16: the kernel moves 16-byte vectors
  int32_t num_layers = 0;
  int64_t layer_stride_bytes = 0;  // >= num_blocks * block_bytes, a multiple of 16
};

// Copies every (src, dst) pair in every layer, K and V, on `stream` (a
// cudaStream_t; nullptr is the default stream). Asynchronous. Returns a
// cudaError_t value: cudaSuccess (0), cudaErrorInvalidValue for a bad
// shape or misaligned pointer (nothing launched), or the launch error.
int pvllm_cuda_copy_blocks(const BlockCopyParams& params, void* stream);

}  // namespace pvllm
