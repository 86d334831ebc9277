// The KV managers with a sliding window: release_blocks_before, the bound
// on the blocks a long sequence holds, and what allocation, the prefix
// cache, fork and free do with released (-1) entries, for both policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <tuple>
#include <vector>

#include "core/kv/block_manager.h"
#include "core/kv/contiguous_allocator.h"

namespace pvllm {
namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t first = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

int32_t live(const BlockTable& t) {
  return static_cast<int32_t>(std::count_if(t.blocks.begin(), t.blocks.end(),
                                            [](BlockId b) { return b != kReleasedBlock; }));
}

void expect_pool_whole(const KvCacheManager& kv) {
  const KvCacheMetrics m = kv.metrics();
  EXPECT_EQ(m.num_used_blocks + m.num_free_blocks + m.num_cached_blocks, m.num_blocks);
}

TEST(SlidingWindowKvTest, FirstNeededPositionIsTheOldestKeyALaterQueryReads) {
  BlockManager bm(4, 8, false, /*sliding_window=*/16);
  EXPECT_EQ(bm.first_needed_position(0), 0);
  EXPECT_EQ(bm.first_needed_position(15), 0);
  EXPECT_EQ(bm.first_needed_position(16), 1);  // the query at 16 reads 1..16
  EXPECT_EQ(bm.first_needed_position(40), 25);
  BlockManager full(4, 8, false);
  EXPECT_EQ(full.first_needed_position(1000), 0);
}

TEST(SlidingWindowKvTest, MinBlocksForOneSequence) {
  // 1 + ceil((window - 1) / block_size), never more than the whole context.
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, 8, 4096, 16), 3);
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, 8, 4096, 17), 3);
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, 8, 4096, 18), 4);
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, 16, 8192, 4096), 257);
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, 16, 4096, 4096), 256);
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, 16, 100, 4096), 7);
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, 8, 4096, 0), 512);
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kContiguous, 8, 4096, 16), 512);
}

TEST(SlidingWindowKvTest, ReleaseFreesWholeBlocksBeforeThePositionOnce) {
  BlockManager bm(16, 8, false, 16);
  BlockTable t;
  const std::vector<int32_t> tokens = iota_tokens(40);
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens), 40, &t), 0);
  const std::vector<BlockId> before = t.blocks;
  ASSERT_EQ(before.size(), 5u);
  // Block 2 holds 16..23: position 23 is still needed.
  EXPECT_EQ(bm.release_blocks_before(&t, 23), 2);
  EXPECT_EQ(t.blocks, (std::vector<BlockId>{kReleasedBlock, kReleasedBlock, before[2], before[3],
                                            before[4]}));
  EXPECT_EQ(bm.ref_count(before[0]), 0);
  EXPECT_EQ(bm.metrics().num_used_blocks, 3);
  EXPECT_EQ(bm.metrics().num_free_blocks, 13);
  EXPECT_EQ(bm.release_blocks_before(&t, 23), 0);
  EXPECT_EQ(bm.release_blocks_before(&t, 24), 1);
  EXPECT_EQ(bm.release_blocks_before(&t, 1000), 2);  // up to the table's end
  EXPECT_EQ(t.blocks.size(), 5u);
  EXPECT_EQ(live(t), 0);
  bm.free(&t);  // nothing left to release: a double release would abort
  EXPECT_TRUE(t.blocks.empty());
  EXPECT_EQ(bm.metrics().num_free_blocks, 16);
  expect_pool_whole(bm);
}

TEST(SlidingWindowKvTest, WithoutAWindowNothingIsOutsideIt) {
  BlockManager bm(8, 8, false);
  BlockTable t;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(40)), 40, &t), 0);
  EXPECT_EQ(bm.release_outside_window(&t, 40), 0);
  EXPECT_EQ(live(t), 5);
  bm.free(&t);
}

// (window, block size): one token decoded at a time, with the blocks
// outside the window released after each, never needs more than
// 1 + ceil((window - 1) / block_size) blocks — and does need that many.
class WindowBoundTest : public ::testing::TestWithParam<std::tuple<int32_t, int32_t>> {};

