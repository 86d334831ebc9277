#include "core/kv/swap_pool.h"

#include "core/base/check.h"

namespace pvllm {

SwapPool::SwapPool(int32_t num_blocks) : num_blocks_(num_blocks) {
  PVLLM_CHECK(num_blocks >= 0, "a swap pool cannot have a negative size");
  free_.reserve(static_cast<size_t>(num_blocks));
  for (BlockId b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::vector<BlockId> SwapPool::allocate(int32_t n) {
  PVLLM_CHECK(can_allocate(n), "swap pool allocation beyond its free blocks");
  std::vector<BlockId> ids(free_.end() - n, free_.end());
  free_.resize(free_.size() - static_cast<size_t>(n));
  return ids;
}

void SwapPool::free(const std::vector<BlockId>& ids) {
  for (BlockId b : ids) {
    PVLLM_CHECK(b >= 0 && b < num_blocks_, "freeing a block outside the swap pool");
    free_.push_back(b);
  }
  PVLLM_CHECK(free_.size() <= static_cast<size_t>(num_blocks_), "a swap block freed twice");
}

}  // namespace pvllm
