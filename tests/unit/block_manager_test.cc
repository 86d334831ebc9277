// BlockManager: growth, slots, ref counts, copy-on-write, prefix cache.
#include "core/kv/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

namespace pvllm {
namespace {

// Token ids [first, first + n).
std::vector<int32_t> iota_tokens(int32_t n, int32_t first = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void expect_consistent(const BlockManager& bm) {
  const KvCacheMetrics m = bm.metrics();
  EXPECT_EQ(m.num_used_blocks + m.num_free_blocks + m.num_cached_blocks, m.num_blocks);
  EXPECT_EQ(bm.num_available_blocks(), m.num_free_blocks + m.num_cached_blocks);
}

// Allocates a table for all of `tokens` as if prefilled, marks it computed
// and registers its full blocks; returns the cached-token count.
int32_t prefill(BlockManager* bm, const std::vector<int32_t>& tokens, BlockTable* table) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t cached = bm->allocate(bm->match_prefix(tokens), n, table);
  bm->cache_full_blocks(table, tokens, n);
  return cached;
}

class BlockGrowthTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(BlockGrowthTest, TableGrowsExactlyAtBlockBoundaries) {
  const int32_t bs = GetParam();
  const int32_t num_blocks = 8;
  BlockManager bm(num_blocks, bs, /*enable_prefix_caching=*/false);
  BlockTable table;
  const auto tokens = iota_tokens(1);
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens), 1, &table), 0);
  EXPECT_EQ(table.blocks.size(), 1u);
  std::vector<BlockCopy> copies;
  // Decode one token at a time: position p needs p / bs + 1 blocks.
  for (int32_t p = 1; p < num_blocks * bs; ++p) {
    ASSERT_TRUE(bm.append(&table, p, 1, &copies)) << "position " << p;
    EXPECT_EQ(static_cast<int32_t>(table.blocks.size()), p / bs + 1) << "position " << p;
  }
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.metrics().num_used_blocks, num_blocks);
  EXPECT_FALSE(bm.can_append(table, num_blocks * bs, 1));
}

TEST_P(BlockGrowthTest, ChunkAppendNeedsCeilOfTokensOverBlockSize) {
  const int32_t bs = GetParam();
  BlockManager bm(16, bs, false);
  BlockTable table;
  const auto tokens = iota_tokens(3 * bs);
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens), bs - 1, &table), 0);
  EXPECT_EQ(table.blocks.size(), 1u);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.append(&table, bs - 1, 1, &copies));  // exactly fills block 0
  EXPECT_EQ(table.blocks.size(), 1u);
  ASSERT_TRUE(bm.append(&table, bs, bs + 1, &copies));  // one past block 1
  EXPECT_EQ(table.blocks.size(), 3u);
  EXPECT_EQ(bm.blocks_for(2 * bs + 1), 3);
  EXPECT_EQ(bm.blocks_for(2 * bs), 2);
  EXPECT_EQ(bm.blocks_for(0), 0);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, BlockGrowthTest, ::testing::Values(8, 16, 32, 64, 128, 256));

TEST(BlockManagerTest, SlotMapsPositionIntoItsBlock) {
  const int32_t bs = 16;
  BlockManager bm(8, bs, false);
  BlockTable a, b;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(40)), 40, &a), 0);
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(20)), 20, &b), 0);
  std::set<int64_t> slots;
  for (const BlockTable* t : {&a, &b}) {
    const int32_t n = t == &a ? 40 : 20;
    for (int32_t pos = 0; pos < n; ++pos) {
      const int64_t s = bm.slot(*t, pos);
      EXPECT_EQ(s / bs, t->blocks[pos / bs]);
      EXPECT_EQ(s % bs, pos % bs);
      slots.insert(s);
    }
  }
  EXPECT_EQ(slots.size(), 60u) << "two sequences share a slot";
}

TEST(BlockManagerTest, FreeReturnsBlocksToPool) {
  BlockManager bm(10, 16, false);
  BlockTable table;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(50)), 50, &table), 0);
  EXPECT_EQ(bm.metrics().num_used_blocks, 4);
  EXPECT_EQ(bm.num_available_blocks(), 6);
  for (BlockId b : table.blocks) EXPECT_EQ(bm.ref_count(b), 1);
  const auto held = table.blocks;
  bm.free(&table);
  EXPECT_TRUE(table.blocks.empty());
  EXPECT_EQ(bm.num_available_blocks(), 10);
  EXPECT_EQ(bm.metrics().num_free_blocks, 10);
  for (BlockId b : held) EXPECT_EQ(bm.ref_count(b), 0);
  expect_consistent(bm);
}

