#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/block_copy.h"
#include "kernels/cuda/common/vec.cuh"

namespace pvllm {

namespace {

using cuda_ops::aligned16;

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kVectorBytes = sizeof(int4);

// grid: (num_copies, num_layers * 2); blockIdx.y = layer * 2 + (0 for K, 1
// for V). Each CUDA block moves one KV block of one layer, 16 bytes per
// thread per iteration, so a copy is a few coalesced sweeps.
__global__ void copy_blocks_kernel(
    char* __restrict__ k_cache,         // [num_layers, num_blocks, block_bytes]
    char* __restrict__ v_cache,         // [num_layers, num_blocks, block_bytes]
    const int32_t* __restrict__ pairs,  // [num_copies, 2]
    int64_t block_bytes, int64_t layer_stride_bytes) {
  const int32_t copy = blockIdx.x;
  const int32_t layer = blockIdx.y / 2;
  char* cache = (blockIdx.y % 2 == 0) ? k_cache : v_cache;
  const int64_t src_block = pairs[2 * copy];
  const int64_t dst_block = pairs[2 * copy + 1];

  char* layer_base = cache + layer * layer_stride_bytes;
  const int4* src = reinterpret_cast<const int4*>(layer_base + src_block * block_bytes);
  int4* dst = reinterpret_cast<int4*>(layer_base + dst_block * block_bytes);
  const int64_t num_vectors = block_bytes / kVectorBytes;
  for (int64_t i = threadIdx.x; i < num_vectors; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

int pvllm_cuda_copy_blocks(const BlockCopyParams& params, void* stream) {
  if (params.num_copies == 0) return cudaSuccess;
  // The 16-byte vector path needs 16-byte aligned blocks; there is no
  // silent byte-wise fallback.
  const bool valid = params.k_cache != nullptr && params.v_cache != nullptr &&
                     params.pairs != nullptr && params.num_copies > 0 && params.num_layers > 0 &&
                     params.num_layers <= 65535 / 2 && params.block_bytes > 0 &&
                     params.block_bytes % kVectorBytes == 0 &&
                     params.layer_stride_bytes % kVectorBytes == 0 && aligned16(params.k_cache) &&
                     aligned16(params.v_cache);
  if (!valid) return cudaErrorInvalidValue;

  const dim3 grid(static_cast<unsigned>(params.num_copies),
                  static_cast<unsigned>(params.num_layers) * 2);
  copy_blocks_kernel<<<grid, kThreadsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<char*>(params.k_cache), static_cast<char*>(params.v_cache), params.pairs,
      params.block_bytes, params.layer_stride_bytes);
  return cudaGetLastError();
}

}  // namespace pvllm
