// BlockManager: the paged KV cache's bookkeeping. It owns a fixed pool of
// `num_blocks` blocks of `block_size` token slots and hands out block ids;
// the KV bytes themselves live in the backend.
//
// Invariants:
//  - Every block is in exactly one of three states: free (on the free list,
//    ref 0, no hash), cached (ref 0 but holds a full block whose hash is
//    known; on the evictable LRU list, least recently freed first), or used
//    (ref > 0).
//  - A block with a hash is full and its K/V are computed: it is never
//    written again, so it may be shared by any number of sequences.
//  - Allocation takes from the free list first, then evicts the least
//    recently used cached block. Running out is a value (false), never an
//    exception, so the scheduler can wait or preempt.
//
// Two reservation policies share this bookkeeping (KvAllocator):
//  - kPaged (the default): tables grow a block at a time as tokens arrive;
//    fork shares blocks copy-on-write; prefix caching may be on.
//  - kContiguous: the baseline that paging is measured against. A table
//    gets one run of consecutive block ids covering max_seq_len slots at
//    allocation (first fit), so it never grows; when no run fits, allocation
//    says no and the sequence waits. No prefix caching, no sharing: fork
//    reserves a new run and copies the blocks in use. The free blocks are
//    kept as runs (start -> length), merged when neighbours are freed.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

