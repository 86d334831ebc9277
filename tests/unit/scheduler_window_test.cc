// The scheduler with a sliding window: blocks before each sequence's window
// are released after every step, so long sequences run in a pool far
// smaller than their length; prefill chunks are cut to what fits; prefix
// hits, forks, preemption and aborts keep the tokens exact. The fake model
// reads only the last W tokens (scheduler_fake_engine.h), and every row
// checks every key of its window, so a block released too early fails.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/scheduler_fake_engine.h"

namespace pvllm::testing {
namespace {

constexpr int32_t kBlock = 8;
constexpr int32_t kWindow = 16;
// One decode token with its window's keys before it: kWindow positions,
// misaligned by up to a block: 1 + ceil((16 - 1) / 8) = 3 blocks.
constexpr int32_t kWindowBlocks = 3;

TEST(SchedulerWindowTest, LongGenerationRunsInThePoolOfOneWindow) {
  ASSERT_EQ(min_blocks_for_one_sequence(KvAllocator::kPaged, kBlock, 4096, kWindow), kWindowBlocks);
  FakeEngine e(kWindowBlocks, kBlock, false, make_config(4, 64), kWindow);
  Sequence* a = e.submit(iota_tokens(5), 300);  // 305 tokens: 39 blocks without the window
  int32_t max_live = 0;
  for (int steps = 0; e.sched().num_running() + e.sched().num_waiting() > 0; ++steps) {
    ASSERT_LT(steps, 1000) << "no progress";
    e.step();
    ASSERT_FALSE(HasFatalFailure());
    max_live = std::max(max_live, live_blocks(*a));
  }
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(5), 300, 0, kWindow));
  EXPECT_EQ(e.sched().num_preemptions(), 0);
  // After a step the table holds positions [P - 15, P): at most 2 blocks
  // of 8 plus the one the next token opens.
  EXPECT_LE(max_live, kWindowBlocks);
  EXPECT_EQ(e.bm().metrics().num_used_blocks, 0);
}

TEST(SchedulerWindowTest, WithoutTheWindowThatPoolHoldsOnly24Tokens) {
  // The same pool without a window holds 24 tokens at most: a 5-token
  // prompt generating 19 fits, 20 would need a fourth block.
  FakeEngine e(kWindowBlocks, kBlock, false, make_config(4, 64));
  Sequence* a = e.submit(iota_tokens(5), 19);
  e.run_to_completion();
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(5), 19));
  BlockTable t;
  const std::vector<int32_t> tokens = iota_tokens(24);
  ASSERT_GE(e.bm().allocate(e.bm().match_prefix(tokens), 24, &t), 0);
  EXPECT_FALSE(e.bm().can_append(t, 24, 1));
  e.bm().free(&t);
}

TEST(SchedulerWindowTest, PromptLongerThanThePoolIsPrefilledInChunksThatFit) {
  FakeEngine e(4, kBlock, false, make_config(4, 64), kWindow);
  const std::vector<int32_t> prompt = iota_tokens(100, 7);  // 13 blocks; the pool has 4
  Sequence* a = e.submit(prompt, 10);
  std::vector<int32_t> chunks;
  for (int steps = 0; e.sched().num_running() + e.sched().num_waiting() > 0; ++steps) {
    ASSERT_LT(steps, 1000) << "no progress";
    const int32_t before = a->num_computed_tokens;
    ScheduledBatch batch = e.step();
    ASSERT_FALSE(HasFatalFailure());
    if (const ScheduledSeq* s = find(batch, a); s != nullptr && before < 100) {
      chunks.push_back(s->num_new_tokens);
    }
  }
  EXPECT_EQ(a->token_ids, reference_tokens(prompt, 10, 0, kWindow));
  EXPECT_EQ(e.sched().num_preemptions(), 0);
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], 32) << "the first chunk is cut from 64 to the pool's 4 blocks";
  int32_t total = 0;
  for (int32_t c : chunks) {
    EXPECT_LT(c, 64);
    total += c;
  }
  EXPECT_EQ(total, 100);
}

