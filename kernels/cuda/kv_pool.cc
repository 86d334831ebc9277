// The KV pool and what moves blocks in and out of it: allocate_kv sizes
// the pool from free memory after the weights and buffers (K and V each
// [num_layers, num_blocks, num_kv_heads, head_bytes], zeroed, head_bytes =
// kv_head_block_bytes of the resolved kv_dtype(): block_size rows of
// head_dim elements, or for int8 / fp8 e4m3 the one-byte codes then
// block_size fp16 scales; common/paged_kv.h), copy_blocks copies blocks
// inside it on the device, and the page-locked swap space takes blocks out
// and back (swap_blocks); both move blocks as raw bytes, whatever they
// store. preemption_costs prices swapping against recomputing. Every size
// here is kv_bytes_per_block's, the same figure pvllm_estimate_memory
// reports for device "cuda".
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/cuda_module_interface.h"
#include "kernels/cuda/block_copy.h"
#include "kernels/cuda/cuda_backend.h"

namespace pvllm::cuda {

Status CudaBackend::allocate_kv() {
  const size_t per_block = kv_bytes_per_block(cfg_, opt_.block_size, kv_dtype());
  size_t free_bytes = 0, total_bytes = 0;
  PVLLM_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  num_blocks_ = kv_pool_blocks(
      opt_.num_blocks,
      static_cast<double>(free_bytes) * opt_.gpu_memory_utilization - kCudaReservedBytes, per_block,
      opt_.block_size);
  if (num_blocks_ < 1) {
    return OutOfMemory("no GPU memory left for the KV cache: " + std::to_string(free_bytes >> 20) +
                       " MiB free after the weights, gpu_memory_utilization " +
                       std::to_string(opt_.gpu_memory_utilization));
  }
  kv_layer_bytes_ =
      per_block / 2 / static_cast<size_t>(cfg_.num_layers) * static_cast<size_t>(num_blocks_);
  const size_t bytes = kv_layer_bytes_ * static_cast<size_t>(cfg_.num_layers);
  PVLLM_RETURN_IF_ERROR(k_cache_.allocate(bytes, "K cache"));
  PVLLM_RETURN_IF_ERROR(v_cache_.allocate(bytes, "V cache"));
  // Zeroed so that masked-out reads of never-written slots cannot carry NaN.
  PVLLM_CUDA_TRY(cudaMemset(k_cache_.get(), 0, bytes), "clearing the K cache");
  PVLLM_CUDA_TRY(cudaMemset(v_cache_.get(), 0, bytes), "clearing the V cache");
  return Status::Ok();
}

Status CudaBackend::copy_blocks(const std::vector<BlockCopy>& copies) {
  if (copies.empty()) return Status::Ok();
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  if (copies.size() > max_copies_) {
    max_copies_ = std::max(copies.size(), size_t{256});
    PVLLM_RETURN_IF_ERROR(copy_pairs_.allocate(max_copies_ * 2 * sizeof(int32_t), "copy pairs"));
  }
  std::vector<int32_t> pairs;
  pairs.reserve(copies.size() * 2);
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= num_blocks_ || c.dst < 0 || c.dst >= num_blocks_) {
      return InvalidArgument("block copy " + std::to_string(c.src) + " -> " +
                             std::to_string(c.dst) + " outside the pool");
    }
    pairs.push_back(c.src);
    pairs.push_back(c.dst);
  }
  PVLLM_CUDA_TRY(cudaMemcpyAsync(copy_pairs_.get(), pairs.data(), pairs.size() * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, stream_),
                 "copying block pairs");
  BlockCopyParams p;
  p.k_cache = k_cache_.get();
  p.v_cache = v_cache_.get();
  p.pairs = copy_pairs_.as<int32_t>();
  p.num_copies = static_cast<int32_t>(copies.size());
  p.block_bytes = static_cast<int64_t>(kv_layer_bytes_ / static_cast<size_t>(num_blocks_));
  p.num_layers = cfg_.num_layers;
  p.layer_stride_bytes = static_cast<int64_t>(kv_layer_bytes_);
  PVLLM_KERNEL_TRY(pvllm_cuda_copy_blocks(p, stream_), "copy_blocks");
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "copy_blocks");
  return Status::Ok();
}

Status CudaBackend::reserve_swap_space(int64_t bytes, int32_t* out_blocks) {
  if (bytes < 0) return InvalidArgument("cuda backend: a negative swap space");
  const size_t per_block = kv_bytes_per_block(cfg_, opt_.block_size, kv_dtype());
  const int32_t num_blocks = swap_pool_blocks(bytes, per_block, num_blocks_, opt_.block_size);
  PVLLM_RETURN_IF_ERROR(
      swap_.allocate(static_cast<size_t>(num_blocks) * per_block, "the swap space (pinned)"));
  num_swap_blocks_ = num_blocks;
  *out_blocks = num_blocks;
  return Status::Ok();
}

// One block of every layer's K (then V) per copy: a 2D copy whose rows are
// the layers (the pool keeps each layer's blocks together, the swap space
// each block's layers).
Status CudaBackend::swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection direction) {
  if (copies.empty()) return Status::Ok();
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  const bool out = direction == SwapDirection::kOut;
  const size_t block_bytes = kv_layer_bytes_ / static_cast<size_t>(num_blocks_);
  const size_t layers = static_cast<size_t>(cfg_.num_layers);
  for (const BlockCopy& c : copies) {
    const int32_t pool = out ? c.src : c.dst;
    const int32_t swap = out ? c.dst : c.src;
    if (pool < 0 || pool >= num_blocks_ || swap < 0 || swap >= num_swap_blocks_) {
      return InvalidArgument("swap_blocks: block " + std::to_string(c.src) + " -> " +
                             std::to_string(c.dst) + " is outside the pool or the swap space");
    }
    unsigned char* host =
        swap_.as<unsigned char>() + static_cast<size_t>(swap) * 2 * layers * block_bytes;
    for (int kv = 0; kv < 2; ++kv) {
      unsigned char* dev = (kv == 0 ? k_cache_ : v_cache_).as<unsigned char>() +
                           static_cast<size_t>(pool) * block_bytes;
      unsigned char* h = host + static_cast<size_t>(kv) * layers * block_bytes;
      const cudaError_t e =
          out ? cudaMemcpy2DAsync(h, block_bytes, dev, kv_layer_bytes_, block_bytes, layers,
                                  cudaMemcpyDeviceToHost, stream_)
              : cudaMemcpy2DAsync(dev, kv_layer_bytes_, h, block_bytes, block_bytes, layers,
                                  cudaMemcpyHostToDevice, stream_);
      if (e != cudaSuccess)
        return cuda_status(e, out ? "swapping a block out" : "swapping a block in");
    }
  }
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "swap_blocks");
  return Status::Ok();
}

// Rough figures for a datacenter GPU: 300 TFLOP/s for recomputing (two
// FLOPs per weight per token) and 20 GB/s each way over PCIe.
PreemptionCosts CudaBackend::preemption_costs() const {
  const double flops_per_token = weight_flops_per_token(cfg_);
  const size_t block = kv_bytes_per_block(cfg_, opt_.block_size, kv_dtype());
  return {flops_per_token / 300e12, 2.0 * static_cast<double>(block) / 20e9, block};
}

}  // namespace pvllm::cuda