TEST(BlockManagerTest, FreedBlocksAreReused) {
  BlockManager bm(4, 8, false);
  for (int round = 0; round < 50; ++round) {
    BlockTable table;
    ASSERT_TRUE(bm.can_allocate(bm.match_prefix(iota_tokens(32)), 32, 0)) << "round " << round;
    ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(32)), 32, &table), 0);
    std::set<BlockId> distinct(table.blocks.begin(), table.blocks.end());
    EXPECT_EQ(distinct.size(), 4u);
    EXPECT_FALSE(bm.can_allocate(bm.match_prefix(iota_tokens(1)), 1, 0));
    bm.free(&table);
  }
  expect_consistent(bm);
}

TEST(BlockManagerTest, ExhaustionIsAValueAndChangesNothing) {
  BlockManager bm(3, 8, false);
  BlockTable a, b;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(16)), 16, &a), 0);
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(8)), 8, &b), 0);
  EXPECT_EQ(bm.num_available_blocks(), 0);
  EXPECT_FALSE(bm.can_allocate(bm.match_prefix(iota_tokens(1)), 1, 0));
  BlockTable c;
  EXPECT_EQ(bm.allocate(bm.match_prefix(iota_tokens(1)), 1, &c), -1);
  EXPECT_TRUE(c.blocks.empty());

  // Appending inside the last block needs nothing; past it needs a block.
  EXPECT_TRUE(bm.can_append(a, 15, 1));
  EXPECT_FALSE(bm.can_append(a, 16, 1));
  const auto before = a.blocks;
  const auto m_before = bm.metrics();
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(bm.append(&a, 16, 1, &copies));
  EXPECT_EQ(a.blocks, before);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.metrics().num_used_blocks, m_before.num_used_blocks);
  EXPECT_EQ(bm.metrics().num_free_blocks, m_before.num_free_blocks);

  bm.free(&b);
  EXPECT_TRUE(bm.append(&a, 16, 1, &copies));
  EXPECT_EQ(a.blocks.size(), 3u);
}

TEST(BlockManagerTest, CanAllocateCanKeepBlocksInReserve) {
  BlockManager bm(4, 8, false);
  BlockTable a;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(8)), 8, &a), 0);            // 3 left
  EXPECT_TRUE(bm.can_allocate(bm.match_prefix(iota_tokens(16, 100)), 16, 1));   // 2 + 1 kept <= 3
  EXPECT_FALSE(bm.can_allocate(bm.match_prefix(iota_tokens(16, 100)), 16, 2));  // 2 + 2 kept > 3
  EXPECT_TRUE(bm.can_allocate(bm.match_prefix(iota_tokens(16, 100)), 16, 0));
  EXPECT_TRUE(bm.can_allocate(bm.match_prefix(iota_tokens(24, 100)), 24, 0));
  EXPECT_FALSE(bm.can_allocate(bm.match_prefix(iota_tokens(24, 100)), 24, 1));
}

TEST(BlockManagerTest, ForkSharesBlocksAndCountsRefs) {
  BlockManager bm(8, 8, false);
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(20)), 20, &parent), 0);
  const int32_t used = bm.metrics().num_used_blocks;
  bm.fork(parent, &child);
  EXPECT_EQ(child.blocks, parent.blocks);
  for (BlockId b : parent.blocks) EXPECT_EQ(bm.ref_count(b), 2);
  EXPECT_EQ(bm.metrics().num_used_blocks, used) << "fork must not take blocks";

  bm.free(&parent);
  for (BlockId b : child.blocks) EXPECT_EQ(bm.ref_count(b), 1);
  EXPECT_EQ(bm.metrics().num_used_blocks, used) << "child still holds every block";
  bm.free(&child);
  EXPECT_EQ(bm.metrics().num_used_blocks, 0);
  expect_consistent(bm);
}

