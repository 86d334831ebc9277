// The scheduler's test bench: a fake engine driven by hand. The fake
// "model" keeps a KV cache of token ids (one per slot), writes each
// scheduled token at its slot, and samples from the context it reads back
// through the block table, so any scheduling or block bookkeeping mistake
// changes the generated tokens. With a sliding window W it reads only the
// last W positions, as the attention would, so a block released too early
// (and reused by another sequence) changes them too.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/kv/block_manager.h"
#include "core/sched/scheduler.h"

namespace pvllm::testing {

inline constexpr int32_t kVocab = 997;

// The fake model: the next token is a function of the whole context.
inline int32_t next_token(const std::vector<int32_t>& context, int32_t sample_index) {
  uint64_t h = 1469598103934665603ULL + static_cast<uint64_t>(sample_index);
  for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ULL;
  return static_cast<int32_t>(h % kVocab);
}

inline std::vector<int32_t> iota_tokens(int32_t n, int32_t first = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// What the fake model reads of `tokens` for the next one: the last
// `window` tokens, or all of them when window is 0.
inline std::vector<int32_t> window_of(const std::vector<int32_t>& tokens, int32_t window) {
  const size_t n = tokens.size();
  const size_t first = window > 0 && n > static_cast<size_t>(window) ? n - window : 0;
  return std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(first), tokens.end());
}

// What a sequence must end as, computed without any scheduler.
inline std::vector<int32_t> reference_tokens(std::vector<int32_t> tokens, int32_t max_new,
                                             int32_t sample_index = 0, int32_t window = 0) {
  for (int32_t i = 0; i < max_new; ++i) {
    tokens.push_back(next_token(window_of(tokens, window), sample_index));
  }
  return tokens;
}

class FakeEngine {
 public:
  // num_swap_blocks > 0: a swap pool of that many blocks (preemption by
  // swap, as config.preemption_mode says), its "K/V" kept like the pool's.
  FakeEngine(int32_t num_blocks, int32_t block_size, bool prefix_caching,
             const SchedulerConfig& config, int32_t sliding_window = 0, int32_t num_swap_blocks = 0)
      : bm_(num_blocks, block_size, prefix_caching, sliding_window),
        swap_(num_swap_blocks > 0 ? std::make_unique<SwapPool>(num_swap_blocks) : nullptr),
        sched_(config, &bm_, swap_.get()),
        kv_(static_cast<size_t>(num_blocks) * block_size, -1),
        swap_kv_(static_cast<size_t>(num_swap_blocks) * block_size, -1),
        window_(sliding_window) {}

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
    child->token_ids.push_back(next_token(window_of(child->token_ids, window_), sample_index));
    child->num_computed_tokens = parent->num_computed_tokens;
    parent->num_seats = 1;
    Sequence* raw = child.get();
    max_new_[raw] = max_new_[parent];
    seqs_.push_back(std::move(child));
    sched_.fork(*parent, raw);
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
  SwapPool* swap() { return swap_.get(); }
  int32_t window() const { return window_; }
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
      ASSERT_TRUE(p->block_table.blocks.empty());
      if (p->status == SequenceStatus::kSwapped) {
        ASSERT_EQ(static_cast<int32_t>(p->swapped_blocks.size()),
                  bm_.blocks_for(p->num_computed_tokens));
        continue;
      }
      ASSERT_EQ(p->status, SequenceStatus::kWaiting);
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
    // As the engine runs them: fork copies, swap-outs, swap-ins, copies,
    // the forward.
    for (const BlockCopy& c : batch.fork_copies) {
      std::copy_n(kv_.begin() + c.src * bs, bs, kv_.begin() + c.dst * bs);
    }
    for (const BlockCopy& c : batch.swap_out) {
      std::copy_n(kv_.begin() + c.src * bs, bs, swap_kv_.begin() + c.dst * bs);
    }
    for (const BlockCopy& c : batch.swap_in) {
      std::copy_n(swap_kv_.begin() + c.src * bs, bs, kv_.begin() + c.dst * bs);
    }
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
    // A token read back through the block table; a released block reads as
    // -1, so the checks below fail on it.
    auto read = [&](const Sequence& seq, int32_t pos) {
      if (seq.block_table.blocks[pos / bs] == kReleasedBlock) return -1;
      return kv_[bm_.slot(seq.block_table, pos)];
    };
    for (const ScheduledSeq& s : batch.seqs) {
      const Sequence& seq = *s.seq;
      // Every row attends its window (or its whole prefix): each key it
      // reads must hold the right token.
      for (int32_t pos = seq.num_computed_tokens; pos < seq.num_computed_tokens + s.num_new_tokens;
           ++pos) {
        const int32_t from = window_ > 0 ? std::max(0, pos - window_ + 1) : 0;
        for (int32_t k = from; k <= pos; ++k) {
          ASSERT_EQ(read(seq, k), seq.token_ids[k])
              << "seq " << seq.seq_id << " row " << pos << " reads a wrong key at " << k;
        }
      }
      if (!s.samples_next_token) continue;
      const int32_t first = window_ > 0 ? std::max(0, seq.num_tokens() - window_) : 0;
      std::vector<int32_t> context;
      for (int32_t pos = first; pos < seq.num_tokens(); ++pos) context.push_back(read(seq, pos));
      sampled_[s.seq] = next_token(context, seq.sample_index);
    }
  }

