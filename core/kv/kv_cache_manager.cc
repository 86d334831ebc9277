#include "core/kv/kv_cache_manager.h"

#include <algorithm>

#include "core/base/check.h"
#include "core/kv/block_manager.h"
#include "core/kv/contiguous_allocator.h"

namespace pvllm {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t sliding_window)
    : num_blocks_(num_blocks), block_size_(block_size), sliding_window_(sliding_window) {
  PVLLM_CHECK(num_blocks >= 1, "num_blocks must be >= 1");
  PVLLM_CHECK(block_size >= 8 && block_size <= 256 && (block_size & (block_size - 1)) == 0,
              "block_size must be a power of two in [8, 256]");
  PVLLM_CHECK(sliding_window >= 0, "sliding_window must be >= 0");
}

int32_t KvCacheManager::release_blocks_before(BlockTable* table, int32_t position) {
  const int32_t end =
      std::min(std::max(position, 0) / block_size_, static_cast<int32_t>(table->blocks.size()));
  // Released entries are a prefix: walk back from `end` to the first one.
  int32_t num_released = 0;
  for (int32_t i = end - 1; i >= 0 && table->blocks[i] != kReleasedBlock; --i) {
    release_block(table->blocks[i]);
    table->blocks[i] = kReleasedBlock;
    ++num_released;
  }
  return num_released;
}

int32_t KvCacheManager::drop_blocks_after(BlockTable* table, int32_t num_tokens) {
  if (allocator() != KvAllocator::kPaged) return 0;
  const auto keep = static_cast<size_t>(blocks_for(std::max(num_tokens, 0)));
  int32_t num_dropped = 0;
  while (table->blocks.size() > keep) {
    const BlockId b = table->blocks.back();
    if (b != kReleasedBlock) release_block(b);
    table->blocks.pop_back();
    ++num_dropped;
  }
  if (table->hashes.size() > keep) table->hashes.resize(keep);
  return num_dropped;
}

int32_t min_blocks_for_one_sequence(KvAllocator allocator, int32_t block_size, int32_t max_seq_len,
                                    int32_t sliding_window) {
  auto blocks_for = [block_size](int64_t n) {
    return static_cast<int32_t>((n + block_size - 1) / block_size);
  };
  const int32_t whole = blocks_for(max_seq_len);
  if (allocator != KvAllocator::kPaged || sliding_window <= 0) return whole;
  // One token written at position p with the keys p - window + 1 .. p
  // before it: `window` positions, misaligned by up to block_size - 1.
  return std::min(whole, 1 + blocks_for(sliding_window - 1));
}

std::unique_ptr<KvCacheManager> make_kv_cache_manager(KvAllocator allocator, int32_t num_blocks,
                                                      int32_t block_size,
                                                      bool enable_prefix_caching,
                                                      int32_t max_seq_len, int32_t sliding_window) {
  if (allocator == KvAllocator::kContiguous) {
    return std::make_unique<ContiguousAllocator>(num_blocks, block_size, max_seq_len,
                                                 sliding_window);
  }
  return std::make_unique<BlockManager>(num_blocks, block_size, enable_prefix_caching,
                                        sliding_window);
}

}  // namespace pvllm
