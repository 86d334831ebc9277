// Scheduler: driven by hand with the fake engine of scheduler_fake_engine.h.
#include "core/sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "tests/unit/scheduler_fake_engine.h"

namespace pvllm::testing {
namespace {

TEST(SchedulerTest, NewArrivalJoinsWhileOthersDecode) {
  FakeEngine e(64, 8, false, make_config(8, 256));
  Sequence* a = e.submit(iota_tokens(10), 20);
  ScheduledBatch first = e.step();
  ASSERT_EQ(first.seqs.size(), 1u);
  EXPECT_EQ(first.seqs[0].num_new_tokens, 10);
  EXPECT_TRUE(first.seqs[0].samples_next_token);
  e.step();  // a decodes alone

  Sequence* b = e.submit(iota_tokens(12, 50), 5);
  ScheduledBatch joined = e.step();
  ASSERT_EQ(joined.seqs.size(), 2u);
  EXPECT_EQ(joined.seqs[0].seq, a) << "decodes come first";
  EXPECT_EQ(joined.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(joined.seqs[1].seq, b);
  EXPECT_EQ(joined.seqs[1].num_new_tokens, 12);
  EXPECT_EQ(joined.num_batched_tokens, 13);

  e.run_to_completion();
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(10), 20));
  EXPECT_EQ(b->token_ids, reference_tokens(iota_tokens(12, 50), 5));
}

TEST(SchedulerTest, MaxNumSeqsLimitsTheRunningSet) {
  FakeEngine e(64, 8, false, make_config(2, 256));
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(e.submit(iota_tokens(5, 10 * i), 3));
  ScheduledBatch b = e.step();
  EXPECT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(e.sched().num_running(), 2);
  EXPECT_EQ(e.sched().num_waiting(), 2);
  EXPECT_NE(find(b, seqs[0]), nullptr);
  EXPECT_NE(find(b, seqs[1]), nullptr);
  // The third is admitted only once a seat frees up.
  e.step();
  e.step();  // seqs 0 and 1 have their third token and finish
  EXPECT_EQ(seqs[0]->status, SequenceStatus::kFinished);
  ScheduledBatch next = e.step();
  EXPECT_NE(find(next, seqs[2]), nullptr);
  EXPECT_NE(find(next, seqs[3]), nullptr);
  e.run_to_completion();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(seqs[i]->token_ids, reference_tokens(iota_tokens(5, 10 * i), 3));
  }
}

TEST(SchedulerTest, SeatsCountASequenceThatWillFork) {
  FakeEngine e(64, 8, false, make_config(3, 256));
  Sequence* a = e.submit(iota_tokens(5), 3);
  a->num_seats = 2;
  Sequence* b = e.submit(iota_tokens(5, 100), 3);
  b->num_seats = 2;
  ScheduledBatch batch = e.step();
  EXPECT_NE(find(batch, a), nullptr);
  EXPECT_EQ(find(batch, b), nullptr) << "2 + 2 seats exceed max_num_seqs = 3";
}

TEST(SchedulerTest, TokenBudgetSplitsAdmissionIntoChunks) {
  FakeEngine e(64, 8, false, make_config(8, 32));
  Sequence* a = e.submit(iota_tokens(20), 4);
  Sequence* b = e.submit(iota_tokens(20, 100), 4);
  Sequence* c = e.submit(iota_tokens(20, 200), 4);
  ScheduledBatch batch = e.step();
  EXPECT_EQ(batch.num_batched_tokens, 32);
  ASSERT_NE(find(batch, a), nullptr);
  ASSERT_NE(find(batch, b), nullptr);
  EXPECT_EQ(find(batch, a)->num_new_tokens, 20);
  EXPECT_EQ(find(batch, b)->num_new_tokens, 12);
  EXPECT_FALSE(find(batch, b)->samples_next_token);
  EXPECT_EQ(find(batch, c), nullptr);
  while (e.sched().num_running() + e.sched().num_waiting() > 0) {
    ScheduledBatch s = e.step();
    ASSERT_LE(s.num_batched_tokens, 32);
  }
  EXPECT_EQ(c->token_ids, reference_tokens(iota_tokens(20, 200), 4));
}

TEST(SchedulerTest, LongPromptIsChunkedWhileOthersKeepDecoding) {
  FakeEngine e(64, 8, false, make_config(8, 16, 8));
  Sequence* a = e.submit(iota_tokens(4), 40);
  Sequence* b = e.submit(iota_tokens(6, 30), 40);
  e.step();  // both prefilled
  Sequence* longp = e.submit(iota_tokens(100, 500), 2);
  int num_chunks = 0;
  while (longp->num_generated_tokens() == 0) {
    ScheduledBatch batch = e.step();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_NE(find(batch, a), nullptr) << "a must decode every step";
    ASSERT_NE(find(batch, b), nullptr) << "b must decode every step";
    EXPECT_EQ(find(batch, a)->num_new_tokens, 1);
    const ScheduledSeq* l = find(batch, longp);
    ASSERT_NE(l, nullptr);
    EXPECT_LE(l->num_new_tokens, 8);
    EXPECT_EQ(batch.seqs.back().seq, longp) << "prefills come after decodes";
    ++num_chunks;
    ASSERT_LT(num_chunks, 100);
  }
  EXPECT_EQ(num_chunks, 13);  // ceil(100 / 8)
  e.run_to_completion();
  EXPECT_EQ(longp->token_ids, reference_tokens(iota_tokens(100, 500), 2));
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(4), 40));
}

TEST(SchedulerTest, PrefillServedFirstLeavesBudgetForLaterDecodes) {
  FakeEngine e(64, 8, false, make_config(8, 16));
  Sequence* a = e.submit(iota_tokens(4), 40, /*priority=*/1);
  e.step();
  // Served before a, and no chunk limit below the whole budget.
  Sequence* longp = e.submit(iota_tokens(60, 500), 1, /*priority=*/0);
  ScheduledBatch admitted = e.step();
  ASSERT_NE(find(admitted, longp), nullptr);
  EXPECT_EQ(find(admitted, longp)->num_new_tokens, 15);
  ScheduledBatch batch = e.step();
  ASSERT_NE(find(batch, a), nullptr) << "a decode must not starve behind a prefill";
  ASSERT_NE(find(batch, longp), nullptr);
  EXPECT_EQ(find(batch, longp)->num_new_tokens, 15) << "one token of budget is kept for a";
  EXPECT_EQ(batch.seqs.front().seq, a) << "decodes come first in the batch";
}