TEST(BlockManagerTest, SharedLastBlockIsCopiedOnFirstWrite) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, false);
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(12)), 12, &parent), 0);  // block 1 holds 4 of 8
  bm.fork(parent, &child);
  const BlockId shared_full = parent.blocks[0];
  const BlockId shared_last = parent.blocks[1];

  // The child writes position 12: inside the shared last block.
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(bm.can_append(child, 12, 1));
  ASSERT_TRUE(bm.append(&child, 12, 1, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, shared_last);
  EXPECT_NE(copies[0].dst, shared_last);
  EXPECT_EQ(child.blocks[1], copies[0].dst);
  EXPECT_EQ(child.blocks[0], shared_full) << "untouched full block stays shared";
  EXPECT_EQ(parent.blocks[1], shared_last) << "only the writer is repointed";
  EXPECT_EQ(bm.ref_count(shared_last), 1);
  EXPECT_EQ(bm.ref_count(copies[0].dst), 1);
  EXPECT_EQ(bm.ref_count(shared_full), 2);
  EXPECT_EQ(bm.metrics().num_cow_copies, 1);

  // The parent now owns its last block alone: no copy.
  copies.clear();
  ASSERT_TRUE(bm.append(&parent, 12, 1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(parent.blocks[1], shared_last);
  expect_consistent(bm);
}

TEST(BlockManagerTest, CopyOnWriteCountsTowardCanAppend) {
  BlockManager bm(2, 8, false);
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(12)), 12, &parent), 0);  // both blocks
  bm.fork(parent, &child);
  EXPECT_FALSE(bm.can_append(child, 12, 1)) << "the copy needs a free block";
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(bm.append(&child, 12, 1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(child.blocks, parent.blocks);
  EXPECT_EQ(bm.ref_count(parent.blocks[1]), 2);
}

TEST(BlockManagerTest, IdenticalPromptReusesCachedBlocks) {
  const int32_t bs = 16;
  BlockManager bm(16, bs, true);
  const auto prompt = iota_tokens(3 * bs + 5);
  BlockTable a;
  EXPECT_EQ(prefill(&bm, prompt, &a), 0);
  EXPECT_EQ(a.hashes.size(), 3u);
  EXPECT_EQ(bm.metrics().prefix_hits, 0);
  bm.free(&a);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 3);

  EXPECT_EQ(bm.match_prefix(prompt).num_cached_tokens, 3 * bs);
  BlockTable b;
  const auto queries_before = bm.metrics().prefix_queries;
  EXPECT_EQ(bm.allocate(bm.match_prefix(prompt), static_cast<int32_t>(prompt.size()), &b), 3 * bs);
  EXPECT_EQ(bm.metrics().prefix_hits, 3);
  EXPECT_EQ(bm.metrics().prefix_queries - queries_before, 3);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 0) << "revived blocks leave the LRU list";
  EXPECT_EQ(b.blocks.size(), 4u);
  EXPECT_EQ(b.hashes.size(), 3u);
  expect_consistent(bm);
}

TEST(BlockManagerTest, RunningSequenceBlocksAreSharedByPrefixHit) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, true);
  const auto prompt = iota_tokens(2 * bs + 1);
  BlockTable a, b;
  prefill(&bm, prompt, &a);
  EXPECT_EQ(bm.allocate(bm.match_prefix(prompt), 2 * bs + 1, &b), 2 * bs);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(b.blocks[1], a.blocks[1]);
  EXPECT_NE(b.blocks[2], a.blocks[2]) << "the partial last block is never shared";
  EXPECT_EQ(bm.ref_count(a.blocks[0]), 2);
  bm.free(&a);
  EXPECT_EQ(bm.ref_count(b.blocks[0]), 1);
  bm.free(&b);
  EXPECT_EQ(bm.metrics().num_used_blocks, 0);
  expect_consistent(bm);
}

TEST(BlockManagerTest, FullBlockPromptNeverTakesItsLastBlockFromCache) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, true);
  const auto prompt = iota_tokens(2 * bs);
  BlockTable a;
  prefill(&bm, prompt, &a);
  EXPECT_EQ(a.hashes.size(), 2u);
  bm.free(&a);
  // The last token must be computed for its logits: only block 0 counts.
  EXPECT_EQ(bm.match_prefix(prompt).num_cached_tokens, bs);
  BlockTable b;
  EXPECT_EQ(bm.allocate(bm.match_prefix(prompt), 2 * bs, &b), bs);
  EXPECT_EQ(bm.metrics().prefix_hits, 1);
  // One token longer: block 1 is no longer the last and may be reused.
  EXPECT_EQ(bm.match_prefix(iota_tokens(2 * bs + 1)).num_cached_tokens, 2 * bs);
}

