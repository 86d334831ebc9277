// BlockManager: free list, ref counts, copy-on-write and the prefix cache.
// See block_manager.h for the invariants; every state change below keeps
// "free xor cached xor used" true for each block.
#include "core/kv/block_manager.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/base/check.h"

namespace pvllm {
namespace {

// The root of every hash chain; the first block's parent hash.
constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ULL;

// splitmix64 finaliser: a cheap mixer with full avalanche, so chained
// hashes of nearby token ids do not collide in practice.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                           int32_t sliding_window)
    : KvCacheManager(num_blocks, block_size, sliding_window),
      enable_prefix_caching_(enable_prefix_caching),
      blocks_(static_cast<size_t>(num_blocks)) {
  // Pushed in reverse so that a fresh pool hands out blocks 0, 1, 2, ...
  free_list_.reserve(static_cast<size_t>(num_blocks));
  for (BlockId b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

int32_t BlockManager::num_available_blocks() const {
  return static_cast<int32_t>(free_list_.size() + lru_.size());
}

uint64_t BlockManager::hash_block(uint64_t parent_hash, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent_hash ^ (static_cast<uint64_t>(tokens.size()) << 32));
  for (int32_t t : tokens) h = mix64(h ^ static_cast<uint32_t>(t));
  return h;
}

BlockId BlockManager::find_cached(uint64_t hash, uint64_t parent_hash,
                                  std::span<const int32_t> tokens) const {
  auto [begin, end] = hash_to_block_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    const Block& blk = blocks_[it->second];
    // The hash only narrows the search; the stored ids decide.
    if (blk.hashed && blk.hash == hash && blk.parent_hash == parent_hash &&
        std::equal(blk.tokens.begin(), blk.tokens.end(), tokens.begin(), tokens.end())) {
      return it->second;
    }
  }
  return -1;
}

PrefixMatch BlockManager::match_prefix(std::span<const int32_t> tokens) const {
  PrefixMatch match;
  match.num_tokens = static_cast<int32_t>(tokens.size());
  match.looked_up = true;
  if (!enable_prefix_caching_ || tokens.empty()) return match;
  const int32_t bs = block_size();
  const int32_t max_blocks = (match.num_tokens - 1) / bs;
  uint64_t parent = kRootHash;
  for (int32_t i = 0; i < max_blocks; ++i) {
    auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const uint64_t h = hash_block(parent, block_tokens);
    const BlockId b = find_cached(h, parent, block_tokens);
    if (b < 0) break;
    match.blocks.push_back(b);
    match.hashes.push_back(h);
    parent = h;
  }
  match.num_cached_tokens = static_cast<int32_t>(match.blocks.size()) * bs;
  return match;
}

int32_t BlockManager::num_usable(const PrefixMatch& match, int32_t num_tokens) const {
  PVLLM_CHECK(num_tokens >= 0 && num_tokens <= match.num_tokens,
              "num_tokens out of range of the matched sequence");
  return std::min(static_cast<int32_t>(match.blocks.size()), num_tokens / block_size());
}

int32_t BlockManager::num_before_window(int32_t num_hit) const {
  return first_needed_position(num_hit * block_size()) / block_size();
}

bool BlockManager::can_allocate(const PrefixMatch& match, int32_t num_tokens,
                                int32_t num_blocks_to_keep) const {
  PVLLM_CHECK(num_blocks_to_keep >= 0, "num_blocks_to_keep must be >= 0");
  const int32_t num_hit = num_usable(match, num_tokens);
  int32_t num_revived = 0;
  for (int32_t i = num_before_window(num_hit); i < num_hit; ++i) {
    num_revived += blocks_[match.blocks[i]].in_lru ? 1 : 0;
  }
  const int32_t num_new = blocks_for(num_tokens) - num_hit;
  return num_new + num_revived + num_blocks_to_keep <= num_available_blocks();
}

int32_t BlockManager::allocate(const PrefixMatch& match, int32_t num_tokens, BlockTable* table) {
  PVLLM_CHECK(table->blocks.empty() && table->hashes.empty(),
              "allocate needs an empty block table");
  if (!can_allocate(match, num_tokens, 0)) return -1;
  if (enable_prefix_caching_ && match.looked_up && match.num_tokens > 0) {
    prefix_queries_ += (match.num_tokens - 1) / block_size();
  }
  const int32_t num_hit = num_usable(match, num_tokens);
  prefix_hits_ += num_hit;
  // Matched blocks before the window: their K/V are never read, only their
  // hashes carry the chain on.
  const int32_t num_skipped = num_before_window(num_hit);
  for (int32_t i = 0; i < num_skipped; ++i) {
    table->blocks.push_back(kReleasedBlock);
    table->hashes.push_back(match.hashes[i]);
  }
  // Cached blocks first, so that taking new blocks cannot evict them.
  for (int32_t i = num_skipped; i < num_hit; ++i) {
    const BlockId b = match.blocks[i];
    Block& blk = blocks_[b];
    PVLLM_CHECK(blk.hashed && blk.hash == match.hashes[i],
                "a prefix match used after the cache changed");
    if (blk.in_lru) {
      lru_.erase(blk.lru_pos);
      blk.in_lru = false;
    }
    ++blk.ref;
    table->blocks.push_back(b);
    table->hashes.push_back(match.hashes[i]);
  }
  const int32_t num_needed = blocks_for(num_tokens);
  while (static_cast<int32_t>(table->blocks.size()) < num_needed) {
    const BlockId b = allocate_block();
    PVLLM_CHECK(b >= 0, "can_allocate said yes but the pool ran dry");
    table->blocks.push_back(b);
  }
  return num_hit * block_size();
}

bool BlockManager::can_append(const BlockTable& table, int32_t num_computed,
                              int32_t num_new) const {
  PVLLM_CHECK(num_computed >= 0 && num_new >= 0, "negative token count");
  if (num_new == 0) return true;
  const int32_t num_have = static_cast<int32_t>(table.blocks.size());
  const int32_t num_needed = blocks_for(num_computed + num_new);
  int32_t num_take = std::max(0, num_needed - num_have);
  // Shared blocks in the written range each need a private copy.
  const int32_t first = num_computed / block_size();
  const int32_t last = std::min(num_needed, num_have);
  for (int32_t i = first; i < last; ++i) {
    PVLLM_CHECK(table.blocks[i] != kReleasedBlock, "a write into a released block");
    if (blocks_[table.blocks[i]].ref > 1) ++num_take;
  }
  return num_take <= num_available_blocks();
}

bool BlockManager::append(BlockTable* table, int32_t num_computed, int32_t num_new,
                          std::vector<BlockCopy>* copies) {
  if (!can_append(*table, num_computed, num_new)) return false;
  if (num_new == 0) return true;
  const int32_t num_have = static_cast<int32_t>(table->blocks.size());
  const int32_t num_needed = blocks_for(num_computed + num_new);
  const int32_t first = num_computed / block_size();
  const int32_t last = std::min(num_needed, num_have);
  for (int32_t i = first; i < last; ++i) {
    const BlockId src = table->blocks[i];
    Block& blk = blocks_[src];
    PVLLM_CHECK(!blk.hashed, "a hashed (immutable) block lies in the written range");
    if (blk.ref <= 1) continue;
    const BlockId dst = allocate_block();
    PVLLM_CHECK(dst >= 0, "can_append said yes but the pool ran dry");
    // The other owners keep src; only this table moves to the copy.
    --blk.ref;
    table->blocks[i] = dst;
    copies->push_back(BlockCopy{src, dst});
    ++num_cow_copies_;
  }
  // A hash describes the block it was computed for; a copied block keeps the
  // same contents, so the table's hashes stay valid.
  while (static_cast<int32_t>(table->blocks.size()) < num_needed) {
    const BlockId b = allocate_block();
    PVLLM_CHECK(b >= 0, "can_append said yes but the pool ran dry");
    table->blocks.push_back(b);
  }
  return true;
}

void BlockManager::cache_full_blocks(BlockTable* table, std::span<const int32_t> tokens,
                                     int32_t num_computed) {
  if (!enable_prefix_caching_) return;
  PVLLM_CHECK(num_computed <= static_cast<int32_t>(tokens.size()),
              "more tokens computed than the sequence holds");
  const int32_t bs = block_size();
  const int32_t num_full = std::min(num_computed / bs, static_cast<int32_t>(table->blocks.size()));
  for (int32_t i = static_cast<int32_t>(table->hashes.size()); i < num_full; ++i) {
    const uint64_t parent = i == 0 ? kRootHash : table->hashes[i - 1];
    auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const uint64_t h = hash_block(parent, block_tokens);
    table->hashes.push_back(h);
    if (table->blocks[i] == kReleasedBlock) continue;  // the chain goes on without it
    Block& blk = blocks_[table->blocks[i]];
    if (blk.hashed) {
      // Shared with a table that registered it first (fork).
      PVLLM_CHECK(blk.hash == h, "a shared block was registered with other contents");
      continue;
    }
    // Another block already holds these contents (computed concurrently):
    // keep the first; this one returns to the free list when released.
    if (find_cached(h, parent, block_tokens) >= 0) continue;
    blk.hashed = true;
    blk.hash = h;
    blk.parent_hash = parent;
    blk.tokens.assign(block_tokens.begin(), block_tokens.end());
    hash_to_block_.emplace(h, table->blocks[i]);
  }
}

void BlockManager::fork(const BlockTable& parent, BlockTable* child) {
  PVLLM_CHECK(child->blocks.empty() && child->hashes.empty(), "fork needs an empty child");
  for (BlockId b : parent.blocks) {
    if (b == kReleasedBlock) continue;
    PVLLM_CHECK(blocks_[b].ref > 0, "fork of a table holding an unowned block");
    ++blocks_[b].ref;
  }
  child->blocks = parent.blocks;
  child->hashes = parent.hashes;
}

bool BlockManager::can_fork(const BlockTable& /*parent*/) const { return true; }

bool BlockManager::fork(const BlockTable& parent, int32_t /*num_computed*/, BlockTable* child,
                        std::vector<BlockCopy>* /*copies*/) {
  fork(parent, child);
  return true;
}

void BlockManager::free(BlockTable* table) {
  for (auto it = table->blocks.rbegin(); it != table->blocks.rend(); ++it) {
    if (*it != kReleasedBlock) release_block(*it);
  }
  table->blocks.clear();
  table->hashes.clear();
}

KvCacheMetrics BlockManager::metrics() const {
  KvCacheMetrics m;
  m.num_blocks = num_blocks();
  m.num_free_blocks = static_cast<int32_t>(free_list_.size());
  m.num_cached_blocks = static_cast<int32_t>(lru_.size());
  m.num_used_blocks = m.num_blocks - m.num_free_blocks - m.num_cached_blocks;
  m.utilization = static_cast<float>(m.num_used_blocks) / static_cast<float>(m.num_blocks);
  m.prefix_queries = prefix_queries_;
  m.prefix_hits = prefix_hits_;
  m.num_evictions = num_evictions_;
  m.num_cow_copies = num_cow_copies_;
  m.largest_free_run = num_available_blocks();
  return m;
}

BlockId BlockManager::allocate_block() {
  BlockId b = -1;
  if (!free_list_.empty()) {
    b = free_list_.back();
    free_list_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    Block& blk = blocks_[b];
    blk.in_lru = false;
    auto [begin, end] = hash_to_block_.equal_range(blk.hash);
    for (auto it = begin; it != end; ++it) {
      if (it->second == b) {
        hash_to_block_.erase(it);
        break;
      }
    }
    blk.hashed = false;
    blk.hash = 0;
    blk.parent_hash = 0;
    blk.tokens.clear();
    ++num_evictions_;
  } else {
    return -1;
  }
  Block& blk = blocks_[b];
  PVLLM_CHECK(blk.ref == 0 && !blk.hashed, "a block on the free path was still owned");
  blk.ref = 1;
  return b;
}

void BlockManager::release_block(BlockId b) {
  Block& blk = blocks_[b];
  PVLLM_CHECK(blk.ref > 0, "release of a block that nobody owns");
  if (--blk.ref > 0) return;
  if (blk.hashed) {
    blk.lru_pos = lru_.insert(lru_.end(), b);
    blk.in_lru = true;
  } else {
    free_list_.push_back(b);
  }
}

}  // namespace pvllm
