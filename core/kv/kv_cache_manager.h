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
//
// Sliding window (a model whose query at position p reads only the keys at
// p - sliding_window + 1 .. p): once a sequence's K/V are computed up to
// position P - 1, no later query reads a key before
// first_needed_position(P), so release_blocks_before hands every block
// wholly before it back to the pool and marks its table entry
// kReleasedBlock (-1). Released entries always form a prefix of the table;
// attention never reads them (core/backend/backend.h, BatchMetadata). The
// scheduler calls it after every step, so a sequence of any length holds
// only the blocks spanning its window and the chunk it writes: at most
// 1 + ceil((sliding_window - 2 + n) / block_size) blocks while it writes n
// tokens (one decode token: 1 + ceil((sliding_window - 1) / block_size) <=
// ceil(sliding_window / block_size) + 1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/kv/block_copy.h"

namespace pvllm {

// A block-table entry whose block was released because no query of its
// sequence reads it again (sliding window); never a block id.
constexpr BlockId kReleasedBlock = -1;

// How sequences reserve KV slots; see the file comment.
enum class KvAllocator : int32_t { kPaged = 0, kContiguous = 1 };

// One sequence's view of the cache: which block holds positions
// [i * block_size, (i + 1) * block_size). With a sliding window its leading
// entries may be kReleasedBlock (see the file comment).
struct BlockTable {
  std::vector<BlockId> blocks;
  // hashes[i] is the chained hash of full, computed block i (released or
  // not: the chain goes on through released blocks); only the first
  // hashes.size() blocks have one.
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
  bool looked_up = false;  // made by match_prefix (no_prefix_match skips the cache)
};

// A match of nothing for `num_tokens` tokens: for a sequence that must not
// take cached blocks (it needs the logits of every prompt position). Not
// counted as a prefix-cache query.
inline PrefixMatch no_prefix_match(int32_t num_tokens) {
  PrefixMatch m;
  m.num_tokens = num_tokens;
  return m;
}

struct KvCacheMetrics {
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
  // block_size must be a power of two in [8, 256]; num_blocks >= 1;
  // sliding_window >= 0 (0: full attention). Checked by the caller (Engine
  // validates the config); asserted here.
  KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t sliding_window);
  virtual ~KvCacheManager() = default;

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t sliding_window() const { return sliding_window_; }
  // The first position that any query at a position >= num_computed still
  // reads: num_computed - sliding_window + 1 (at least 0); 0 without a
  // window.
  int32_t first_needed_position(int32_t num_computed) const {
    return sliding_window_ > 0 ? std::max(0, num_computed - sliding_window_ + 1) : 0;
  }
  // Blocks needed to hold `num_tokens` slots.
  int32_t blocks_for(int32_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }
  // The KV slot of position `pos`: block * block_size + pos % block_size
  // (its block must not be released).
  int64_t slot(const BlockTable& table, int32_t pos) const {
    return static_cast<int64_t>(table.blocks[pos / block_size_]) * block_size_ + pos % block_size_;
  }

  virtual KvAllocator allocator() const = 0;
  virtual bool prefix_caching() const = 0;
  // Blocks that allocation can still take (free + evictable cached).
  virtual int32_t num_available_blocks() const = 0;
  virtual int32_t ref_count(BlockId b) const = 0;
  virtual KvCacheMetrics metrics() const = 0;

  // The cached blocks holding the leading full blocks of `tokens`: whole
  // blocks only, and never all of `tokens` (the last token must be computed
  // to produce logits): at most floor((tokens.size() - 1) / block_size)
  // blocks. Empty without prefix caching. Changes nothing.
  virtual PrefixMatch match_prefix(std::span<const int32_t> tokens) const = 0;

  // Whether an empty table can be given blocks for the first `num_tokens`
  // (<= match.num_tokens) tokens of the sequence `match` was made for,
  // reusing the matched blocks that lie wholly within them and taking new
  // blocks for the rest; with num_blocks_to_keep > 0, also whether that
  // many blocks stay available afterwards. With a sliding window, matched
  // blocks wholly before first_needed_position(cached tokens) are not taken
  // (their entries are kReleasedBlock), so they cost nothing.
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
  // `tokens` that have no hash yet, so later requests can reuse them (a
  // released block's hash is recorded in the table, the block is not
  // registered). A no-op without prefix caching.
  virtual void cache_full_blocks(BlockTable* table, std::span<const int32_t> tokens,
                                 int32_t num_computed) = 0;

  // Whether `parent` can be forked now (n > 1 samples).
  virtual bool can_fork(const BlockTable& parent) const = 0;
  // Gives `child` (empty) the parent's K/V of its first `num_computed`
  // tokens: shared blocks (paged) or copies listed in `copies` (contiguous).
  // The parent's released entries are released in the child too.
  // Returns false and changes nothing when can_fork would say false.
  virtual bool fork(const BlockTable& parent, int32_t num_computed, BlockTable* child,
                    std::vector<BlockCopy>* copies) = 0;

  // Releases the blocks of `table` that hold only positions before
  // `position` (entries [0, position / block_size)), as free does, and sets
  // their entries to kReleasedBlock; the table keeps its length and hashes.
  // Returns how many blocks it released (entries already released are
  // skipped). A shared block stays with its other owners; a cached one
  // becomes evictable. The caller guarantees no query reads them again.
  // The last of them is released first and the table's first last, the
  // order free uses.
  int32_t release_blocks_before(BlockTable* table, int32_t position);
  // release_blocks_before(table, first_needed_position(num_computed)): a
  // no-op without a sliding window.
  int32_t release_outside_window(BlockTable* table, int32_t num_computed) {
    return release_blocks_before(table, first_needed_position(num_computed));
  }

  // Speculative decoding's rollback: under kPaged, releases the blocks of
  // `table` past the first blocks_for(num_tokens) (they hold only slots of
  // rejected proposals), last first, and drops their entries (and any hash
  // of theirs). Returns how many; 0 under kContiguous, whose tables keep
  // their whole reservation.
  int32_t drop_blocks_after(BlockTable* table, int32_t num_tokens);

  // Releases every block of `table` (released entries skipped) and clears it.
  virtual void free(BlockTable* table) = 0;

 private:
  // Drops one table's hold on block `b`, as free does for each block.
  virtual void release_block(BlockId b) = 0;

  int32_t num_blocks_;
  int32_t block_size_;
  int32_t sliding_window_;
};

// The fewest blocks a pool needs so that one sequence of up to max_seq_len
// tokens can always run alone: its whole context, or with a sliding window
// under kPaged only the blocks spanning one window (the scheduler then cuts
// prefill chunks to what fits). kContiguous reserves max_seq_len whatever
// the window.
int32_t min_blocks_for_one_sequence(KvAllocator allocator, int32_t block_size, int32_t max_seq_len,
                                    int32_t sliding_window);

// The manager for `allocator`. max_seq_len is the contiguous reservation per
// table (ignored by kPaged); prefix caching applies to kPaged only;
// sliding_window is the model's (0: full attention).
std::unique_ptr<KvCacheManager> make_kv_cache_manager(KvAllocator allocator, int32_t num_blocks,
                                                      int32_t block_size,
                                                      bool enable_prefix_caching,
                                                      int32_t max_seq_len,
                                                      int32_t sliding_window = 0);

}  // namespace pvllm