TEST(BlockManagerTest, HashChainsOverThePrefix) {
  const int32_t bs = 8;
  BlockManager bm(16, bs, true);
  const auto p = iota_tokens(bs, 100);
  const auto q = iota_tokens(bs, 200);
  const auto x = iota_tokens(bs, 300);
  BlockTable a;
  prefill(&bm, concat(concat(p, x), {1}), &a);
  bm.free(&a);
  // Same second block after a different first block: not a hit.
  EXPECT_EQ(bm.match_prefix(concat(concat(q, x), {1})).num_cached_tokens, 0);
  EXPECT_EQ(bm.match_prefix(concat(concat(p, x), {1})).num_cached_tokens, 2 * bs);
  // A different second block after the same first: one block.
  EXPECT_EQ(bm.match_prefix(concat(concat(p, q), {1})).num_cached_tokens, bs);
  EXPECT_NE(BlockManager::hash_block(1, x), BlockManager::hash_block(2, x));
  EXPECT_EQ(BlockManager::hash_block(7, x), BlockManager::hash_block(7, x));
}

TEST(BlockManagerTest, EvictsCachedBlocksInLeastRecentlyFreedOrder) {
  const int32_t bs = 8;
  BlockManager bm(3, bs, true);
  const auto a_tokens = iota_tokens(bs, 0);
  const auto b_tokens = iota_tokens(bs, 1000);
  BlockTable a, b, c, d;
  prefill(&bm, a_tokens, &a);
  prefill(&bm, b_tokens, &b);
  bm.free(&a);  // freed first: least recently used
  bm.free(&b);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 2);
  EXPECT_EQ(bm.num_available_blocks(), 3);

  // The free list is used before any cached block is evicted.
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(1, 5000)), 1, &c), 0);
  EXPECT_EQ(bm.metrics().num_evictions, 0);
  EXPECT_EQ(bm.match_prefix(concat(a_tokens, {1})).num_cached_tokens, bs);

  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(1, 6000)), 1, &d), 0);
  EXPECT_EQ(bm.metrics().num_evictions, 1);
  EXPECT_EQ(bm.match_prefix(concat(a_tokens, {1})).num_cached_tokens, 0) << "a was evicted first";
  EXPECT_EQ(bm.match_prefix(concat(b_tokens, {1})).num_cached_tokens, bs) << "b is still cached";
  expect_consistent(bm);
}

TEST(BlockManagerTest, FreedSequenceLosesItsTailBeforeItsHead) {
  const int32_t bs = 8;
  BlockManager bm(2, bs, true);
  const auto prompt = iota_tokens(2 * bs);
  BlockTable a, other;
  prefill(&bm, prompt, &a);
  bm.free(&a);
  ASSERT_EQ(bm.metrics().num_cached_blocks, 2);
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(1, 900)), 1, &other), 0);  // evicts one
  // The head block is still there, so the prefix still partly hits.
  EXPECT_EQ(bm.match_prefix(concat(prompt, {1})).num_cached_tokens, bs);
}

TEST(BlockManagerTest, RevivingACachedBlockCostsAnAvailableBlock) {
  const int32_t bs = 8;
  BlockManager bm(2, bs, true);
  const auto prompt = concat(iota_tokens(bs), {1});
  BlockTable a;
  prefill(&bm, prompt, &a);
  bm.free(&a);                                                       // 1 cached + 1 free
  EXPECT_TRUE(bm.can_allocate(bm.match_prefix(prompt), bs + 1, 0));  // revive 1 + 1 new = 2
  BlockTable other;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(1, 900)), 1, &other),
            0);  // takes the free block
  EXPECT_FALSE(bm.can_allocate(bm.match_prefix(prompt), bs + 1, 0))
      << "revive + new block > 1 available";
  BlockTable b;
  EXPECT_EQ(bm.allocate(bm.match_prefix(prompt), bs + 1, &b), -1);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 1) << "a refused allocate changes nothing";
}

TEST(BlockManagerTest, OneMatchServesTheCheckAndTheAllocation) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, true);
  const auto prompt = concat(iota_tokens(2 * bs), {7, 7});
  BlockTable a;
  prefill(&bm, prompt, &a);
  const PrefixMatch match = bm.match_prefix(prompt);
  EXPECT_EQ(match.num_tokens, static_cast<int32_t>(prompt.size()));
  EXPECT_EQ(match.num_cached_tokens, 2 * bs);
  EXPECT_EQ(match.blocks, (std::vector<BlockId>{a.blocks[0], a.blocks[1]}));
  EXPECT_EQ(match.hashes, a.hashes);
  BlockTable b;
  ASSERT_TRUE(bm.can_allocate(match, match.num_tokens, 0));
  EXPECT_EQ(bm.allocate(match, match.num_tokens, &b), 2 * bs);
  EXPECT_EQ(b.hashes, a.hashes);
}

