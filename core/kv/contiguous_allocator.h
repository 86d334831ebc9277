// ContiguousAllocator (kContiguous): the baseline the paged cache is
// measured against. A table gets one run of consecutive block ids covering
// max_seq_len slots at allocation (first fit, lowest start), so it never
// grows; when no run fits, allocation says no and the sequence waits. No
// prefix caching and no sharing: fork reserves a new run and lists a copy
// of each block in use.
//
// Sliding window: release_blocks_before gives a table's leading blocks back
// to the free runs (the blocks it keeps are still one run), so other
// sequences' reservations find room sooner; admission still takes a whole
// max_seq_len reservation, so a window does not lower what one sequence
// needs to start.
//
// Invariant: the free blocks are kept as runs (start -> length), disjoint
// and never adjacent (neighbours merge when freed); a block is in a run
// exactly when its ref is 0.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/kv/kv_cache_manager.h"

namespace pvllm {

class ContiguousAllocator final : public KvCacheManager {
 public:
  // blocks_for(max_seq_len) blocks per table, 1 <= that <= num_blocks.
  ContiguousAllocator(int32_t num_blocks, int32_t block_size, int32_t max_seq_len,
                      int32_t sliding_window = 0);

  KvAllocator allocator() const override { return KvAllocator::kContiguous; }
  bool prefix_caching() const override { return false; }
  // Free blocks; they may be too scattered for a run: see can_allocate.
  int32_t num_available_blocks() const override { return num_free_blocks_; }
  int32_t ref_count(BlockId b) const override { return refs_[b]; }
  KvCacheMetrics metrics() const override;
  // Blocks one table holds from allocation on.
  int32_t num_reserved_blocks_per_table() const { return num_reserved_blocks_; }

  // Nothing is ever cached: an empty match.
  PrefixMatch match_prefix(std::span<const int32_t> tokens) const override;
  // Whether a free run for a whole reservation exists (num_blocks_to_keep
  // does not apply: a reservation never grows).
  bool can_allocate(const PrefixMatch& match, int32_t num_tokens,
                    int32_t num_blocks_to_keep) const override;
  int32_t allocate(const PrefixMatch& match, int32_t num_tokens, BlockTable* table) override;
  // Within the reservation always; past it never.
  bool can_append(const BlockTable& table, int32_t num_computed, int32_t num_new) const override;
  bool append(BlockTable* table, int32_t num_computed, int32_t num_new,
              std::vector<BlockCopy>* copies) override;
  void cache_full_blocks(BlockTable* table, std::span<const int32_t> tokens,
                         int32_t num_computed) override;
  bool can_fork(const BlockTable& parent) const override;
  bool fork(const BlockTable& parent, int32_t num_computed, BlockTable* child,
            std::vector<BlockCopy>* copies) override;
  void free(BlockTable* table) override;

 private:
  // The first free run of `length` ids (lowest start), or -1.
  BlockId find_free_run(int32_t length) const;
  // Takes [start, start + length) out of the free runs into `table`.
  void take_run(BlockId start, int32_t length, BlockTable* table);
  void release_block(BlockId b) override;
  // Returns one block to the free runs, merging neighbours.
  void give_back(BlockId b);

  int32_t num_reserved_blocks_;
  std::vector<int32_t> refs_;             // [num_blocks] 0 or 1
  std::map<BlockId, int32_t> free_runs_;  // start -> length
  int32_t num_free_blocks_ = 0;           // sum of the runs' lengths
  int64_t num_copies_ = 0;
};

}  // namespace pvllm