TEST_P(WindowBoundTest, DecodeHoldsOneWindowOfBlocks) {
  const auto [window, bs] = GetParam();
  const int32_t bound = 1 + (window - 1 + bs - 1) / bs;
  EXPECT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, bs, 1 << 20, window), bound);
  EXPECT_LE(bound, (window + bs - 1) / bs + 1);
  BlockManager bm(bound, bs, false, window);  // the pool holds exactly one window
  BlockTable t;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(1)), 1, &t), 0);
  int32_t max_live = live(t);
  std::vector<BlockCopy> copies;
  for (int32_t p = 1; p < 40 * bs; ++p) {  // p tokens computed; the next is at p
    bm.release_outside_window(&t, p);
    ASSERT_TRUE(bm.append(&t, p, 1, &copies)) << "position " << p;
    max_live = std::max(max_live, live(t));
    // Every key the query at p reads is still there.
    for (int32_t k = std::max(0, p - window + 1); k <= p; ++k) {
      ASSERT_NE(t.blocks[k / bs], kReleasedBlock) << "key " << k << " of the query at " << p;
    }
  }
  EXPECT_EQ(max_live, bound);
  EXPECT_TRUE(copies.empty());
  bm.free(&t);
  expect_pool_whole(bm);
}

INSTANTIATE_TEST_SUITE_P(WindowsAndBlocks, WindowBoundTest,
                         ::testing::Values(std::make_tuple(1, 8), std::make_tuple(8, 8),
                                           std::make_tuple(9, 8), std::make_tuple(16, 8),
                                           std::make_tuple(17, 8), std::make_tuple(24, 16),
                                           std::make_tuple(100, 32)));

TEST(SlidingWindowKvTest, WithoutTheWindowThatPoolStopsAtItsSlots) {
  BlockManager bm(3, 8, false);
  BlockTable t;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(1)), 1, &t), 0);
  std::vector<BlockCopy> copies;
  int32_t p = 1;
  while (bm.append(&t, p, 1, &copies)) ++p;
  EXPECT_EQ(p, 24);  // 3 blocks of 8; the window version above goes on
  bm.free(&t);
}

TEST(SlidingWindowKvTest, AChunkNeedsItsWindowPlusItself) {
  // Chunks of 19 at positions 19k: the chunk at 38 spans 23..56 with the
  // keys before it, 1 + ceil((16 + 19 - 2) / 8) = 6 blocks.
  const int32_t window = 16, bs = 8, chunk = 19;
  BlockManager bm(6, bs, false, window);
  BlockTable t;
  const std::vector<int32_t> tokens = iota_tokens(19 * 12);
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens), chunk, &t), 0);
  int32_t max_live = live(t);
  std::vector<BlockCopy> copies;
  for (int32_t c = chunk; c < 19 * 12; c += chunk) {
    bm.release_outside_window(&t, c);
    ASSERT_TRUE(bm.append(&t, c, chunk, &copies)) << "chunk at " << c;
    max_live = std::max(max_live, live(t));
  }
  EXPECT_EQ(max_live, 6);
  bm.free(&t);
}