TEST(SchedulerTest, RequestWaitsUntilBlocksFreeUp) {
  FakeEngine e(6, 8, false, make_config(8, 256));
  Sequence* a = e.submit(iota_tokens(40), 3);  // 5 blocks, 6 with its decodes
  e.step();
  Sequence* b = e.submit(iota_tokens(20, 100), 2);  // 3 blocks: do not fit
  for (int i = 0; i < 2; ++i) {
    ScheduledBatch batch = e.step();
    EXPECT_EQ(find(batch, b), nullptr);
    EXPECT_EQ(b->status, SequenceStatus::kWaiting);
    EXPECT_TRUE(b->block_table.blocks.empty());
  }
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  EXPECT_EQ(a->num_preemptions, 0);
  ScheduledBatch batch = e.step();
  ASSERT_NE(find(batch, b), nullptr);
  e.run_to_completion();
  EXPECT_EQ(b->token_ids, reference_tokens(iota_tokens(20, 100), 2));
}

// Three one-block prompts and a 4-block pool: without headroom all three
// are admitted and the third is preempted at its first block boundary,
// its prefill thrown away; with the default headroom of a block per running
// sequence, the third waits for memory instead and nobody is preempted.
TEST(SchedulerTest, AdmissionHeadroomAvoidsPreemptingTheNewcomer) {
  for (const bool headroom : {false, true}) {
    SchedulerConfig config = make_config(8, 256);
    if (!headroom) config = no_headroom(config);
    FakeEngine e(4, 8, false, config);
    Sequence* a = e.submit(iota_tokens(8), 5);
    Sequence* b = e.submit(iota_tokens(8, 100), 5);
    Sequence* c = e.submit(iota_tokens(8, 200), 5);
    ScheduledBatch first = e.step();
    EXPECT_NE(find(first, a), nullptr);
    EXPECT_NE(find(first, b), nullptr);
    EXPECT_EQ(find(first, c) != nullptr, !headroom) << "headroom " << headroom;
    EXPECT_EQ(c->queued_for_memory, headroom);
    e.run_to_completion();
    EXPECT_EQ(e.sched().num_preemptions(), headroom ? 0 : 1);
    EXPECT_EQ(c->token_ids, reference_tokens(iota_tokens(8, 200), 5));
    EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(8), 5));
  }
}

// Headroom is kept for running sequences only: alone, a prompt may take
// every block.
TEST(SchedulerTest, HeadroomNeverKeepsOutASequenceThatFitsAlone) {
  FakeEngine e(4, 8, false, make_config(8, 256));
  Sequence* a = e.submit(iota_tokens(32), 1);
  ScheduledBatch batch = e.step();
  ASSERT_NE(find(batch, a), nullptr);
  EXPECT_EQ(find(batch, a)->num_new_tokens, 32) << "all four blocks in one step";
  e.run_to_completion();
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(32), 1));
}

// Three one-block prompts fill a 4-block pool; each first decode needs a
// second block, so the third in service order is pushed out.
TEST(SchedulerTest, PreemptsLowestPriorityBeforeLatestArrival) {
  FakeEngine e(4, 8, false, no_headroom(make_config(8, 256)));
  Sequence* a = e.submit(iota_tokens(7), 5, /*priority=*/0);
  Sequence* b = e.submit(iota_tokens(7, 100), 5, /*priority=*/1);
  Sequence* c = e.submit(iota_tokens(7, 200), 5, /*priority=*/0);
  e.step();  // all three prefilled: 3 blocks used; positions 7 fit in block 0
  ScheduledBatch decode1 = e.step();  // position 7 fits; now each holds 8 tokens' worth
  EXPECT_TRUE(decode1.preempted.empty());
  ScheduledBatch batch = e.step();  // position 8 needs a second block each
  ASSERT_EQ(batch.preempted.size(), 1u);
  EXPECT_EQ(batch.preempted[0], b) << "worst priority goes first, although it arrived earlier";
  EXPECT_EQ(b->num_preemptions, 1);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_NE(find(batch, a), nullptr);
  EXPECT_NE(find(batch, c), nullptr);
  EXPECT_EQ(e.sched().num_preemptions(), 1);
  e.run_to_completion();
  EXPECT_EQ(b->token_ids, reference_tokens(iota_tokens(7, 100), 5));
}

TEST(SchedulerTest, PreemptsLatestArrivalAmongEqualPriorities) {
  FakeEngine e(4, 8, false, no_headroom(make_config(8, 256)));
  Sequence* a = e.submit(iota_tokens(8), 5);
  Sequence* b = e.submit(iota_tokens(8, 100), 5);
  Sequence* c = e.submit(iota_tokens(8, 200), 5);
  e.step();
  ScheduledBatch batch = e.step();  // position 8 needs a second block each
  ASSERT_EQ(batch.preempted.size(), 1u);
  EXPECT_EQ(batch.preempted[0], c);
  EXPECT_NE(find(batch, a), nullptr);
  EXPECT_NE(find(batch, b), nullptr);
  e.run_to_completion();
  EXPECT_EQ(c->token_ids, reference_tokens(iota_tokens(8, 200), 5));
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(8), 5));
}

TEST(SchedulerTest, SequenceServedLastMayPreemptItselfAndNoneIsAdmitted) {
  FakeEngine e(3, 8, false, no_headroom(make_config(8, 256)));
  Sequence* a = e.submit(iota_tokens(8), 4, /*priority=*/1);
  Sequence* b = e.submit(iota_tokens(8, 100), 4, /*priority=*/1);
  Sequence* c = e.submit(iota_tokens(8, 200), 4, /*priority=*/1);
  e.step();  // pool full
  // Served before the preempted ones, and small enough to fit after them.
  Sequence* d = e.submit(iota_tokens(2, 300), 1, /*priority=*/0);
  ScheduledBatch batch = e.step();
  // a takes c's block; b then finds nothing and is itself served last.
  ASSERT_EQ(batch.preempted.size(), 2u);
  EXPECT_EQ(batch.preempted[0], c);
  EXPECT_EQ(batch.preempted[1], b);
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, a);
  EXPECT_EQ(find(batch, d), nullptr) << "no admission in a step that preempted";
  EXPECT_GT(e.bm().num_available_blocks(), 0) << "d would have fitted";
  e.run_to_completion();
  EXPECT_EQ(b->token_ids, reference_tokens(iota_tokens(8, 100), 4));
  EXPECT_EQ(c->token_ids, reference_tokens(iota_tokens(8, 200), 4));
  EXPECT_EQ(d->token_ids, reference_tokens(iota_tokens(2, 300), 1));
}

