// KvCacheManager: the KV cache's bookkeeping as the scheduler and the engine
// see it. It owns a fixed pool of `num_blocks` blocks of `block_size` token
// slots and hands out block ids to sequences' block tables; the K/V bytes
// themselves live in the backend.
//
// Two policies implement it (KvAllocator), behind one set of calls so the
// scheduler never knows which is in force:
//  - BlockManager (kPaged, the default): tables grow a block at a time as
//    tokens arrive; fork shares blocks copy-on-write; full blocks may be
//    reused across requests (prefix caching).
//  - ContiguousAllocator (kContiguous): the baseline paging is measured
//    against; each table reserves its whole context as one run of blocks.
//
// Check and act are two calls (can_allocate / allocate, can_append /
// append, can_fork / fork), and the check's finding is a value the act
// takes: match_prefix walks the prefix cache once, and both can_allocate
// and allocate consume its PrefixMatch. Running out of blocks is a value
// (false), never an error, so the scheduler can wait or preempt.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
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

// What the prefix cache holds of one token sequence, found by match_prefix:
// the cached blocks that hold its leading full blocks, in order, with their
// chained hashes. Valid until the next call that allocates, appends, forks
// or frees (any of those may evict a cached block).
struct PrefixMatch {
  int32_t num_tokens = 0;         // length of the sequence it was made for
  int32_t num_cached_tokens = 0;  // blocks.size() * block_size
  std::vector<BlockId> blocks;
  std::vector<uint64_t> hashes;
};

struct BlockManagerMetrics {
  int32_t num_blocks = 0;
  int32_t num_used_blocks = 0;    // ref > 0
  int32_t num_free_blocks = 0;    // free, not holding a cached block
  int32_t num_cached_blocks = 0;  // ref 0, hashed, evictable
  float utilization = 0.0f;       // used / total
  int64_t prefix_queries = 0;     // blocks looked up in the prefix cache
  int64_t prefix_hits = 0;        // blocks found there
  int64_t num_evictions = 0;      // cached blocks reclaimed for new use
  int64_t num_cow_copies = 0;     // blocks copied on write or at a contiguous fork
  int32_t largest_free_run = 0;   // contiguous: longest run of free ids; paged: free + cached
};

class KvCacheManager {
 public:
  // block_size must be a power of two in [8, 256]; num_blocks >= 1. Checked
  // by the caller (Engine validates the config); asserted here.
  KvCacheManager(int32_t num_blocks, int32_t block_size);
  virtual ~KvCacheManager() = default;

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  // Blocks needed to hold `num_tokens` slots.
  int32_t blocks_for(int32_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }
  // The KV slot of position `pos`: block * block_size + pos % block_size.
  int64_t slot(const BlockTable& table, int32_t pos) const {
    return static_cast<int64_t>(table.blocks[pos / block_size_]) * block_size_ + pos % block_size_;
  }

  virtual KvAllocator allocator() const = 0;
  virtual bool prefix_caching() const = 0;
  // Blocks that allocation can still take (free + evictable cached).
  virtual int32_t num_available_blocks() const = 0;
  virtual int32_t ref_count(BlockId b) const = 0;
  virtual BlockManagerMetrics metrics() const = 0;

  // The cached blocks holding the leading full blocks of `tokens`: whole
  // blocks only, and never all of `tokens` (the last token must be computed
  // to produce logits): at most floor((tokens.size() - 1) / block_size)
  // blocks. Empty without prefix caching. Changes nothing.
  virtual PrefixMatch match_prefix(std::span<const int32_t> tokens) const = 0;

  // Whether an empty table can be given blocks for the first `num_tokens`
  // (<= match.num_tokens) tokens of the sequence `match` was made for,
  // reusing the matched blocks that lie wholly within them and taking new
  // blocks for the rest; with num_blocks_to_keep > 0, also whether that
  // many blocks stay available afterwards.
  virtual bool can_allocate(const PrefixMatch& match, int32_t num_tokens,
                            int32_t num_blocks_to_keep) const = 0;
  // Does it: takes the matched blocks (ref + 1), then new blocks up to
  // `num_tokens`. Returns the number of leading tokens whose K/V came from
  // the cache, or -1 (changing nothing) when can_allocate(match,
  // num_tokens, 0) would say false.
  virtual int32_t allocate(const PrefixMatch& match, int32_t num_tokens, BlockTable* table) = 0;

  // Whether `table` can be grown so that positions
  // [num_computed, num_computed + num_new) are backed by blocks that this
  // sequence alone owns.
  virtual bool can_append(const BlockTable& table, int32_t num_computed, int32_t num_new) const = 0;
  // Does it; each block copy it needs (a shared block about to be written)
  // goes to `copies`, for the backend to run before the forward pass.
  // Returns false and changes nothing when can_append would say false.
  virtual bool append(BlockTable* table, int32_t num_computed, int32_t num_new,
                      std::vector<BlockCopy>* copies) = 0;

  // Registers the full blocks among the first `num_computed` tokens of
  // `tokens` that have no hash yet, so later requests can reuse them. A
  // no-op without prefix caching.
  virtual void cache_full_blocks(BlockTable* table, std::span<const int32_t> tokens,
                                 int32_t num_computed) = 0;

  // Whether `parent` can be forked now (n > 1 samples).
  virtual bool can_fork(const BlockTable& parent) const = 0;
  // Gives `child` (empty) the parent's K/V of its first `num_computed`
  // tokens: shared blocks (paged) or copies listed in `copies` (contiguous).
  // Returns false and changes nothing when can_fork would say false.
  virtual bool fork(const BlockTable& parent, int32_t num_computed, BlockTable* child,
                    std::vector<BlockCopy>* copies) = 0;

  // Releases every block of `table` and clears it.
  virtual void free(BlockTable* table) = 0;

 private:
  int32_t num_blocks_;
  int32_t block_size_;
};

// The manager for `allocator`. max_seq_len is the contiguous reservation per
// table (ignored by kPaged); prefix caching applies to kPaged only.
std::unique_ptr<KvCacheManager> make_kv_cache_manager(KvAllocator allocator, int32_t num_blocks,
                                                      int32_t block_size,
                                                      bool enable_prefix_caching,
                                                      int32_t max_seq_len);

}  // namespace pvllm