TEST(SlidingWindowKvTest, PrefixCacheKeepsReleasedBlocksAndSharedOnesStayWithTheOtherOwner) {
  const int32_t bs = 8;
  BlockManager bm(16, bs, true, 16);
  const std::vector<int32_t> prompt = iota_tokens(40, 5);
  const std::vector<int32_t> first24(prompt.begin(), prompt.begin() + 24);
  // a: 24 tokens computed and hashed (3 blocks).
  BlockTable a;
  ASSERT_EQ(bm.allocate(bm.match_prefix(first24), 24, &a), 0);
  bm.cache_full_blocks(&a, first24, 24);
  const std::vector<BlockId> a_blocks = a.blocks;

  // b: the same 24 and 8 more. The next position (24) reads from 9 on, so
  // block 0 is matched but not taken.
  std::vector<int32_t> b_tokens = first24;
  for (int32_t i = 0; i < 8; ++i) b_tokens.push_back(900 + i);
  const PrefixMatch match = bm.match_prefix(b_tokens);
  ASSERT_EQ(match.blocks.size(), 3u);
  BlockTable b;
  ASSERT_EQ(bm.allocate(match, 32, &b), 24);
  EXPECT_EQ(b.blocks[0], kReleasedBlock);
  EXPECT_EQ(b.blocks[1], a_blocks[1]);
  EXPECT_EQ(b.hashes.size(), 3u) << "the chain goes on through the entry not taken";
  EXPECT_EQ(bm.ref_count(a_blocks[0]), 1);
  EXPECT_EQ(bm.ref_count(a_blocks[1]), 2);

  // a moves on: its block 0 becomes cached (evictable), not free.
  EXPECT_EQ(bm.release_outside_window(&a, 24), 1);
  EXPECT_EQ(bm.ref_count(a_blocks[0]), 0);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 1);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.append(&a, 24, 16, &copies));
  bm.cache_full_blocks(&a, prompt, 40);
  EXPECT_EQ(bm.release_outside_window(&a, 40), 2);  // blocks 1, 2: b still holds them
  EXPECT_EQ(bm.ref_count(a_blocks[1]), 1);
  EXPECT_EQ(bm.ref_count(a_blocks[2]), 1);

  // The blocks a registered after releasing chain on correctly: all 5 of
  // its blocks are found again, the released one included.
  std::vector<int32_t> c_tokens = prompt;
  c_tokens.push_back(1);
  const PrefixMatch c_match = bm.match_prefix(c_tokens);
  ASSERT_EQ(c_match.blocks.size(), 5u);
  EXPECT_EQ(c_match.blocks[0], a_blocks[0]);
  EXPECT_EQ(c_match.blocks[3], a.blocks[3]);
  bm.free(&a);
  bm.free(&b);
  EXPECT_EQ(bm.metrics().num_used_blocks, 0);
  expect_pool_whole(bm);
}

TEST(SlidingWindowKvTest, ABlockReleasedBeforeItsHashIsNeverRegistered) {
  BlockManager bm(16, 8, true, 8);
  const std::vector<int32_t> tokens = iota_tokens(25, 3);
  BlockTable t;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens), 24, &t), 0);
  EXPECT_EQ(bm.release_blocks_before(&t, 16), 2);
  EXPECT_EQ(bm.metrics().num_cached_blocks, 0) << "unhashed blocks go back to the free list";
  bm.cache_full_blocks(&t, tokens, 24);
  EXPECT_EQ(t.hashes.size(), 3u);
  // Block 0 holds nothing the cache knows of, so nothing after it matches.
  EXPECT_TRUE(bm.match_prefix(tokens).blocks.empty());
  bm.free(&t);
  expect_pool_whole(bm);
}

TEST(SlidingWindowKvTest, MatchStopsAtAReleasedBlockThatWasEvicted) {
  const int32_t bs = 8;
  BlockManager bm(6, bs, true, 8);
  const std::vector<int32_t> prompt = iota_tokens(40, 3);
  BlockTable a;
  ASSERT_EQ(bm.allocate(bm.match_prefix(prompt), 40, &a), 0);
  bm.cache_full_blocks(&a, prompt, 40);
  // Positions from 33 on are needed: blocks 0..3 become cached, 3 first.
  ASSERT_EQ(bm.release_outside_window(&a, 40), 4);
  std::vector<int32_t> query = prompt;
  query.push_back(7);
  EXPECT_EQ(bm.match_prefix(query).blocks.size(), 5u);
  // Two new blocks: the free one, then the least recently released, 3.
  BlockTable x;
  const std::vector<int32_t> other = iota_tokens(16, 500);
  ASSERT_EQ(bm.allocate(bm.match_prefix(other), 16, &x), 0);
  EXPECT_EQ(bm.metrics().num_evictions, 1);
  // Block 4 still lives with a, but the chain breaks at 3.
  EXPECT_EQ(bm.match_prefix(query).blocks.size(), 3u);
  bm.free(&a);
  bm.free(&x);
  expect_pool_whole(bm);
}