// Runs the same workload with a roomy pool and a tight one; the tight one
// must preempt, recompute, and still produce identical sequences.
void run_preemption_workload(bool prefix_caching) {
  const std::vector<int32_t> lengths = {30, 12, 25, 7, 18, 22};
  auto submit_all = [&](FakeEngine* e) {
    std::vector<Sequence*> seqs;
    for (size_t i = 0; i < lengths.size(); ++i) {
      seqs.push_back(e->submit(iota_tokens(lengths[i], 100 * static_cast<int32_t>(i)), 24));
    }
    return seqs;
  };
  FakeEngine roomy(256, 8, prefix_caching, make_config(16, 512));
  FakeEngine tight(12, 8, prefix_caching, make_config(16, 512));
  auto r = submit_all(&roomy);
  auto t = submit_all(&tight);
  roomy.run_to_completion();
  const int steps = tight.run_to_completion();
  ASSERT_FALSE(::testing::Test::HasFailure());
  EXPECT_LT(steps, 10000);
  EXPECT_EQ(roomy.sched().num_preemptions(), 0);
  EXPECT_GT(tight.sched().num_preemptions(), 0);
  int32_t num_preempted_seqs = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(t[i]->token_ids, r[i]->token_ids) << "sequence " << i;
    EXPECT_EQ(t[i]->token_ids, reference_tokens(iota_tokens(lengths[i], 100 * int32_t(i)), 24));
    num_preempted_seqs += t[i]->num_preemptions > 0;
  }
  EXPECT_GT(num_preempted_seqs, 0);
  EXPECT_EQ(tight.bm().metrics().num_used_blocks, 0);
}

TEST(SchedulerTest, PreemptedSequenceIsRecomputedToTheSameTokens) {
  run_preemption_workload(false);
}

TEST(SchedulerTest, PreemptedSequenceIsRecomputedToTheSameTokensWithPrefixCache) {
  run_preemption_workload(true);
}

TEST(SchedulerTest, PreemptedSequenceRecomputesPromptAndGeneratedTokens) {
  FakeEngine e(4, 8, false, no_headroom(make_config(8, 256)));
  e.submit(iota_tokens(8), 5);
  e.submit(iota_tokens(8, 100), 5);
  Sequence* c = e.submit(iota_tokens(8, 200), 5);
  e.step();
  ScheduledBatch batch = e.step();
  ASSERT_TRUE(contains(batch.preempted, c));
  ASSERT_EQ(c->num_tokens(), 9);  // prompt + its first sampled token
  // When it is admitted again it feeds all 9 tokens from position 0.
  for (int i = 0; i < 20; ++i) {
    ScheduledBatch next = e.step();
    if (const ScheduledSeq* s = find(next, c)) {
      EXPECT_EQ(s->num_new_tokens, 9);
      EXPECT_EQ(c->num_computed_tokens, 9) << "computed from 0 in this step";
      EXPECT_TRUE(s->samples_next_token);
      return;
    }
  }
  FAIL() << "preempted sequence never came back";
}

TEST(SchedulerTest, PrefixCacheHitSkipsPrefill) {
  const int32_t bs = 8;
  FakeEngine e(32, bs, true, make_config(8, 256));
  const auto prompt = iota_tokens(5 * bs + 3);
  Sequence* a = e.submit(prompt, 2);
  ScheduledBatch first = e.step();
  EXPECT_EQ(find(first, a)->num_new_tokens, 5 * bs + 3);
  EXPECT_EQ(a->num_cached_tokens, 0);
  e.run_to_completion();

  Sequence* b = e.submit(prompt, 2);
  ScheduledBatch batch = e.sched().schedule();
  const ScheduledSeq* s = find(batch, b);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(b->num_computed_tokens, 5 * bs);
  EXPECT_EQ(b->num_cached_tokens, 5 * bs);
  EXPECT_EQ(s->num_new_tokens, 3);
  EXPECT_TRUE(s->samples_next_token);
  EXPECT_EQ(e.bm().metrics().prefix_hits, 5);
}

TEST(SchedulerTest, FullyCachedPromptStillComputesItsLastBlock) {
  const int32_t bs = 8;
  FakeEngine e(32, bs, true, make_config(8, 256));
  const auto prompt = iota_tokens(4 * bs);
  e.submit(prompt, 3);
  e.run_to_completion();
  Sequence* b = e.submit(prompt, 3);
  ScheduledBatch batch = e.step();
  const ScheduledSeq* s = find(batch, b);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(b->num_cached_tokens, 3 * bs);
  EXPECT_EQ(s->num_new_tokens, bs);
  e.run_to_completion();
  EXPECT_EQ(b->token_ids, reference_tokens(prompt, 3));
}

TEST(SchedulerTest, BetterPriorityIsAdmittedFirst) {
  FakeEngine e(64, 8, false, make_config(1, 256));
  Sequence* low = e.submit(iota_tokens(5), 2, /*priority=*/2);
  Sequence* high = e.submit(iota_tokens(5, 100), 2, /*priority=*/0);
  ScheduledBatch batch = e.step();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, high);
  EXPECT_EQ(low->status, SequenceStatus::kWaiting);
  e.run_to_completion();
  EXPECT_EQ(low->token_ids, reference_tokens(iota_tokens(5), 2));
}

