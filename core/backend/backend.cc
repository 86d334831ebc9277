#include "core/backend/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/model/model_config.h"

namespace pvllm {

size_t kv_bytes_per_block(const ModelConfig& config, int32_t block_size, KvCacheDtype dtype) {
  // K and V, every layer, every kv head.
  return size_t{2} * static_cast<size_t>(config.num_layers) *
         static_cast<size_t>(config.num_kv_heads) *
         kv_head_block_bytes(dtype, block_size, config.head_dim);
}

DType cuda_activation_dtype(int32_t option, DType checkpoint) {
  if (option == 1) return DType::kBF16;
  if (option == 2) return DType::kF16;
  if (option == 3) return DType::kF32;
  return checkpoint == DType::kF16 ? DType::kF16 : DType::kBF16;
}

int32_t kv_pool_blocks(int32_t num_blocks, double budget_bytes, size_t bytes_per_block,
                       int32_t block_size) {
  const int32_t cap = INT32_MAX / std::max(block_size, 1);
  if (num_blocks > 0) return std::min(num_blocks, cap);
  if (!(budget_bytes > 0.0) || bytes_per_block == 0) return 0;
  const double blocks = std::floor(budget_bytes / static_cast<double>(bytes_per_block));
  return static_cast<int32_t>(std::min(blocks, static_cast<double>(cap)));
}

int32_t swap_pool_blocks(int64_t swap_space_bytes, size_t bytes_per_block, int32_t pool_blocks,
                         int32_t block_size) {
  if (swap_space_bytes == 0) return pool_blocks;
  return kv_pool_blocks(0, static_cast<double>(swap_space_bytes), bytes_per_block, block_size);
}

}  // namespace pvllm
