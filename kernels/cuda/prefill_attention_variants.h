// The kernels behind pvllm_cuda_prefill_attention, one per PrefillVariant,
// each in its own .cu file. Private to kernels/cuda; plain C++.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"
#include "kernels/cuda/prefill_attention.h"

namespace pvllm::prefill_detail {

// Launches one variant's kernel on params the public launcher checked
// (q_token_stride set, pointers aligned, sizes served). Returns a
// cudaError_t value. `stream` is a cudaStream_t.
using PrefillLaunchFn = int (*)(const PrefillAttentionParams&, void* stream);

// Sets *launch to the variant's launcher for these sizes and returns
// cudaSuccess, or returns cudaErrorInvalidValue where the variant does not
// serve them. Pure host code: no CUDA call.
int mma_prefill_launcher(DType dtype, int32_t head_dim, int32_t block_size,
                         PrefillLaunchFn* launch);
int wmma_prefill_launcher(DType dtype, int32_t head_dim, int32_t block_size,
                          PrefillLaunchFn* launch);

}  // namespace pvllm::prefill_detail
