// ContiguousAllocator (KvAllocator::kContiguous): the baseline that reserves a
// sequence's whole context as one run of consecutive blocks.
#include "core/kv/contiguous_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/kv/block_manager.h"

namespace pvllm {
namespace {

// Token ids [0, n).
std::vector<int32_t> tokens(int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

// A pool of `num_blocks` blocks of 16 slots; each table reserves
// `max_seq_len` slots.
ContiguousAllocator contiguous(int32_t num_blocks, int32_t max_seq_len) {
  return ContiguousAllocator(num_blocks, 16, max_seq_len);
}

bool is_run(const BlockTable& t) {
  for (size_t i = 1; i < t.blocks.size(); ++i) {
    if (t.blocks[i] != t.blocks[i - 1] + 1) return false;
  }
  return true;
}

TEST(ContiguousAllocatorTest, AllocationReservesTheWholeContextAsOneRun) {
  ContiguousAllocator bm = contiguous(20, 64);  // 4 blocks per sequence
  BlockTable t;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(5)), 5, &t), 0);
  EXPECT_EQ(t.blocks, (std::vector<BlockId>{0, 1, 2, 3}));
  EXPECT_EQ(bm.metrics().num_used_blocks, 4);
  EXPECT_EQ(bm.num_reserved_blocks_per_table(), 4);
}

TEST(ContiguousAllocatorTest, TableNeverGrowsAndAppendWithinTheRunIsFree) {
  ContiguousAllocator bm = contiguous(20, 64);
  BlockTable t;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(5)), 5, &t), 0);
  const std::vector<BlockId> before = t.blocks;
  std::vector<BlockCopy> copies;
  for (int32_t pos = 5; pos < 64; ++pos) {
    ASSERT_TRUE(bm.can_append(t, pos, 1));
    ASSERT_TRUE(bm.append(&t, pos, 1, &copies));
  }
  EXPECT_EQ(t.blocks, before);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.metrics().num_used_blocks, 4);
  // Past the reservation there is nothing to grow into.
  EXPECT_FALSE(bm.can_append(t, 64, 1));
  EXPECT_FALSE(bm.append(&t, 64, 1, &copies));
  EXPECT_EQ(t.blocks, before);
}

TEST(ContiguousAllocatorTest, FirstFitTakesTheLowestRunThatFits) {
  ContiguousAllocator bm = contiguous(12, 48);  // 3 blocks per sequence, 4 runs
  BlockTable a, b, c, d;
  bm.allocate(bm.match_prefix(tokens(1)), 1, &a);
  bm.allocate(bm.match_prefix(tokens(1)), 1, &b);
  bm.allocate(bm.match_prefix(tokens(1)), 1, &c);
  bm.allocate(bm.match_prefix(tokens(1)), 1, &d);
  EXPECT_EQ(c.blocks.front(), 6);
  bm.free(&b);  // hole at 3..5
  bm.free(&d);  // hole at 9..11
  BlockTable e;
  bm.allocate(bm.match_prefix(tokens(1)), 1, &e);
  EXPECT_EQ(e.blocks, (std::vector<BlockId>{3, 4, 5}));
  EXPECT_TRUE(is_run(e));
}

TEST(ContiguousAllocatorTest, FreedHoleIsReusedOnlyByAWholeReservation) {
  // 3 blocks per sequence in a 10-block pool: the last block can never be
  // used, and a hole left by a finished sequence is only ever refilled whole.
  ContiguousAllocator bm = contiguous(10, 48);
  BlockTable x, y, z;
  bm.allocate(bm.match_prefix(tokens(1)), 1, &x);  // 0..2
  bm.allocate(bm.match_prefix(tokens(1)), 1, &y);  // 3..5
  bm.allocate(bm.match_prefix(tokens(1)), 1, &z);  // 6..8
  EXPECT_EQ(bm.num_available_blocks(), 1);
  EXPECT_FALSE(bm.can_allocate(bm.match_prefix(tokens(1)), 1, 0));
  bm.free(&y);  // free: 3..5 and 9, not adjacent
  EXPECT_EQ(bm.num_available_blocks(), 4);
  EXPECT_EQ(bm.metrics().largest_free_run, 3);
  BlockTable w;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(1)), 1, &w), 0);
  EXPECT_EQ(w.blocks, (std::vector<BlockId>{3, 4, 5}));
  EXPECT_EQ(bm.num_available_blocks(), 1);
  BlockTable v;
  EXPECT_EQ(bm.allocate(bm.match_prefix(tokens(1)), 1, &v), -1);
  EXPECT_TRUE(v.blocks.empty());
}

TEST(ContiguousAllocatorTest, RejectsWhenNoRunFitsAndChangesNothing) {
  ContiguousAllocator bm = contiguous(10, 64);  // 4 blocks per sequence: 2 fit
  BlockTable a, b, c;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(3)), 3, &a), 0);
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(3)), 3, &b), 0);
  const KvCacheMetrics before = bm.metrics();
  EXPECT_FALSE(bm.can_allocate(bm.match_prefix(tokens(3)), 3, 0));
  EXPECT_EQ(bm.allocate(bm.match_prefix(tokens(3)), 3, &c), -1);
  EXPECT_TRUE(c.blocks.empty());
  EXPECT_EQ(bm.metrics().num_used_blocks, before.num_used_blocks);
  EXPECT_EQ(bm.num_available_blocks(), 2);
}