TEST(BlockManagerDeathTest, AMatchUsedAfterItsBlockWasEvictedIsABrokenInvariant) {
  const int32_t bs = 8;
  BlockManager bm(2, bs, true);
  const auto prompt = concat(iota_tokens(bs), {1});
  BlockTable a, other, b;
  prefill(&bm, prompt, &a);
  bm.free(&a);
  const PrefixMatch match = bm.match_prefix(prompt);
  ASSERT_EQ(match.num_cached_tokens, bs);
  // Two new blocks: the free one, then the cached one is evicted.
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(2 * bs, 500)), 2 * bs, &other), 0);
  bm.free(&other);
  EXPECT_DEATH(bm.allocate(match, bs + 1, &b), "prefix match used after the cache changed");
}

TEST(BlockManagerTest, PrefixCachingOffNeverHitsAndFreesStraightToFreeList) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, false);
  const auto prompt = iota_tokens(3 * bs + 1);
  BlockTable a, b;
  prefill(&bm, prompt, &a);
  EXPECT_TRUE(a.hashes.empty());
  bm.free(&a);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 0);
  EXPECT_EQ(bm.metrics().num_free_blocks, 8);
  EXPECT_EQ(bm.match_prefix(prompt).num_cached_tokens, 0);
  EXPECT_EQ(bm.allocate(bm.match_prefix(prompt), 3 * bs + 1, &b), 0);
  EXPECT_EQ(bm.metrics().prefix_hits, 0);
}

TEST(BlockManagerTest, EmptySequenceMatchesNothingAndTakesNoBlocks) {
  const int32_t bs = 8;
  BlockManager bm(4, bs, true);
  BlockTable a;
  prefill(&bm, iota_tokens(2 * bs + 1), &a);
  bm.free(&a);  // two cached blocks
  const int64_t queries_before = bm.metrics().prefix_queries;
  const PrefixMatch match = bm.match_prefix({});
  EXPECT_TRUE(match.looked_up);
  EXPECT_EQ(match.num_tokens, 0);
  EXPECT_EQ(match.num_cached_tokens, 0);
  EXPECT_TRUE(match.blocks.empty());
  EXPECT_TRUE(bm.can_allocate(match, 0, 4)) << "nothing to take: the whole pool stays available";
  BlockTable b;
  EXPECT_EQ(bm.allocate(match, 0, &b), 0);
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(bm.metrics().prefix_queries, queries_before) << "no full block to look up";
  EXPECT_EQ(bm.metrics().prefix_hits, 0);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 2) << "nothing was revived or evicted";
  expect_consistent(bm);
}

TEST(BlockManagerTest, AppendingNoTokensNeedsNothingEvenFromAFullPool) {
  const int32_t bs = 8;
  BlockManager bm(2, bs, false);
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(12)), 12, &parent), 0);  // both blocks
  bm.fork(parent, &child);
  ASSERT_EQ(bm.num_available_blocks(), 0);
  // Writing a token into the shared block would need a copy (see
  // CopyOnWriteCountsTowardCanAppend); writing none needs nothing.
  EXPECT_TRUE(bm.can_append(child, 12, 0));
  EXPECT_TRUE(bm.can_append(child, 16, 0)) << "even at a block boundary";
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(bm.append(&child, 12, 0, &copies));
  EXPECT_TRUE(bm.append(&child, 16, 0, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(child.blocks, parent.blocks);
  EXPECT_EQ(bm.ref_count(parent.blocks[1]), 2) << "still shared";
  EXPECT_EQ(bm.metrics().num_cow_copies, 0);
}

TEST(BlockManagerTest, NoPrefixMatchTakesNoCachedBlockAndCountsNoQuery) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, true);
  const auto prompt = iota_tokens(3 * bs + 1);
  BlockTable a;
  prefill(&bm, prompt, &a);
  bm.free(&a);
  ASSERT_EQ(bm.match_prefix(prompt).num_cached_tokens, 3 * bs);
  const KvCacheMetrics before = bm.metrics();
  BlockTable b;
  EXPECT_EQ(bm.allocate(no_prefix_match(3 * bs + 1), 3 * bs + 1, &b), 0);
  EXPECT_EQ(b.blocks.size(), 4u);
  EXPECT_TRUE(b.hashes.empty());
  EXPECT_EQ(bm.metrics().prefix_queries, before.prefix_queries);
  EXPECT_EQ(bm.metrics().prefix_hits, before.prefix_hits);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 3) << "new blocks come from the free list first";
  expect_consistent(bm);
}