TEST(SchedulerTest, StrictlyBetterPriorityPreemptsRunningSequence) {
  FakeEngine e(4, 8, false, make_config(8, 256));
  Sequence* low = e.submit(iota_tokens(20), 6, /*priority=*/1);  // 3 blocks
  e.step();
  Sequence* same = e.submit(iota_tokens(12, 100), 2, /*priority=*/1);  // 2 blocks
  ScheduledBatch waited = e.step();
  EXPECT_EQ(find(waited, same), nullptr) << "equal priority does not preempt";
  EXPECT_TRUE(waited.preempted.empty());

  Sequence* high = e.submit(iota_tokens(12, 200), 2, /*priority=*/0);
  ScheduledBatch batch = e.step();
  EXPECT_TRUE(contains(batch.preempted, low));
  EXPECT_EQ(find(batch, low), nullptr) << "a preempted sequence leaves the batch";
  ASSERT_NE(find(batch, high), nullptr);
  EXPECT_EQ(batch.num_batched_tokens, 12);
  e.run_to_completion();
  EXPECT_EQ(high->token_ids, reference_tokens(iota_tokens(12, 200), 2));
  EXPECT_EQ(low->token_ids, reference_tokens(iota_tokens(20), 6));
  EXPECT_EQ(same->token_ids, reference_tokens(iota_tokens(12, 100), 2));
}

TEST(SchedulerTest, FinishAndAbortFreeBlocksFromEitherQueue) {
  const int32_t bs = 8;
  FakeEngine e(16, bs, true, make_config(2, 24, 8));
  Sequence* running = e.submit(iota_tokens(30), 100);
  Sequence* prefilling = e.submit(iota_tokens(50, 100), 100);
  e.step();
  e.step();
  e.step();
  ASSERT_EQ(running->status, SequenceStatus::kRunning);
  ASSERT_EQ(prefilling->status, SequenceStatus::kRunning);
  ASSERT_EQ(prefilling->num_generated_tokens(), 0);
  Sequence* waiting = e.submit(iota_tokens(100, 300), 100);  // no seat left
  e.step();
  ASSERT_EQ(waiting->status, SequenceStatus::kWaiting);

  e.sched().finish(waiting);
  EXPECT_EQ(waiting->status, SequenceStatus::kFinished);
  EXPECT_EQ(e.sched().num_waiting(), 0);
  e.sched().finish(prefilling);  // aborted mid-prefill
  e.sched().finish(running);
  EXPECT_EQ(e.sched().num_running(), 0);
  EXPECT_TRUE(running->block_table.blocks.empty());
  const KvCacheMetrics m = e.bm().metrics();
  EXPECT_EQ(m.num_used_blocks, 0);
  EXPECT_EQ(m.num_free_blocks + m.num_cached_blocks, 16);
  EXPECT_GT(m.num_cached_blocks, 0) << "computed full blocks stay cached";
  EXPECT_TRUE(e.sched().schedule().empty());
}

TEST(SchedulerTest, ForkedSequencesShareThePromptAndCopyOnWrite) {
  const int32_t bs = 8;
  FakeEngine e(16, bs, false, make_config(8, 256));
  Sequence* parent = e.submit(iota_tokens(12), 6);
  parent->num_seats = 2;
  e.step();  // prefill; the parent samples its first token
  Sequence* child = e.fork(parent, 1);
  const BlockId shared_last = parent->block_table.blocks[1];
  ScheduledBatch batch = e.step();
  ASSERT_EQ(batch.seqs.size(), 2u);
  ASSERT_EQ(batch.copies.size(), 1u) << "the partial block 1 is shared by both writers";
  EXPECT_EQ(batch.copies[0].src, shared_last);
  EXPECT_NE(parent->block_table.blocks[1], child->block_table.blocks[1]);
  EXPECT_EQ(parent->block_table.blocks[0], child->block_table.blocks[0]);
  e.run_to_completion();
  EXPECT_EQ(parent->token_ids, reference_tokens(iota_tokens(12), 6));
  EXPECT_EQ(child->token_ids, reference_tokens(iota_tokens(12), 6, 1));
  EXPECT_EQ(e.bm().metrics().num_used_blocks, 0);
}

TEST(SchedulerTest, PriorityPreemptionDropsTheVictimsCopies) {
  const int32_t bs = 8;
  FakeEngine e(6, bs, false, no_headroom(make_config(8, 256)));
  Sequence* parent = e.submit(iota_tokens(12), 6, /*priority=*/1);
  parent->num_seats = 3;
  e.step();
  Sequence* c1 = e.fork(parent, 1);
  Sequence* c2 = e.fork(parent, 2);  // 2 blocks shared three ways, 4 free
  Sequence* high = e.submit(iota_tokens(32, 100), 2, /*priority=*/0);  // needs 4
  ScheduledBatch batch = e.step();
  // parent and c1 each copy block 1 (2 free left); high then pushes out c2
  // and c1, whose copy must not run.
  ASSERT_TRUE(contains(batch.preempted, c2));
  ASSERT_TRUE(contains(batch.preempted, c1));
  EXPECT_EQ(find(batch, c1), nullptr);
  ASSERT_NE(find(batch, high), nullptr);
  ASSERT_NE(find(batch, parent), nullptr);
  ASSERT_EQ(batch.copies.size(), 1u) << "only the parent's copy stays";
  EXPECT_EQ(batch.copies[0].dst, parent->block_table.blocks[1]);
  e.run_to_completion();
  EXPECT_EQ(c1->token_ids, reference_tokens(iota_tokens(12), 6, 1));
  EXPECT_EQ(c2->token_ids, reference_tokens(iota_tokens(12), 6, 2));
  EXPECT_EQ(parent->token_ids, reference_tokens(iota_tokens(12), 6));
  EXPECT_EQ(high->token_ids, reference_tokens(iota_tokens(32, 100), 2));
}

TEST(SchedulerTest, PriorityPreemptedSequenceIsNotReadmittedInTheSameStep) {
  FakeEngine e(4, 8, false, make_config(8, 256, 16));
  Sequence* low = e.submit(iota_tokens(20), 6, /*priority=*/1);
  e.step();
  e.step();                                                            // 3 blocks, decoding
  Sequence* high = e.submit(iota_tokens(12, 100), 2, /*priority=*/0);  // 2 blocks
  ScheduledBatch batch = e.step();
  ASSERT_TRUE(contains(batch.preempted, low));
  EXPECT_EQ(find(batch, low), nullptr) << "its first chunk would fit, but not this step";
  EXPECT_NE(find(batch, high), nullptr);
  e.run_to_completion();
  EXPECT_EQ(low->token_ids, reference_tokens(iota_tokens(20), 6));
}