namespace pvllm {

using BlockId = int32_t;

// How sequences reserve KV slots; see the file comment.
enum class KvAllocator : int32_t { kPaged = 0, kContiguous = 1 };

// A request to copy one block's K/V into another (copy-on-write).
struct BlockCopy {
  BlockId src;
  BlockId dst;
};

// One sequence's view of the cache: which block holds positions
// [i * block_size, (i + 1) * block_size).
struct BlockTable {
  std::vector<BlockId> blocks;
  // hashes[i] is the chained hash of full, computed block i; only the
  // first hashes.size() blocks have one.
  std::vector<uint64_t> hashes;
};

struct BlockManagerMetrics {
  int32_t num_blocks = 0;
  int32_t num_used_blocks = 0;    // ref > 0
  int32_t num_free_blocks = 0;    // on the free list
  int32_t num_cached_blocks = 0;  // ref 0, hashed, evictable
  float utilization = 0.0f;       // used / total
  int64_t prefix_queries = 0;     // blocks looked up in the prefix cache
  int64_t prefix_hits = 0;        // blocks found there
  int64_t num_evictions = 0;      // cached blocks reclaimed for new use
  int64_t num_cow_copies = 0;     // blocks copied on write or at a contiguous fork
  int32_t largest_free_run = 0;   // contiguous: longest run of free ids; paged: free + cached
};

class BlockManager {
 public:
  // block_size must be a power of two in [8, 256]; num_blocks >= 1. Checked
  // by the caller (Engine validates the config); asserted here.
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);
  // With a policy. kContiguous reserves blocks_for(max_seq_len) blocks per
  // table (1 <= that <= num_blocks) and turns prefix caching off;
  // max_seq_len is unused with kPaged.
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
               KvAllocator allocator, int32_t max_seq_len);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  bool prefix_caching() const { return enable_prefix_caching_; }
  KvAllocator allocator() const { return allocator_; }
  // Blocks one table holds from allocation on (kContiguous); 0 with kPaged.
  int32_t num_reserved_blocks_per_table() const { return num_reserved_blocks_; }

  // Blocks needed to hold `num_tokens` slots.
  int32_t blocks_for(int32_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }
  // Blocks that allocation can still take (free + evictable cached). With
  // kContiguous they may be too scattered for a run: see can_allocate.
  int32_t num_available_blocks() const;

  // Prefix cache: how many leading tokens of `tokens` are held by cached
  // full blocks. Only whole blocks count, and never all of `tokens` (the last
  // token must be computed to produce logits): at most
  // floor((tokens.size() - 1) / block_size) blocks. Does not change state.
  int32_t num_cached_prefix_tokens(std::span<const int32_t> tokens) const;

  // Whether an empty table can be given blocks for the first `num_tokens`
  // of `tokens`, reusing cached leading blocks (see above) and taking new
  // blocks for the rest. Reviving a cached block that sits on the LRU list
  // costs one available block, as a new block does. With
  // num_blocks_to_keep > 0 (paged only), also that at least that many blocks
  // stay available afterwards.
  bool can_allocate(std::span<const int32_t> tokens, int32_t num_tokens,
                    int32_t num_blocks_to_keep = 0) const;
  // Does it: takes the cached leading blocks (ref + 1; a cached block leaves
  // the LRU list; queries and hits are counted), then new blocks up to
  // `num_tokens`. Returns the number of leading tokens whose K/V came from
  // the cache, or -1 (changing nothing) when can_allocate would say false.
  int32_t allocate(std::span<const int32_t> tokens, int32_t num_tokens, BlockTable* table);

  // Whether `table` can be grown so that positions
  // [num_computed, num_computed + num_new) are backed by blocks that this
  // sequence alone owns (new blocks, plus copies of shared blocks in range).
  bool can_append(const BlockTable& table, int32_t num_computed, int32_t num_new) const;
  // Does it: grows the table, and for each shared block in that range
  // allocates a copy, repoints this table only and records the copy in
  // `copies` (the backend must run them before writing K/V). Returns false
  // and changes nothing when can_append would have said false.
  bool append(BlockTable* table, int32_t num_computed, int32_t num_new,
              std::vector<BlockCopy>* copies);

  // Registers the full blocks among the first `num_computed` tokens of
  // `tokens` that have no hash yet, so later requests can reuse them.
  // A no-op when prefix caching is off.
  void cache_full_blocks(BlockTable* table, std::span<const int32_t> tokens, int32_t num_computed);

  // Shares every block of `parent` with `child` (ref + 1 each). `child`
  // must be empty. kPaged only (a contiguous fork copies: see below).
  void fork(const BlockTable& parent, BlockTable* child);

  // Whether `parent` can be forked now: always with kPaged; with
  // kContiguous when a free run for the child fits.
  bool can_fork(const BlockTable& parent) const;
  // Forks under either policy. kPaged: as fork() above, no copies.
  // kContiguous: reserves a run for `child` and records a copy of each of
  // the parent's blocks that hold any of the first `num_computed` tokens
  // (the backend must run them before the child's K/V is read). Returns
  // false and changes nothing when can_fork would say false.
  bool fork(const BlockTable& parent, int32_t num_computed, BlockTable* child,
            std::vector<BlockCopy>* copies);

  // Releases every block of `table` (ref - 1; at 0 a hashed block becomes
  // cached, others return to the free list) and clears it.
  void free(BlockTable* table);

  // The KV slot of position `pos`: block * block_size + pos % block_size.
  int64_t slot(const BlockTable& table, int32_t pos) const {
    return static_cast<int64_t>(table.blocks[pos / block_size_]) * block_size_ + pos % block_size_;
  }

  int32_t ref_count(BlockId b) const { return blocks_[b].ref; }
  BlockManagerMetrics metrics() const;

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

  // Pops a free block, evicting the LRU cached block if needed; -1 if none.
  // kPaged only.
  BlockId allocate_block();
  // kContiguous: the first free run of `length` ids (lowest start), or -1.
  BlockId find_free_run(int32_t length) const;
  // kContiguous: takes [start, start + length) out of the free runs into
  // `table` (ref 1 each). The run must be free.
  void take_run(BlockId start, int32_t length, BlockTable* table);
  // kContiguous: returns one block to the free runs, merging neighbours.
  void give_back_block(BlockId b);
  void release_block(BlockId b);
  // Looks up a cached-or-used block holding exactly (parent, tokens).
  BlockId find_cached(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const;

  int32_t num_blocks_;
  int32_t block_size_;
  bool enable_prefix_caching_;
  KvAllocator allocator_ = KvAllocator::kPaged;
  int32_t num_reserved_blocks_ = 0;  // kContiguous: blocks per table
  // kContiguous: free ids as start -> length; disjoint, and adjacent runs
  // are always merged.
  std::map<BlockId, int32_t> free_runs_;
  int32_t num_free_in_runs_ = 0;  // kContiguous: sum of the lengths
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