TEST(BlockManagerTest, ChildForkedBeforeCachingTakesTheHashesItsParentRegistered) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, true);
  const auto tokens = iota_tokens(2 * bs + 4);
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens), 2 * bs + 4, &parent), 0);
  bm.fork(parent, &child);  // nothing registered yet: the child has no hashes
  ASSERT_TRUE(child.hashes.empty());
  bm.cache_full_blocks(&parent, tokens, 2 * bs + 4);
  ASSERT_EQ(parent.hashes.size(), 2u);
  // The shared blocks are already registered by the parent: the child only
  // records their hashes.
  bm.cache_full_blocks(&child, tokens, 2 * bs + 4);
  EXPECT_EQ(child.hashes, parent.hashes);
  EXPECT_EQ(child.blocks, parent.blocks);
  const auto shared = parent.blocks;
  bm.free(&parent);
  bm.free(&child);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 2) << "each full block is cached once";
  const PrefixMatch match = bm.match_prefix(concat(tokens, {1}));
  EXPECT_EQ(match.blocks, (std::vector<BlockId>{shared[0], shared[1]}));
  expect_consistent(bm);
}

TEST(BlockManagerTest, ABlockComputedTwiceConcurrentlyIsCachedOnce) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, true);
  const auto prompt = iota_tokens(2 * bs + 1);
  BlockTable a, b;
  // Both are admitted before either has computed anything: no hit.
  ASSERT_EQ(bm.allocate(bm.match_prefix(prompt), 2 * bs + 1, &a), 0);
  ASSERT_EQ(bm.allocate(bm.match_prefix(prompt), 2 * bs + 1, &b), 0);
  bm.cache_full_blocks(&a, prompt, 2 * bs + 1);
  bm.cache_full_blocks(&b, prompt, 2 * bs + 1);
  EXPECT_EQ(b.hashes, a.hashes) << "the chain is recorded in both tables";
  EXPECT_EQ(bm.match_prefix(prompt).blocks, (std::vector<BlockId>{a.blocks[0], a.blocks[1]}))
      << "the first registered copy is the one found";
  // b's duplicates were never registered: they go straight back to the
  // free list, not to the cache.
  bm.free(&b);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 0);
  EXPECT_EQ(bm.metrics().num_free_blocks, 5);
  bm.free(&a);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 2);
  EXPECT_EQ(bm.match_prefix(prompt).num_cached_tokens, 2 * bs);
  expect_consistent(bm);
}

// The chained block hash (a copy of block_manager.cc's, to construct
// collisions) and its inverse: splitmix64's finaliser is a bijection.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t unxorshift(uint64_t y, int shift) {
  uint64_t x = y;
  for (int s = shift; s < 64; s += shift) x ^= y >> s;
  return x;
}

uint64_t inverse_mod_2_64(uint64_t odd) {
  uint64_t x = odd;  // right to 3 bits; each Newton step doubles them
  for (int i = 0; i < 5; ++i) x *= 2 - odd * x;
  return x;
}

uint64_t unmix64(uint64_t x) {
  x = unxorshift(x, 31) * inverse_mod_2_64(0x94d049bb133111ebULL);
  x = unxorshift(x, 27) * inverse_mod_2_64(0xbf58476d1ce4e5b9ULL);
  return unxorshift(x, 30) - 0x9e3779b97f4a7c15ULL;
}

// A block of `bs` tokens, starting with `first`, whose hash after `parent`
// is `target`: each token moves only the low 32 bits of the chained state,
// so a meet in the middle on the high 32 bits of the state before token
// bs - 2 finds one (forward over token bs - 3, backward over token bs - 1).
std::vector<int32_t> colliding_block(uint64_t parent, uint64_t target, int32_t bs, int32_t first) {
  std::vector<int32_t> block = iota_tokens(bs, first);
  uint64_t s = mix64(parent ^ (static_cast<uint64_t>(bs) << 32));
  for (int32_t k = 0; k < bs - 3; ++k) s = mix64(s ^ static_cast<uint32_t>(block[k]));
  std::unordered_map<uint32_t, uint32_t> forward;  // high 32 bits of the state -> token bs - 3
  for (uint32_t i = 0; i < (1u << 18); ++i) forward.emplace(mix64(s ^ i) >> 32, i);
  const uint64_t before_last = unmix64(target);
  for (uint32_t j = 0; j < (1u << 26); ++j) {
    const uint64_t v = unmix64(before_last ^ j);  // state before token bs - 2, xor that token
    const auto it = forward.find(static_cast<uint32_t>(v >> 32));
    if (it == forward.end()) continue;
    block[bs - 3] = static_cast<int32_t>(it->second);
    block[bs - 2] = static_cast<int32_t>(static_cast<uint32_t>(v ^ mix64(s ^ it->second)));
    block[bs - 1] = static_cast<int32_t>(j);
    return block;
  }
  return {};
}