  void check_pool() {
    const KvCacheMetrics m = bm_.metrics();
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
  std::unique_ptr<SwapPool> swap_;
  Scheduler sched_;
  std::vector<int32_t> kv_;       // [num_blocks * block_size] token id per slot
  std::vector<int32_t> swap_kv_;  // [num_swap_blocks * block_size] likewise
  int32_t window_;                // 0: the fake model reads the whole context
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::map<const Sequence*, int32_t> max_new_;
  std::map<const Sequence*, int32_t> sampled_;
  uint64_t next_id_ = 1;
};

inline SchedulerConfig make_config(int32_t max_num_seqs, int32_t max_num_batched_tokens,
                                   int32_t max_prefill_chunk = 0) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.max_prefill_chunk = max_prefill_chunk;
  return c;
}

// For tests of preemption itself: admission fills the pool to the last
// block, so the running set runs out on its next block.
inline SchedulerConfig no_headroom(SchedulerConfig c) {
  c.admission_headroom_blocks = 0;
  return c;
}

inline const ScheduledSeq* find(const ScheduledBatch& batch, const Sequence* seq) {
  for (const ScheduledSeq& s : batch.seqs) {
    if (s.seq == seq) return &s;
  }
  return nullptr;
}

// Blocks a sequence's table holds (released entries left out).
inline int32_t live_blocks(const Sequence& seq) {
  const auto& b = seq.block_table.blocks;
  return static_cast<int32_t>(
      std::count_if(b.begin(), b.end(), [](BlockId id) { return id != kReleasedBlock; }));
}

inline bool contains(const std::vector<Sequence*>& v, const Sequence* seq) {
  return std::find(v.begin(), v.end(), seq) != v.end();
}

// A randomized stress workload. While requests remain to submit, about one
// step in three submits a prompt (one of `prefixes`, so prefix hits and
// cached-block evictions are common, plus 1..max_tail random tokens) with
// 1..max_new tokens to generate and a random priority 0..2; about one step
// in `abort_one_in` aborts a random request. Steps until everything has
// finished, calling `after_step` with the requests after each step; then
// every request not aborted must hold its reference tokens (with the
// engine's window) and no block may be in use.
struct RandomWorkload {
  uint32_t seed = 42;
  int num_requests = 80;
  std::vector<std::vector<int32_t>> prefixes;
  int32_t max_tail = 40;
  int32_t max_new = 40;
  uint32_t abort_one_in = 50;
};

inline void run_random_workload(
    FakeEngine* e, const RandomWorkload& w,
    const std::function<void(const std::vector<Sequence*>&)>& after_step = nullptr) {
  std::mt19937 rng(w.seed);
  std::vector<Sequence*> seqs;
  std::vector<std::vector<int32_t>> expected;
  std::vector<Sequence*> aborted;
  int steps = 0;
  int submitted = 0;
  while ((submitted < w.num_requests || e->sched().num_running() + e->sched().num_waiting() > 0) &&
         steps < 20000) {
    if (submitted < w.num_requests && rng() % 3 == 0) {
      std::vector<int32_t> prompt = w.prefixes[rng() % w.prefixes.size()];
      const int32_t tail = 1 + static_cast<int32_t>(rng() % w.max_tail);
      for (int32_t i = 0; i < tail; ++i) prompt.push_back(static_cast<int32_t>(rng() % kVocab));
      const int32_t max_new = 1 + static_cast<int32_t>(rng() % w.max_new);
      const int32_t priority = static_cast<int32_t>(rng() % 3);
      seqs.push_back(e->submit(prompt, max_new, priority));
      expected.push_back(reference_tokens(prompt, max_new, 0, e->window()));
      ++submitted;
    }
    if (rng() % w.abort_one_in == 0 && !seqs.empty()) {  // abort something still live
      Sequence* s = seqs[rng() % seqs.size()];
      if (s->status != SequenceStatus::kFinished) {
        e->sched().finish(s);
        aborted.push_back(s);
      }
    }
    e->step();
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "at step " << steps;
    if (after_step) after_step(seqs);
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "at step " << steps;
    ++steps;
  }
  ASSERT_LT(steps, 20000) << "scheduler stopped making progress";
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_EQ(seqs[i]->status, SequenceStatus::kFinished);
    if (contains(aborted, seqs[i])) continue;
    EXPECT_EQ(seqs[i]->token_ids, expected[i]) << "seq " << seqs[i]->seq_id;
  }
  EXPECT_EQ(e->bm().metrics().num_used_blocks, 0);
}

}  // namespace pvllm::testing