TEST(SlidingWindowKvTest, ForkSharesTheLiveBlocksAndKeepsTheReleasedEntries) {
  const int32_t bs = 8;
  BlockManager bm(16, bs, false, 16);
  BlockTable parent;
  ASSERT_EQ(bm.allocate(bm.match_prefix(iota_tokens(36)), 36, &parent), 0);
  ASSERT_EQ(bm.release_outside_window(&parent, 36), 2);  // 21 on: blocks 2..4 stay
  BlockTable child;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.fork(parent, 36, &child, &copies));
  EXPECT_EQ(child.blocks, parent.blocks);
  EXPECT_EQ(bm.ref_count(parent.blocks[2]), 2);
  EXPECT_EQ(bm.metrics().num_used_blocks, 3);
  // Both write position 36 into the shared partial block 4: one copy.
  ASSERT_TRUE(bm.append(&child, 36, 1, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, parent.blocks[4]);
  ASSERT_TRUE(bm.append(&parent, 36, 1, &copies));
  EXPECT_EQ(copies.size(), 1u) << "the parent now owns block 4 alone";
  bm.free(&parent);
  EXPECT_EQ(bm.ref_count(child.blocks[2]), 1);
  bm.free(&child);
  EXPECT_EQ(bm.metrics().num_used_blocks, 0);
  expect_pool_whole(bm);
}

TEST(SlidingWindowKvTest, ContiguousReleasesFromTheFrontIntoTheFreeRuns) {
  ContiguousAllocator ca(8, 8, /*max_seq_len=*/32, /*sliding_window=*/8);
  const PrefixMatch m = ca.match_prefix(iota_tokens(25));
  BlockTable a, b;
  ASSERT_EQ(ca.allocate(m, 25, &a), 0);
  ASSERT_EQ(ca.allocate(m, 25, &b), 0);
  EXPECT_EQ(ca.release_outside_window(&a, 25), 2);  // 18 on: blocks 0, 1 go back
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{kReleasedBlock, kReleasedBlock, 2, 3}));
  EXPECT_EQ(ca.metrics().num_free_blocks, 2);
  EXPECT_EQ(ca.metrics().largest_free_run, 2);
  EXPECT_FALSE(ca.can_allocate(m, 25, 0)) << "a reservation is still max_seq_len";
  EXPECT_TRUE(ca.can_append(a, 25, 7)) << "the table keeps its length";
  ca.free(&b);
  EXPECT_TRUE(ca.can_allocate(m, 25, 0));
  ca.free(&a);  // blocks 2 and 3 only: a double release would abort
  EXPECT_EQ(ca.metrics().num_free_blocks, 8);
  EXPECT_EQ(ca.metrics().largest_free_run, 8);
}

TEST(SlidingWindowKvTest, ContiguousForkCopiesOnlyTheLiveBlocks) {
  ContiguousAllocator ca(12, 8, 32, 8);
  BlockTable parent, child;
  ASSERT_EQ(ca.allocate(ca.match_prefix(iota_tokens(25)), 25, &parent), 0);
  ASSERT_EQ(ca.release_outside_window(&parent, 25), 2);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(ca.fork(parent, 25, &child, &copies));
  EXPECT_EQ(child.blocks, (std::vector<BlockId>{kReleasedBlock, kReleasedBlock, 6, 7}));
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, 2);
  EXPECT_EQ(copies[0].dst, 6);
  EXPECT_EQ(copies[1].src, 3);
  EXPECT_EQ(copies[1].dst, 7);
  EXPECT_EQ(ca.metrics().num_free_blocks, 8);
  ca.free(&parent);
  ca.free(&child);
  EXPECT_EQ(ca.metrics().num_free_blocks, 12);
}

}  // namespace
}  // namespace pvllm
