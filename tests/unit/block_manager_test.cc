// BlockManager: growth, slots, ref counts, copy-on-write, prefix cache.
#include "core/kv/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
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
  const BlockManagerMetrics m = bm.metrics();
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