TEST(SchedulerTest, PrefillChunkLimitAboveTheTokenBudgetIsCutToTheBudget) {
  FakeEngine e(64, 8, false, make_config(8, 16, /*max_prefill_chunk=*/64));
  EXPECT_EQ(e.config().max_prefill_chunk, 16);
  Sequence* a = e.submit(iota_tokens(40), 2);
  std::vector<int32_t> chunks;
  while (a->num_generated_tokens() == 0) {
    ScheduledBatch batch = e.step();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_NE(find(batch, a), nullptr);
    chunks.push_back(find(batch, a)->num_new_tokens);
    ASSERT_LT(chunks.size(), 10u);
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{16, 16, 8}));
  e.run_to_completion();
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(40), 2));
}

// A prefill served first takes all the budget the decodes leave; a running
// prefill served after it gets no chunk that step, but keeps its place, its
// computed tokens and its blocks.
TEST(SchedulerTest, RunningPrefillLeftWithoutBudgetWaitsAStepWithoutPreemption) {
  FakeEngine e(64, 8, false, make_config(8, 10));
  Sequence* low = e.submit(iota_tokens(30), 2, /*priority=*/1);
  low->max_chunk_tokens = 6;  // its own chunk cap (as prompt logprobs set)
  ScheduledBatch first = e.step();
  ASSERT_NE(find(first, low), nullptr);
  EXPECT_EQ(find(first, low)->num_new_tokens, 6);
  Sequence* high = e.submit(iota_tokens(30, 100), 2, /*priority=*/0);
  ScheduledBatch joined = e.step();
  ASSERT_NE(find(joined, low), nullptr);
  ASSERT_NE(find(joined, high), nullptr);
  EXPECT_EQ(find(joined, low)->num_new_tokens, 6);
  EXPECT_EQ(find(joined, high)->num_new_tokens, 4) << "what low left of the budget";
  ScheduledBatch batch = e.step();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, high);
  EXPECT_EQ(batch.seqs[0].num_new_tokens, 10);
  EXPECT_TRUE(batch.preempted.empty());
  EXPECT_EQ(low->status, SequenceStatus::kRunning);
  EXPECT_EQ(low->num_computed_tokens, 12);
  EXPECT_EQ(live_blocks(*low), 2);
  e.run_to_completion();
  EXPECT_EQ(low->token_ids, reference_tokens(iota_tokens(30), 2));
  EXPECT_EQ(high->token_ids, reference_tokens(iota_tokens(30, 100), 2));
}

// An abort between schedule() and on_batch_computed: the finished sequence
// is not advanced; the rest of the batch is.
TEST(SchedulerTest, SequenceAbortedWhileItsBatchRunsIsNotAdvanced) {
  const int32_t bs = 8;
  FakeEngine e(16, bs, true, make_config(8, 256));
  Sequence* a = e.submit(iota_tokens(20), 4);
  Sequence* b = e.submit(iota_tokens(20, 100), 4);
  ScheduledBatch batch = e.sched().schedule();
  ASSERT_EQ(batch.seqs.size(), 2u);
  e.sched().finish(a);
  e.sched().on_batch_computed(batch);
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  EXPECT_EQ(a->num_computed_tokens, 0);
  EXPECT_TRUE(a->block_table.blocks.empty());
  EXPECT_EQ(b->num_computed_tokens, 20);
  EXPECT_EQ(b->block_table.hashes.size(), 2u) << "b's full blocks are registered";
  EXPECT_EQ(e.bm().metrics().num_used_blocks, 3) << "only b holds blocks";
  EXPECT_EQ(e.bm().match_prefix(iota_tokens(20)).num_cached_tokens, 0)
      << "nothing of a was registered";
  EXPECT_EQ(e.sched().num_running(), 1);
}

TEST(SchedulerTest, RandomizedStressKeepsInvariantsAndFinishesEverything) {
  FakeEngine e(24, 8, true, make_config(6, 40, 16));
  RandomWorkload w;  // up to 64 + 40 = 104 tokens of 192 slots per sequence
  w.prefixes = {iota_tokens(16, 0), iota_tokens(24, 1000), {}};
  run_random_workload(&e, w);
  EXPECT_GT(e.sched().num_preemptions(), 0) << "the pool should have run dry";
  EXPECT_GT(e.bm().metrics().prefix_hits, 0);
}

}  // namespace
}  // namespace pvllm::testing

namespace pvllm::testing {
namespace {

// Sequences of one group (the beams of a beam search) advance together:
// admitting some of them while the rest cannot get in would leave the
// admitted ones holding blocks for a sibling that never comes.
TEST(SchedulerGroupTest, AGroupIsAdmittedWholeOrNotAtAll) {
  SchedulerConfig config = make_config(8, 256);
  config.admission_headroom_blocks = 0;
  FakeEngine e(10, 8, false, config);
  Sequence* filler = e.submit(iota_tokens(40), 2);  // 5 blocks, then 6
  e.step();
  std::vector<Sequence*> group;
  for (int i = 0; i < 3; ++i) {
    group.push_back(e.submit(iota_tokens(16, 100 * (i + 1)), 4));  // 2 blocks each, then 3
    group.back()->group = 42;
  }
  // 4 blocks are free: each member alone would fit, the three do not.
  ScheduledBatch waiting = e.step();
  for (Sequence* s : group) EXPECT_EQ(find(waiting, s), nullptr);
  EXPECT_EQ(e.sched().num_waiting(), 3);
  // Once the filler is done, all three get in in the same step.
  ASSERT_EQ(filler->status, SequenceStatus::kFinished);
  ScheduledBatch in = e.step();
  for (Sequence* s : group) EXPECT_NE(find(in, s), nullptr);
  e.run_to_completion();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(group[i]->token_ids, reference_tokens(iota_tokens(16, 100 * (i + 1)), 4));
  }
}

TEST(SchedulerGroupTest, AGroupIsPreemptedTogether) {
  SchedulerConfig config = make_config(8, 256);
  config.admission_headroom_blocks = 0;
  FakeEngine e(8, 8, false, config);
  std::vector<Sequence*> group;
  for (int i = 0; i < 2; ++i) {
    group.push_back(e.submit(iota_tokens(16, 100 * (i + 1)), 6, /*priority=*/1));
    group.back()->group = 7;
  }
  e.step();
  e.step();
  // A better priority needs 5 of the 8 blocks: pushing one member out would
  // do, but the group goes as a whole.
  Sequence* urgent = e.submit(iota_tokens(40, 500), 2, /*priority=*/-1);
  ScheduledBatch batch = e.step();
  EXPECT_NE(find(batch, urgent), nullptr);
  EXPECT_EQ(batch.preempted.size(), 2u);
  for (Sequence* s : group) EXPECT_EQ(s->status, SequenceStatus::kWaiting);
  e.run_to_completion();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(group[i]->token_ids, reference_tokens(iota_tokens(16, 100 * (i + 1)), 6));
  }
}

