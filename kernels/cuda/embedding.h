// Embedding gather: token ids to rows of the embedding table. Plain C++
// header; the launcher is in embedding.cu.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm {

struct EmbeddingParams {
  const int32_t* ids = nullptr;  // [num_tokens]
  const void* table = nullptr;   // [vocab, hidden], dtype
  void* out = nullptr;           // [num_tokens, hidden], dtype
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  int32_t vocab = 0;
  DType dtype = DType::kBF16;  // kF16, kBF16 or kF32 (the copy is bit exact)
};

// out[t] = table[ids[t]]. An id outside [0, vocab) writes a row of zeros
// and never reads the table (the backend validates ids beforehand; this
// only keeps a bad id from reading out of bounds). Any hidden >= 1; 16-byte
// copies when hidden % 8 == 0 and table and out are 16-byte aligned.
// Asynchronous on `stream`. Returns a cudaError_t value: cudaSuccess (also
// for num_tokens == 0, nothing launched), cudaErrorInvalidValue for a bad
// size, dtype or null pointer (before any CUDA call), or the launch error.
int pvllm_cuda_embedding(const EmbeddingParams& params, void* stream);

}  // namespace pvllm