TEST(SchedulerWindowTest, PrefixHitTakesOnlyTheBlocksOfTheWindow) {
  FakeEngine e(16, kBlock, true, make_config(4, 256), kWindow);
  const std::vector<int32_t> prompt = iota_tokens(48, 3);
  Sequence* a = e.submit(prompt, 2);
  e.run_to_completion();
  ASSERT_EQ(a->token_ids, reference_tokens(prompt, 2, 0, kWindow));
  // Every block a released or freed stays cached: the chain is whole.
  std::vector<int32_t> longer = prompt;
  for (int32_t i = 0; i < 8; ++i) longer.push_back(500 + i);
  ASSERT_EQ(e.bm().match_prefix(longer).blocks.size(), 6u);

  Sequence* b = e.submit(longer, 4);
  ScheduledBatch batch = e.step();
  ASSERT_NE(find(batch, b), nullptr);
  EXPECT_EQ(b->num_cached_tokens, 48);
  EXPECT_EQ(find(batch, b)->num_new_tokens, 8);
  // Positions 48.. read from 33 on: blocks 0..3 (positions 0..31) were
  // never taken; after the step the table reads from 41 (blocks 5, 6).
  const auto& blocks = b->block_table.blocks;
  ASSERT_EQ(blocks.size(), 7u);
  for (int32_t i = 0; i < 5; ++i) EXPECT_EQ(blocks[i], kReleasedBlock) << "block " << i;
  EXPECT_EQ(live_blocks(*b), 2);
  e.run_to_completion();
  EXPECT_EQ(b->token_ids, reference_tokens(longer, 4, 0, kWindow));
  EXPECT_EQ(e.bm().metrics().num_used_blocks, 0);
}

TEST(SchedulerWindowTest, ForkedSamplesShareTheWindowAndItsReleasedEntries) {
  FakeEngine e(16, kBlock, false, make_config(4, 256), kWindow);
  const std::vector<int32_t> prompt = iota_tokens(40, 11);
  Sequence* parent = e.submit(prompt, 30);
  parent->num_seats = 2;
  e.step();  // the prompt; positions 0..23 lie before the window of 40
  const std::vector<BlockId> parent_blocks = parent->block_table.blocks;
  ASSERT_EQ(parent_blocks.size(), 5u);
  EXPECT_EQ(parent_blocks[2], kReleasedBlock);
  EXPECT_NE(parent_blocks[3], kReleasedBlock);
  Sequence* child = e.fork(parent, 1);
  EXPECT_EQ(child->block_table.blocks, parent_blocks);
  EXPECT_EQ(e.bm().ref_count(parent_blocks[3]), 2);
  e.run_to_completion();
  EXPECT_EQ(parent->token_ids, reference_tokens(prompt, 30, 0, kWindow));
  EXPECT_EQ(child->token_ids, reference_tokens(prompt, 30, 1, kWindow));
  EXPECT_EQ(e.bm().metrics().num_used_blocks, 0);
}

// Many sequences longer than the pool, with shared prefixes, priorities,
// preemption and aborts: every survivor ends with its windowed reference
// tokens, no running sequence ever holds more than one window's blocks
// after a step, and the pool ends empty.
TEST(SchedulerWindowTest, RandomizedStressKeepsTheBoundAndTheTokens) {
  FakeEngine e(10, kBlock, true, make_config(6, 40, 16), kWindow);
  RandomWorkload w;  // up to 100 + 60 = 160 tokens: 20 blocks without the window
  w.seed = 7;
  w.num_requests = 60;
  w.prefixes = {iota_tokens(40, 0), iota_tokens(24, 1000), {}};
  w.max_tail = 60;
  w.max_new = 60;
  w.abort_one_in = 40;
  run_random_workload(&e, w, [](const std::vector<Sequence*>& seqs) {
    for (const Sequence* s : seqs) {
      if (s->status == SequenceStatus::kRunning) {
        ASSERT_LE(live_blocks(*s), kWindowBlocks) << "seq " << s->seq_id;
      }
    }
  });
  EXPECT_GT(e.sched().num_preemptions(), 0) << "the pool should have run dry";
  EXPECT_GT(e.bm().metrics().prefix_hits, 0);
}

}  // namespace
}  // namespace pvllm::testing