// The member served first cannot grow, and the sequence served last is its
// sibling: the whole group is preempted, that member included, while the
// sequence served before them keeps running.
TEST(SchedulerGroupTest, AMemberThatCannotGrowTakesItsWholeGroupOut) {
  FakeEngine e(4, 8, false, no_headroom(make_config(8, 256)));
  Sequence* solo = e.submit(iota_tokens(12, 500), 3);  // 2 blocks, room up to 16 tokens
  std::vector<Sequence*> group;
  for (int i = 0; i < 2; ++i) {
    group.push_back(e.submit(iota_tokens(8, 100 * (i + 1)), 2));  // 1 block each, then 2
    group.back()->group = 9;
  }
  ScheduledBatch first = e.step();
  ASSERT_EQ(first.seqs.size(), 3u);
  ASSERT_EQ(e.bm().num_available_blocks(), 0);
  ScheduledBatch batch = e.step();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, solo);
  EXPECT_EQ(batch.preempted, (std::vector<Sequence*>{group[0], group[1]}));
  for (Sequence* s : group) {
    EXPECT_EQ(s->status, SequenceStatus::kWaiting);
    EXPECT_EQ(s->num_computed_tokens, 0);
    EXPECT_TRUE(s->block_table.blocks.empty());
  }
  EXPECT_EQ(solo->num_preemptions, 0);
  e.run_to_completion();
  EXPECT_EQ(solo->token_ids, reference_tokens(iota_tokens(12, 500), 3));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(group[i]->token_ids, reference_tokens(iota_tokens(8, 100 * (i + 1)), 2));
  }
}

// Admission sizes a group by its own waiting members: a sequence queued
// behind it does not count (with it, the group would not fit).
TEST(SchedulerGroupTest, OnlyTheGroupsOwnMembersCountTowardItsAdmission) {
  FakeEngine e(5, 8, false, no_headroom(make_config(8, 256)));
  std::vector<Sequence*> group;
  for (int i = 0; i < 2; ++i) {
    group.push_back(e.submit(iota_tokens(16, 100 * (i + 1)), 1));  // 2 blocks each
    group.back()->group = 3;
  }
  Sequence* later = e.submit(iota_tokens(16, 900), 1);  // 2 more: 6 > 5
  ScheduledBatch batch = e.step();
  for (Sequence* s : group) EXPECT_NE(find(batch, s), nullptr);
  EXPECT_EQ(find(batch, later), nullptr) << "1 block left, it needs 2";
  EXPECT_TRUE(later->queued_for_memory);
  e.run_to_completion();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(group[i]->token_ids, reference_tokens(iota_tokens(16, 100 * (i + 1)), 1));
  }
  EXPECT_EQ(later->token_ids, reference_tokens(iota_tokens(16, 900), 1));
}

}  // namespace
}  // namespace pvllm::testing

namespace pvllm::testing {
namespace {

SchedulerConfig swap_config(PreemptionMode mode, double recompute_per_token = 0,
                            double swap_per_block = 0) {
  SchedulerConfig c = make_config(8, 64);
  c.admission_headroom_blocks = 0;
  c.preemption_mode = mode;
  c.recompute_seconds_per_token = recompute_per_token;
  c.swap_seconds_per_block = swap_per_block;
  return c;
}

// Sequences that outgrow the pool: preempted, swapped out with their K/V
// and back in without recompute, the fake model reading every key back.
TEST(SchedulerSwapTest, SwappedSequencesComeBackWithTheirKv) {
  FakeEngine e(5, 8, false, swap_config(PreemptionMode::kSwap), 0, /*num_swap_blocks=*/16);
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(e.submit(iota_tokens(6, 40 * i), 8));
  e.run_to_completion();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seqs[i]->token_ids, reference_tokens(iota_tokens(6, 40 * i), 8)) << i;
  }
  EXPECT_GT(e.sched().num_preemptions(), 0);
  EXPECT_EQ(e.sched().num_preemptions_by_swap(), e.sched().num_preemptions());
  EXPECT_EQ(e.sched().num_blocks_swapped_in(), e.sched().num_blocks_swapped_out());
  e.sched().schedule();  // the last swap-ins' blocks are released
  EXPECT_EQ(e.swap()->num_free(), 16) << "swap blocks leaked";
}

// No room in the swap pool: recompute instead.
TEST(SchedulerSwapTest, AFullSwapPoolFallsBackToRecompute) {
  FakeEngine e(5, 8, false, swap_config(PreemptionMode::kSwap), 0, /*num_swap_blocks=*/1);
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(e.submit(iota_tokens(10, 40 * i), 10));
  e.run_to_completion();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seqs[i]->token_ids, reference_tokens(iota_tokens(10, 40 * i), 10)) << i;
  }
  EXPECT_GT(e.sched().num_preemptions(), e.sched().num_preemptions_by_swap());
}

// Three sequences that cannot all stay in a 5-block pool: each ends with its
// reference tokens, and the scheduler had to preempt.
void run_three_through_preemption(FakeEngine& e) {
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(e.submit(iota_tokens(6, 40 * i), 8));
  e.run_to_completion();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seqs[i]->token_ids, reference_tokens(iota_tokens(6, 40 * i), 8)) << i;
  }
  ASSERT_GT(e.sched().num_preemptions(), 0);
}

// Auto: swap when moving a sequence's blocks costs less than recomputing
// its tokens, else recompute.
TEST(SchedulerSwapTest, AutoFollowsTheCosts) {
  for (const bool swap_is_cheap : {true, false}) {
    FakeEngine e(5, 8, false,
                 swap_config(PreemptionMode::kAuto, /*recompute_per_token=*/1.0,
                             /*swap_per_block=*/swap_is_cheap ? 0.5 : 100.0),
                 0, /*num_swap_blocks=*/16);
    run_three_through_preemption(e);
    EXPECT_EQ(e.sched().num_preemptions_by_swap(), swap_is_cheap ? e.sched().num_preemptions() : 0)
        << (swap_is_cheap ? "swap is cheaper" : "recompute is cheaper");
  }
}

