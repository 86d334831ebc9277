// Scheduler: driven by hand with a fake engine. The fake "model" keeps a KV
// cache of token ids (one per slot), writes each scheduled token at its slot,
// and samples from the context it reads back through the block table, so any
// scheduling or block bookkeeping mistake changes the generated tokens.
#include "core/sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/kv/block_manager.h"

namespace pvllm {
namespace {

constexpr int32_t kVocab = 997;

// The fake model: the next token is a function of the whole context.
int32_t next_token(const std::vector<int32_t>& context, int32_t sample_index) {
  uint64_t h = 1469598103934665603ULL + static_cast<uint64_t>(sample_index);
  for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ULL;
  return static_cast<int32_t>(h % kVocab);
}

std::vector<int32_t> iota_tokens(int32_t n, int32_t first = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// What a sequence must end as, computed without any scheduler.
std::vector<int32_t> reference_tokens(std::vector<int32_t> tokens, int32_t max_new,
                                      int32_t sample_index = 0) {
  for (int32_t i = 0; i < max_new; ++i) tokens.push_back(next_token(tokens, sample_index));
  return tokens;
}

class FakeEngine {
 public:
  FakeEngine(int32_t num_blocks, int32_t block_size, bool prefix_caching,
             const SchedulerConfig& config)
      : bm_(num_blocks, block_size, prefix_caching),
        sched_(config, &bm_),
        kv_(static_cast<size_t>(num_blocks) * block_size, -1) {}

  Sequence* submit(std::vector<int32_t> prompt, int32_t max_new, int32_t priority = 0) {
    auto seq = std::make_unique<Sequence>();
    seq->seq_id = next_id_;
    seq->request_id = next_id_;
    seq->arrival_order = next_id_;
    ++next_id_;
    seq->priority = priority;
    seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
    seq->token_ids = std::move(prompt);
    Sequence* raw = seq.get();
    max_new_[raw] = max_new;
    seqs_.push_back(std::move(seq));
    sched_.add(raw);
    return raw;
  }

  // What the engine does for n > 1 once the prompt is computed: a new
  // sample shares the parent's blocks and draws its own first token.
  Sequence* fork(Sequence* parent, int32_t sample_index) {
    auto child = std::make_unique<Sequence>();
    child->seq_id = next_id_++;
    child->request_id = parent->request_id;
    child->arrival_order = parent->arrival_order;
    child->priority = parent->priority;
    child->sample_index = sample_index;
    child->num_prompt_tokens = parent->num_prompt_tokens;
    child->token_ids.assign(parent->token_ids.begin(),
                            parent->token_ids.begin() + parent->num_prompt_tokens);
    child->token_ids.push_back(next_token(child->token_ids, sample_index));
    child->num_computed_tokens = parent->num_computed_tokens;
    bm_.fork(parent->block_table, &child->block_table);
    parent->num_seats = 1;
    Sequence* raw = child.get();
    max_new_[raw] = max_new_[parent];
    seqs_.push_back(std::move(child));
    sched_.add_running(raw);
    return raw;
  }

  // One engine step: schedule, check invariants, "forward", sample, finish.
  ScheduledBatch step() {
    ScheduledBatch batch = sched_.schedule();
    check_batch(batch);
    if (::testing::Test::HasFatalFailure()) return batch;
    forward(batch);
    sched_.on_batch_computed(batch);
    for (const ScheduledSeq& s : batch.seqs) {
      if (!s.samples_next_token) continue;
      s.seq->token_ids.push_back(sampled_[s.seq]);
      if (s.seq->num_generated_tokens() >= max_new_[s.seq]) sched_.finish(s.seq);
    }
    check_pool();
    return batch;
  }

  // Steps until nothing is left; returns the number of steps taken.
  int run_to_completion(int max_steps = 10000) {
    int steps = 0;
    while (sched_.num_running() + sched_.num_waiting() > 0 && steps < max_steps) {
      step();
      if (::testing::Test::HasFatalFailure()) break;
      ++steps;
    }
    return steps;
  }

  BlockManager& bm() { return bm_; }
  Scheduler& sched() { return sched_; }
  const SchedulerConfig& config() const { return sched_.config(); }

 private:
  void check_batch(const ScheduledBatch& batch) {
    const SchedulerConfig& cfg = sched_.config();
    const int32_t chunk =
        cfg.max_prefill_chunk == 0 ? cfg.max_num_batched_tokens : cfg.max_prefill_chunk;
    int32_t total = 0;
    std::set<const Sequence*> seen;
    for (const ScheduledSeq& s : batch.seqs) {
      Sequence* seq = s.seq;
      ASSERT_TRUE(seen.insert(seq).second) << "sequence scheduled twice";
      ASSERT_EQ(seq->status, SequenceStatus::kRunning);
      ASSERT_GE(s.num_new_tokens, 1);
      ASSERT_LE(s.num_new_tokens, chunk);
      const int32_t end = seq->num_computed_tokens + s.num_new_tokens;
      ASSERT_LE(end, seq->num_tokens());
      ASSERT_EQ(s.samples_next_token, end == seq->num_tokens());
      // Blocks for every token it feeds, owned alone where it writes.
      ASSERT_GE(static_cast<int32_t>(seq->block_table.blocks.size()), bm_.blocks_for(end))
          << "seq " << seq->seq_id << " scheduled without blocks";
      for (int32_t b = seq->num_computed_tokens / bm_.block_size(); b < bm_.blocks_for(end); ++b) {
        ASSERT_EQ(bm_.ref_count(seq->block_table.blocks[b]), 1)
            << "seq " << seq->seq_id << " writes into a shared block";
      }
      total += s.num_new_tokens;
    }
    for (const Sequence* p : batch.preempted) {
      ASSERT_EQ(seen.count(p), 0u) << "a preempted sequence is also scheduled";
      ASSERT_EQ(p->status, SequenceStatus::kWaiting);
      ASSERT_TRUE(p->block_table.blocks.empty());
      ASSERT_EQ(p->num_computed_tokens, 0);
    }
    // Every copy fills a distinct block that a scheduled sequence alone owns.
    std::set<BlockId> copy_dsts;
    for (const BlockCopy& c : batch.copies) {
      ASSERT_TRUE(copy_dsts.insert(c.dst).second) << "two copies into block " << c.dst;
      bool owned = false;
      for (const ScheduledSeq& s : batch.seqs) {
        const auto& blocks = s.seq->block_table.blocks;
        owned |= std::find(blocks.begin(), blocks.end(), c.dst) != blocks.end();
      }
      ASSERT_TRUE(owned) << "copy into block " << c.dst << " that no scheduled sequence holds";
      ASSERT_EQ(bm_.ref_count(c.dst), 1);
    }
    ASSERT_EQ(batch.num_batched_tokens, total);
    ASSERT_LE(total, cfg.max_num_batched_tokens);
    int32_t seats = 0;
    for (const auto& seq : seqs_) {
      if (seq->status == SequenceStatus::kRunning) seats += seq->num_seats;
    }
    ASSERT_LE(seats, cfg.max_num_seqs);
    ASSERT_EQ(sched_.num_running() + sched_.num_waiting(), num_live());
  }

  void forward(const ScheduledBatch& batch) {
    const int32_t bs = bm_.block_size();
    for (const BlockCopy& c : batch.copies) {
      std::copy_n(kv_.begin() + c.src * bs, bs, kv_.begin() + c.dst * bs);
    }
    for (const ScheduledSeq& s : batch.seqs) {
      const Sequence& seq = *s.seq;
      for (int32_t pos = seq.num_computed_tokens; pos < seq.num_computed_tokens + s.num_new_tokens;
           ++pos) {
        kv_[bm_.slot(seq.block_table, pos)] = seq.token_ids[pos];
      }
    }
    // Attention reads the whole context back through the block table.
    for (const ScheduledSeq& s : batch.seqs) {
      if (!s.samples_next_token) continue;
      const Sequence& seq = *s.seq;
      std::vector<int32_t> context(seq.token_ids.size());
      for (int32_t pos = 0; pos < seq.num_tokens(); ++pos) {
        context[pos] = kv_[bm_.slot(seq.block_table, pos)];
      }
      EXPECT_EQ(context, seq.token_ids) << "seq " << seq.seq_id << " read a wrong KV cache";
      sampled_[s.seq] = next_token(context, seq.sample_index);
    }
  }

  void check_pool() {
    const BlockManagerMetrics m = bm_.metrics();
    ASSERT_EQ(m.num_used_blocks + m.num_free_blocks + m.num_cached_blocks, m.num_blocks);
    // Blocks are taken only as tokens need them: less than one block's
    // worth of empty slots per running sequence.
    ASSERT_GE(sched_.num_reserved_unused_slots(), 0);
    ASSERT_LT(sched_.num_reserved_unused_slots(),
              static_cast<int64_t>(std::max(sched_.num_running(), 1)) * bm_.block_size());
  }

  int32_t num_live() const {
    return static_cast<int32_t>(std::count_if(seqs_.begin(), seqs_.end(), [](const auto& s) {
      return s->status != SequenceStatus::kFinished;
    }));
  }

  BlockManager bm_;
  Scheduler sched_;
  std::vector<int32_t> kv_;  // [num_blocks * block_size] token id per slot
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::map<const Sequence*, int32_t> max_new_;
  std::map<const Sequence*, int32_t> sampled_;
  uint64_t next_id_ = 1;
};

SchedulerConfig make_config(int32_t max_num_seqs, int32_t max_num_batched_tokens,
                            int32_t max_prefill_chunk = 0) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.max_prefill_chunk = max_prefill_chunk;
  return c;
}

// For tests of preemption itself: admission fills the pool to the last
// block, so the running set runs out on its next block.
SchedulerConfig no_headroom(SchedulerConfig c) {
  c.admission_headroom_blocks = 0;
  return c;
}

const ScheduledSeq* find(const ScheduledBatch& batch, const Sequence* seq) {
  for (const ScheduledSeq& s : batch.seqs) {
    if (s.seq == seq) return &s;
  }
  return nullptr;
}

bool contains(const std::vector<Sequence*>& v, const Sequence* seq) {
  return std::find(v.begin(), v.end(), seq) != v.end();
}

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
  const BlockManagerMetrics m = e.bm().metrics();
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

TEST(SchedulerTest, RandomizedStressKeepsInvariantsAndFinishesEverything) {
  const int32_t bs = 8;
  FakeEngine e(24, bs, true, make_config(6, 40, 16));
  std::mt19937 rng(42);
  // A few shared prefixes make prefix hits (and cached-block eviction) common.
  const std::vector<std::vector<int32_t>> prefixes = {
      iota_tokens(16, 0), iota_tokens(24, 1000), {}};
  struct Expected {
    Sequence* seq;
    std::vector<int32_t> tokens;
  };
  std::vector<Expected> expected;
  std::vector<Sequence*> aborted;
  int steps = 0;
  const int num_requests = 80;
  int submitted = 0;
  while ((submitted < num_requests || e.sched().num_running() + e.sched().num_waiting() > 0) &&
         steps < 20000) {
    if (submitted < num_requests && rng() % 3 == 0) {
      std::vector<int32_t> prompt = prefixes[rng() % prefixes.size()];
      const int32_t tail = 1 + static_cast<int32_t>(rng() % 40);
      for (int32_t i = 0; i < tail; ++i) prompt.push_back(static_cast<int32_t>(rng() % kVocab));
      const int32_t max_new = 1 + static_cast<int32_t>(rng() % 40);  // <= 104 of 192 slots
      const int32_t priority = static_cast<int32_t>(rng() % 3);
      Sequence* s = e.submit(prompt, max_new, priority);
      expected.push_back({s, reference_tokens(prompt, max_new)});
      ++submitted;
    }
    if (rng() % 50 == 0 && !expected.empty()) {  // abort something still live
      Sequence* s = expected[rng() % expected.size()].seq;
      if (s->status != SequenceStatus::kFinished) {
        e.sched().finish(s);
        aborted.push_back(s);
      }
    }
    e.step();
    ASSERT_FALSE(HasFatalFailure()) << "at step " << steps;
    ++steps;
  }
  ASSERT_LT(steps, 20000) << "scheduler stopped making progress";
  EXPECT_GT(e.sched().num_preemptions(), 0) << "the pool should have run dry";
  EXPECT_GT(e.bm().metrics().prefix_hits, 0);
  for (const Expected& x : expected) {
    ASSERT_EQ(x.seq->status, SequenceStatus::kFinished);
    if (contains(aborted, x.seq)) continue;
    EXPECT_EQ(x.seq->token_ids, x.tokens) << "seq " << x.seq->seq_id;
  }
  EXPECT_EQ(e.bm().metrics().num_used_blocks, 0);
}

}  // namespace
}  // namespace pvllm
