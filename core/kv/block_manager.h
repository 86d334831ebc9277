// BlockManager: the paged KV cache (kPaged). A free list, ref counts,
// copy-on-write and the prefix cache over a fixed pool of blocks; see
// kv_cache_manager.h for the calls the scheduler makes.
//
// Invariants:
//  - Every block is in exactly one of three states: free (on the free list,
//    ref 0, no hash), cached (ref 0 but holds a full block whose hash is
//    known; on the evictable LRU list, least recently freed first), or used
//    (ref > 0).
//  - A block with a hash is full and its K/V are computed: it is never
//    written again, so it may be shared by any number of sequences.
//  - Allocation takes from the free list first, then evicts the least
//    recently used cached block.
//  - A table's kReleasedBlock entries (sliding window) form its prefix and
//    own nothing: free, fork and release_blocks_before skip them, and no
//    write ever lands in one.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/kv/kv_cache_manager.h"

namespace pvllm {

class BlockManager final : public KvCacheManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
               int32_t sliding_window = 0);

  KvAllocator allocator() const override { return KvAllocator::kPaged; }
  bool prefix_caching() const override { return enable_prefix_caching_; }
  int32_t num_available_blocks() const override;
  int32_t ref_count(BlockId b) const override { return blocks_[b].ref; }
  KvCacheMetrics metrics() const override;

  // Walks the hash chain of `tokens` once. A revived cached block (one on
  // the LRU list) costs can_allocate one available block, as a new one does.
  PrefixMatch match_prefix(std::span<const int32_t> tokens) const override;
  bool can_allocate(const PrefixMatch& match, int32_t num_tokens,
                    int32_t num_blocks_to_keep) const override;
  // Counts prefix-cache queries (every full block the sequence could have
  // reused) and hits.
  int32_t allocate(const PrefixMatch& match, int32_t num_tokens, BlockTable* table) override;

  // A shared block in the written range is copied: this table moves to the
  // copy, the other owners keep the original.
  bool can_append(const BlockTable& table, int32_t num_computed, int32_t num_new) const override;
  bool append(BlockTable* table, int32_t num_computed, int32_t num_new,
              std::vector<BlockCopy>* copies) override;

  void cache_full_blocks(BlockTable* table, std::span<const int32_t> tokens,
                         int32_t num_computed) override;

  // Always possible: the child shares every block (ref + 1), nothing is
  // copied until one of them writes.
  bool can_fork(const BlockTable& parent) const override;
  bool fork(const BlockTable& parent, int32_t num_computed, BlockTable* child,
            std::vector<BlockCopy>* copies) override;
  // The same share, without the interface's arguments.
  void fork(const BlockTable& parent, BlockTable* child);

  // Last block first: a sequence's tail is the least likely to be shared by
  // a later prompt, so it is the first evicted. A hashed block whose ref
  // reaches 0 becomes cached; others return to the free list.
  void free(BlockTable* table) override;

  // Chained hash of one full block: parent hash and the block's token ids.
  static uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens);

 private:
  struct Block {
    int32_t ref = 0;
    bool hashed = false;
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;  // kept to verify a hash match exactly
    std::list<BlockId>::iterator lru_pos;
    bool in_lru = false;
  };

  // The matched blocks that lie wholly within the first `num_tokens` tokens.
  int32_t num_usable(const PrefixMatch& match, int32_t num_tokens) const;
  // Of `num_hit` matched blocks, how many lead wholly before the window of
  // the first position computed after them (not taken: released entries).
  int32_t num_before_window(int32_t num_hit) const;
  // Pops a free block, evicting the LRU cached block if needed; -1 if none.
  BlockId allocate_block();
  void release_block(BlockId b) override;
  // Looks up a cached-or-used block holding exactly (parent, tokens).
  BlockId find_cached(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const;

  bool enable_prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<BlockId> free_list_;  // stack: O(1) push / pop
  std::list<BlockId> lru_;          // cached blocks, least recently freed first
  std::unordered_multimap<uint64_t, BlockId> hash_to_block_;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t num_evictions_ = 0;
  int64_t num_cow_copies_ = 0;
};

}  // namespace pvllm