// A victim whose last block is being copied on write this step is saved
// from the copy's source; n forked samples still end with the right keys.
TEST(SchedulerSwapTest, ForkedSamplesSwapCorrectly) {
  FakeEngine e(5, 8, false, swap_config(PreemptionMode::kSwap), 0, /*num_swap_blocks=*/16);
  Sequence* a = e.submit(iota_tokens(6), 10);
  a->num_seats = 3;
  e.step();  // a's prompt
  Sequence* b = e.fork(a, 1);
  Sequence* c = e.fork(a, 2);
  Sequence* d = e.submit(iota_tokens(9, 300), 6);
  e.run_to_completion();
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(6), 10, 0));
  EXPECT_EQ(b->token_ids, reference_tokens(iota_tokens(6), 10, 1));
  EXPECT_EQ(c->token_ids, reference_tokens(iota_tokens(6), 10, 2));
  EXPECT_EQ(d->token_ids, reference_tokens(iota_tokens(9, 300), 6));
  EXPECT_GT(e.sched().num_preemptions_by_swap(), 0);
}

// Admission's priority preemption picks victims already scheduled in the
// step: one whose last block is being copied on write (the copy has not
// run) is saved from the copy's source, which holds its keys.
TEST(SchedulerSwapTest, AVictimMidCopyOnWriteIsSavedFromTheSource) {
  FakeEngine e(5, 8, false, swap_config(PreemptionMode::kSwap), 0, /*num_swap_blocks=*/16);
  Sequence* a = e.submit(iota_tokens(6), 6, /*priority=*/1);
  a->num_seats = 3;
  e.step();  // the prompt: one block, shared by the three samples below
  Sequence* b = e.fork(a, 1);
  Sequence* c = e.fork(a, 2);
  Sequence* urgent = e.submit(iota_tokens(28, 300), 4, /*priority=*/-1);
  ScheduledBatch batch = e.step();  // a, b, c copy on write; urgent pushes some out
  EXPECT_FALSE(batch.copies.empty());
  EXPECT_FALSE(batch.swap_out.empty());
  e.run_to_completion();
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(6), 6, 0));
  EXPECT_EQ(b->token_ids, reference_tokens(iota_tokens(6), 6, 1));
  EXPECT_EQ(c->token_ids, reference_tokens(iota_tokens(6), 6, 2));
  EXPECT_EQ(urgent->token_ids, reference_tokens(iota_tokens(28, 300), 4));
}

// kRecompute with a swap pool, and costs that would favour swapping under
// kAuto: the pool is never used.
TEST(SchedulerSwapTest, RecomputeModeLeavesTheSwapPoolUnused) {
  FakeEngine e(5, 8, false,
               swap_config(PreemptionMode::kRecompute, /*recompute_per_token=*/1.0,
                           /*swap_per_block=*/0.5),
               0, /*num_swap_blocks=*/16);
  run_three_through_preemption(e);
  EXPECT_EQ(e.sched().num_preemptions_by_swap(), 0);
  EXPECT_EQ(e.sched().num_blocks_swapped_out(), 0);
  EXPECT_EQ(e.swap()->num_free(), 16);
}

// With a sliding window, a victim whose leading blocks were released cannot
// have them swapped back: it is recomputed, though the swap pool has room.
TEST(SchedulerSwapTest, AVictimWithReleasedBlocksIsRecomputed) {
  const int32_t window = 8;
  FakeEngine e(3, 8, false, swap_config(PreemptionMode::kSwap), window, /*num_swap_blocks=*/16);
  Sequence* a = e.submit(iota_tokens(16), 6, /*priority=*/1);
  e.step();  // the prompt; its first block falls out of the window
  ASSERT_EQ(a->block_table.blocks[0], kReleasedBlock);
  Sequence* b = e.submit(iota_tokens(15, 100), 3, /*priority=*/0);
  e.step();  // a decodes into a new block; b's first chunk takes the last one
  ASSERT_EQ(e.bm().num_available_blocks(), 0);
  ASSERT_EQ(b->status, SequenceStatus::kRunning);
  ScheduledBatch batch = e.step();  // b needs a block: a, served last, goes
  ASSERT_EQ(batch.preempted, (std::vector<Sequence*>{a}));
  EXPECT_EQ(a->status, SequenceStatus::kWaiting);
  EXPECT_EQ(a->num_computed_tokens, 0);
  EXPECT_TRUE(a->swapped_blocks.empty());
  EXPECT_TRUE(batch.swap_out.empty());
  EXPECT_EQ(e.sched().num_preemptions_by_swap(), 0);
  EXPECT_EQ(e.swap()->num_free(), 16);
  e.run_to_completion();
  EXPECT_EQ(a->token_ids, reference_tokens(iota_tokens(16), 6, 0, window));
  EXPECT_EQ(b->token_ids, reference_tokens(iota_tokens(15, 100), 3, 0, window));
}

// Blocks of 16, a budget of 8 tokens, 3 blocks. x and d (priority 0) are
// served before c (priority 1); d's prompt is long. When d's prefill needs
// its second block, c is swapped out; x finishes in that step.
struct SwapScene {
  Sequence* x = nullptr;
  Sequence* c = nullptr;
  Sequence* d = nullptr;
};

SchedulerConfig small_budget_swap_config() {
  SchedulerConfig config = swap_config(PreemptionMode::kSwap);
  config.max_num_batched_tokens = 8;
  return config;
}

SwapScene swap_out_behind_a_prefill(FakeEngine* e) {
  SwapScene s;
  s.x = e->submit(iota_tokens(3), 4, /*priority=*/0);
  s.c = e->submit(iota_tokens(3, 100), 6, /*priority=*/1);
  e->step();
  s.d = e->submit(iota_tokens(40, 200), 1, /*priority=*/0);
  e->step();  // d's first chunk takes the last block
  e->step();  // d's second chunk still fits its block
  EXPECT_EQ(e->bm().num_available_blocks(), 0);
  ScheduledBatch batch = e->step();
  EXPECT_EQ(batch.preempted, (std::vector<Sequence*>{s.c}));
  EXPECT_EQ(batch.swap_out.size(), 1u);
  EXPECT_EQ(s.c->status, SequenceStatus::kSwapped);
  EXPECT_EQ(s.x->status, SequenceStatus::kFinished);
  return s;
}

