#include "core/kv/kv_cache_manager.h"

#include "core/base/check.h"
#include "core/kv/block_manager.h"
#include "core/kv/contiguous_allocator.h"

namespace pvllm {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  PVLLM_CHECK(num_blocks >= 1, "num_blocks must be >= 1");
  PVLLM_CHECK(block_size >= 8 && block_size <= 256 && (block_size & (block_size - 1)) == 0,
              "block_size must be a power of two in [8, 256]");
}

std::unique_ptr<KvCacheManager> make_kv_cache_manager(KvAllocator allocator, int32_t num_blocks,
                                                      int32_t block_size,
                                                      bool enable_prefix_caching,
                                                      int32_t max_seq_len) {
  if (allocator == KvAllocator::kContiguous) {
    return std::make_unique<ContiguousAllocator>(num_blocks, block_size, max_seq_len);
  }
  return std::make_unique<BlockManager>(num_blocks, block_size, enable_prefix_caching);
}

}  // namespace pvllm