TEST(ContiguousAllocatorTest, FreeMergesNeighbouringRuns) {
  ContiguousAllocator bm = contiguous(12, 48);
  BlockTable a, b, c, d;
  bm.allocate(bm.match_prefix(tokens(1)), 1, &a);
  bm.allocate(bm.match_prefix(tokens(1)), 1, &b);
  bm.allocate(bm.match_prefix(tokens(1)), 1, &c);
  bm.allocate(bm.match_prefix(tokens(1)), 1, &d);
  bm.free(&a);
  bm.free(&c);
  EXPECT_EQ(bm.metrics().largest_free_run, 3);
  bm.free(&b);  // joins 0..2, 3..5 and 6..8
  EXPECT_EQ(bm.metrics().largest_free_run, 9);
  bm.free(&d);
  EXPECT_EQ(bm.metrics().largest_free_run, 12);
  EXPECT_EQ(bm.metrics().num_free_blocks, 12);
}

TEST(ContiguousAllocatorTest, ForkReservesANewRunAndCopiesTheUsedBlocks) {
  ContiguousAllocator bm = contiguous(16, 64);  // 4 blocks per sequence
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(20)), 20, &parent), 0);
  ASSERT_TRUE(bm.can_fork(parent));
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.fork(parent, 20, &child, &copies));  // 20 tokens: 2 blocks in use
  ASSERT_EQ(child.blocks.size(), 4u);
  EXPECT_TRUE(is_run(child));
  for (BlockId b : child.blocks) {
    EXPECT_EQ(bm.ref_count(b), 1);
    EXPECT_EQ(std::count(parent.blocks.begin(), parent.blocks.end(), b), 0);
  }
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, parent.blocks[0]);
  EXPECT_EQ(copies[0].dst, child.blocks[0]);
  EXPECT_EQ(copies[1].src, parent.blocks[1]);
  EXPECT_EQ(copies[1].dst, child.blocks[1]);
  EXPECT_EQ(bm.metrics().num_used_blocks, 8);
  EXPECT_EQ(bm.metrics().num_cow_copies, 2);
}

TEST(ContiguousAllocatorTest, ForkFailsWithoutARunAndChangesNothing) {
  ContiguousAllocator bm = contiguous(6, 64);  // one 4-block run fits, not two
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(20)), 20, &parent), 0);
  EXPECT_FALSE(bm.can_fork(parent));
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(bm.fork(parent, 20, &child, &copies));
  EXPECT_TRUE(child.blocks.empty());
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.metrics().num_used_blocks, 4);
}

TEST(ContiguousAllocatorTest, AppendingNoTokensFitsEvenAtTheEndOfTheReservation) {
  ContiguousAllocator bm = contiguous(8, 64);
  BlockTable t;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(5)), 5, &t), 0);
  const std::vector<BlockId> before = t.blocks;
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(bm.can_append(t, 64, 1));
  EXPECT_TRUE(bm.can_append(t, 64, 0));
  EXPECT_TRUE(bm.append(&t, 64, 0, &copies));
  EXPECT_EQ(t.blocks, before);
  EXPECT_TRUE(copies.empty());
}

TEST(ContiguousAllocatorTest, ForkBeforeAnythingIsComputedCopiesNothing) {
  ContiguousAllocator bm = contiguous(16, 64);
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(20)), 20, &parent), 0);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.fork(parent, 0, &child, &copies));
  EXPECT_EQ(child.blocks, (std::vector<BlockId>{4, 5, 6, 7})) << "a whole reservation still";
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.metrics().num_cow_copies, 0);
  EXPECT_EQ(bm.metrics().num_used_blocks, 8);
}

TEST(ContiguousAllocatorTest, ForkOfAWhollyReleasedPrefixCopiesNothing) {
  ContiguousAllocator bm(16, 16, 64, /*sliding_window=*/16);
  BlockTable parent, child;
  ASSERT_EQ(bm.allocate(bm.match_prefix(tokens(40)), 40, &parent), 0);
  ASSERT_EQ(bm.release_blocks_before(&parent, 32), 2);
  ASSERT_EQ(parent.blocks, (std::vector<BlockId>{kReleasedBlock, kReleasedBlock, 2, 3}));
  // The parent's first 32 tokens lie in released blocks only.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.fork(parent, 32, &child, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(child.blocks, (std::vector<BlockId>{kReleasedBlock, kReleasedBlock, 6, 7}))
      << "released in the child at once";
  EXPECT_EQ(bm.metrics().num_used_blocks, 4);
  EXPECT_EQ(bm.num_available_blocks(), 12);
  bm.free(&child);
  bm.free(&parent);
  EXPECT_EQ(bm.metrics().largest_free_run, 16);
}

TEST(ContiguousAllocatorTest, PrefixCachingIsOff) {
  ContiguousAllocator bm = contiguous(16, 64);
  EXPECT_FALSE(bm.prefix_caching());
  BlockTable a, b;
  const std::vector<int32_t> t = tokens(40);
  bm.allocate(bm.match_prefix(t), 40, &a);
  bm.cache_full_blocks(&a, t, 40);
  EXPECT_EQ(bm.match_prefix(t).num_cached_tokens, 0);
  EXPECT_EQ(bm.allocate(bm.match_prefix(t), 40, &b), 0);
  EXPECT_NE(a.blocks.front(), b.blocks.front());
}

TEST(ContiguousAllocatorTest, PagedPolicyForkSharesWithoutCopies) {
  BlockManager bm(16, 16, false);
  BlockTable parent, child;
  bm.allocate(bm.match_prefix(tokens(20)), 20, &parent);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.fork(parent, 20, &child, &copies));
  EXPECT_EQ(child.blocks, parent.blocks);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.ref_count(parent.blocks[0]), 2);
}

}  // namespace
}  // namespace pvllm