TEST(SchedulerSwapTest, SwappedSequenceWaitsWhileTheRunningOnesTakeTheWholeBudget) {
  FakeEngine e(3, 16, false, small_budget_swap_config(), 0, /*num_swap_blocks=*/16);
  const SwapScene s = swap_out_behind_a_prefill(&e);
  ASSERT_FALSE(HasFailure());
  // Blocks would allow c back; the token budget does not.
  ScheduledBatch batch = e.step();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, s.d);
  EXPECT_EQ(batch.num_batched_tokens, 8);
  EXPECT_TRUE(batch.swap_in.empty());
  EXPECT_EQ(s.c->status, SequenceStatus::kSwapped);
  EXPECT_EQ(e.sched().num_swapped(), 1);
  EXPECT_GE(e.bm().num_available_blocks(), e.bm().blocks_for(s.c->num_computed_tokens + 1));
  e.run_to_completion();
  EXPECT_EQ(e.sched().num_blocks_swapped_in(), 1);
  EXPECT_EQ(s.c->num_preemptions, 1);
  EXPECT_EQ(s.c->token_ids, reference_tokens(iota_tokens(3, 100), 6));
  EXPECT_EQ(s.d->token_ids, reference_tokens(iota_tokens(40, 200), 1));
  EXPECT_EQ(s.x->token_ids, reference_tokens(iota_tokens(3), 4));
}

TEST(SchedulerSwapTest, FinishingASwappedSequenceReturnsItsSwapBlocks) {
  FakeEngine e(3, 16, false, small_budget_swap_config(), 0, /*num_swap_blocks=*/16);
  const SwapScene s = swap_out_behind_a_prefill(&e);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(e.swap()->num_free(), 15);
  e.sched().finish(s.c);  // aborted while swapped
  EXPECT_EQ(s.c->status, SequenceStatus::kFinished);
  EXPECT_TRUE(s.c->swapped_blocks.empty());
  EXPECT_EQ(e.swap()->num_free(), 16);
  EXPECT_EQ(e.sched().num_swapped(), 0);
  EXPECT_EQ(e.sched().num_waiting(), 0);
  EXPECT_EQ(e.sched().num_running(), 1);
  // Finishing it again finds it in no queue and changes nothing.
  e.sched().finish(s.c);
  EXPECT_EQ(e.swap()->num_free(), 16);
  EXPECT_EQ(e.sched().num_running(), 1);
  e.run_to_completion();
  EXPECT_EQ(s.d->token_ids, reference_tokens(iota_tokens(40, 200), 1));
  EXPECT_EQ(e.sched().num_blocks_swapped_in(), 0);
}

// Driven by hand: a sequence whose next token has not been appended yet
// (a beam waiting for its siblings' draws) has nothing to compute. It is
// skipped while running, and swapped back in it gets its blocks without a
// chunk.
TEST(SchedulerSwapTest, SequenceWithoutItsNextTokenSwapsBackWithoutAChunk) {
  BlockManager bm(2, 8, false);
  SwapPool swap(4);
  Scheduler sched(swap_config(PreemptionMode::kSwap), &bm, &swap);
  Sequence x, y;
  x.seq_id = x.arrival_order = 1;
  x.token_ids = iota_tokens(8);
  x.num_prompt_tokens = 8;
  y.seq_id = y.arrival_order = 2;
  y.priority = 1;
  y.token_ids = iota_tokens(8, 100);
  y.num_prompt_tokens = 8;
  sched.add(&x);
  sched.add(&y);
  const ScheduledBatch prefill = sched.schedule();
  ASSERT_EQ(prefill.seqs.size(), 2u);
  sched.on_batch_computed(prefill);
  ASSERT_EQ(bm.num_available_blocks(), 0);

  x.token_ids.push_back(1);  // x's token arrives, y's not yet
  const ScheduledBatch grow = sched.schedule();
  ASSERT_EQ(grow.seqs.size(), 1u);
  EXPECT_EQ(grow.seqs[0].seq, &x);
  ASSERT_EQ(grow.preempted, (std::vector<Sequence*>{&y})) << "x's second block is y's";
  ASSERT_EQ(y.status, SequenceStatus::kSwapped);
  ASSERT_EQ(y.swapped_blocks.size(), 1u);
  const BlockId y_swap_block = y.swapped_blocks[0];
  sched.on_batch_computed(grow);
  sched.finish(&x);

  const ScheduledBatch back = sched.schedule();
  EXPECT_TRUE(back.seqs.empty()) << "y has no token to feed";
  ASSERT_EQ(back.swap_in.size(), 1u);
  EXPECT_EQ(back.swap_in[0].src, y_swap_block);
  ASSERT_EQ(y.block_table.blocks.size(), 1u);
  EXPECT_EQ(back.swap_in[0].dst, y.block_table.blocks[0]);
  EXPECT_EQ(y.status, SequenceStatus::kRunning);
  EXPECT_EQ(y.num_computed_tokens, 8);
  sched.on_batch_computed(back);

  const ScheduledBatch idle = sched.schedule();  // still no token: skipped, not preempted
  EXPECT_TRUE(idle.seqs.empty());
  EXPECT_TRUE(idle.preempted.empty());
  EXPECT_EQ(sched.num_running(), 1);
  EXPECT_EQ(swap.num_free(), 4) << "the swap-in has run: its swap block is free";

  y.token_ids.push_back(2);
  const ScheduledBatch decode = sched.schedule();
  ASSERT_EQ(decode.seqs.size(), 1u);
  EXPECT_EQ(decode.seqs[0].seq, &y);
  EXPECT_EQ(decode.seqs[0].num_new_tokens, 1);
  EXPECT_TRUE(decode.seqs[0].samples_next_token);
  EXPECT_EQ(y.block_table.blocks.size(), 2u);
  sched.finish(&y);
  EXPECT_EQ(bm.num_available_blocks(), 2);
}

}  // namespace
}  // namespace pvllm::testing