TEST(BlockManagerTest, HashCollisionNeverServesAnotherBlocksKv) {
  const int32_t bs = 8;
  BlockManager bm(8, bs, true);
  const auto head = iota_tokens(bs, 100);
  const auto body = iota_tokens(bs, 200);
  BlockTable x;
  prefill(&bm, concat(concat(head, body), {1}), &x);  // registers head and body
  ASSERT_EQ(x.hashes.size(), 2u);

  // Other tokens after the same parent, with the same hash as body.
  const auto impostor = colliding_block(x.hashes[0], x.hashes[1], bs, 300);
  ASSERT_EQ(impostor.size(), static_cast<size_t>(bs));
  ASSERT_NE(impostor, body);
  ASSERT_EQ(BlockManager::hash_block(x.hashes[0], impostor), x.hashes[1])
      << "the test's copy of the block hash no longer matches block_manager.cc";
  const PrefixMatch same_parent = bm.match_prefix(concat(concat(head, impostor), {1}));
  EXPECT_EQ(same_parent.blocks, (std::vector<BlockId>{x.blocks[0]}))
      << "the stored token ids must reject the colliding block";

  // The same hash after another parent: the stored parent hash rejects it.
  const auto other_head = iota_tokens(bs, 400);
  BlockTable w;
  prefill(&bm, concat(other_head, {1}), &w);
  ASSERT_EQ(w.hashes.size(), 1u);
  const auto stranger = colliding_block(w.hashes[0], x.hashes[1], bs, 500);
  ASSERT_EQ(BlockManager::hash_block(w.hashes[0], stranger), x.hashes[1]);
  const PrefixMatch other_parent = bm.match_prefix(concat(concat(other_head, stranger), {1}));
  EXPECT_EQ(other_parent.blocks, (std::vector<BlockId>{w.blocks[0]}));
}

// Two cached blocks under one hash: each is found by its own tokens, and
// evicting either (whichever the hash map lists first) unregisters that
// one only.
TEST(BlockManagerTest, CollidingCachedBlocksAreEvictedOneByOne) {
  const int32_t bs = 8;
  const auto head = iota_tokens(bs, 100);
  const auto body = iota_tokens(bs, 200);
  for (const bool x_freed_first : {true, false}) {
    SCOPED_TRACE(x_freed_first ? "x freed first" : "y freed first");
    BlockManager bm(5, bs, true);
    const auto x_tokens = concat(concat(head, body), {1});
    BlockTable x, y;
    prefill(&bm, x_tokens, &x);
    const auto impostor = colliding_block(x.hashes[0], x.hashes[1], bs, 300);
    ASSERT_EQ(BlockManager::hash_block(x.hashes[0], impostor), x.hashes[1]);
    const auto y_tokens = concat(concat(head, impostor), {2});
    EXPECT_EQ(prefill(&bm, y_tokens, &y), bs) << "y shares only the head";
    ASSERT_EQ(y.hashes, x.hashes) << "the two chains collide";
    ASSERT_NE(y.blocks[1], x.blocks[1]);
    const BlockId block_head = x.blocks[0];
    const BlockId x_body = x.blocks[1];
    const BlockId y_body = y.blocks[1];
    ASSERT_EQ(bm.num_available_blocks(), 0);
    if (x_freed_first) {
      bm.free(&x);
      bm.free(&y);
    } else {
      bm.free(&y);
      bm.free(&x);
    }
    // Cached: both bodies and the head; the partial last blocks are free.
    ASSERT_EQ(bm.metrics().num_cached_blocks, 3);
    EXPECT_EQ(bm.match_prefix(x_tokens).blocks, (std::vector<BlockId>{block_head, x_body}));
    EXPECT_EQ(bm.match_prefix(y_tokens).blocks, (std::vector<BlockId>{block_head, y_body}));

    // Three new blocks: the two free ones, then the body freed first.
    BlockTable other;
    ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(3 * bs, 5000)), 3 * bs, &other), 0);
    EXPECT_EQ(bm.metrics().num_evictions, 1);
    const BlockId evicted = x_freed_first ? x_body : y_body;
    EXPECT_NE(std::find(other.blocks.begin(), other.blocks.end(), evicted), other.blocks.end());
    const auto& evicted_tokens = x_freed_first ? x_tokens : y_tokens;
    const auto& kept_tokens = x_freed_first ? y_tokens : x_tokens;
    const BlockId kept = x_freed_first ? y_body : x_body;
    EXPECT_EQ(bm.match_prefix(evicted_tokens).blocks, (std::vector<BlockId>{block_head}));
    EXPECT_EQ(bm.match_prefix(kept_tokens).blocks, (std::vector<BlockId>{block_head, kept}))
        << "evicting one colliding block must leave the other registered";
    expect_consistent(bm);
  }
}

TEST(BlockManagerTest, MetricsStayConsistentUnderRandomOperations) {
  const int32_t bs = 8;
  BlockManager bm(24, bs, true);
  std::mt19937 rng(1234);
  struct Seq {
    std::vector<int32_t> tokens;
    int32_t num_computed = 0;
    BlockTable table;
  };
  std::vector<Seq> seqs;
  // Prompts draw from a few shared prefixes so that hits happen.
  const std::vector<std::vector<int32_t>> prefixes = {iota_tokens(2 * bs, 0),
                                                      iota_tokens(3 * bs, 500)};
  std::vector<BlockCopy> copies;
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 && seqs.size() < 8) {
      Seq s;
      s.tokens = prefixes[rng() % 2];
      s.tokens.push_back(static_cast<int32_t>(rng() % 50));
      const int32_t n = static_cast<int32_t>(s.tokens.size());
      if (bm.can_allocate(bm.match_prefix(s.tokens), n, 0)) {
        s.num_computed = bm.allocate(bm.match_prefix(s.tokens), n, &s.table);
        ASSERT_GE(s.num_computed, 0);
        s.num_computed = n;
        bm.cache_full_blocks(&s.table, s.tokens, n);
        seqs.push_back(std::move(s));
      } else {
        EXPECT_EQ(bm.allocate(bm.match_prefix(s.tokens), n, &s.table), -1);
      }
    } else if (op == 1 && !seqs.empty()) {
      Seq& s = seqs[rng() % seqs.size()];
      if (bm.append(&s.table, s.num_computed, 1, &copies)) {
        s.tokens.push_back(static_cast<int32_t>(rng() % 50));
        ++s.num_computed;
        bm.cache_full_blocks(&s.table, s.tokens, s.num_computed);
      }
    } else if (op == 2 && !seqs.empty() && seqs.size() < 8) {
      Seq child;
      const Seq& parent = seqs[rng() % seqs.size()];
      child.tokens = parent.tokens;
      child.num_computed = parent.num_computed;
      bm.fork(parent.table, &child.table);
      seqs.push_back(std::move(child));
    } else if (op == 3 && !seqs.empty()) {
      const size_t i = rng() % seqs.size();
      bm.free(&seqs[i].table);
      seqs.erase(seqs.begin() + static_cast<std::ptrdiff_t>(i));
    }
    // Ref counts equal the number of tables holding each block.
    std::vector<int32_t> refs(24, 0);
    for (const Seq& s : seqs) {
      ASSERT_EQ(static_cast<int32_t>(s.table.blocks.size()), bm.blocks_for(s.num_computed));
      for (BlockId b : s.table.blocks) ++refs[b];
    }
    int32_t used = 0;
    for (BlockId b = 0; b < 24; ++b) {
      ASSERT_EQ(bm.ref_count(b), refs[b]) << "block " << b << " step " << step;
      used += refs[b] > 0;
    }
    const auto m = bm.metrics();
    ASSERT_EQ(m.num_used_blocks, used);
    ASSERT_EQ(m.num_used_blocks + m.num_free_blocks + m.num_cached_blocks, m.num_blocks);
    ASSERT_LE(m.prefix_hits, m.prefix_queries);
  }
  EXPECT_GT(bm.metrics().prefix_hits, 0);
  EXPECT_GT(bm.metrics().num_cow_copies, 0);
  for (Seq& s : seqs) bm.free(&s.table);
  EXPECT_EQ(bm.metrics().num_used_blocks, 0);
}

}  // namespace
}  // namespace pvllm
