// The ModelRunner over a recording backend: the order of the batch's block
// traffic, what a failed fork copy or swap loses, the draws of each
// sequence as planned, and the out-of-memory split that leaves only a
// sequence that cannot run alone failing.
#include "core/engine/model_runner.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/kv/kv_cache_manager.h"
#include "core/sched/scheduler.h"

namespace pvllm {
namespace {

// Draws, for each row, the input token of the logits row it reads plus
// 1000 * its sample index; runs out of memory for batches of more than
// max_seqs sequences or holding the token `poison`.
class RecordingBackend final : public Backend {
 public:
  std::string name() const override { return "recording"; }
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override {
    log.push_back("forward:" + std::to_string(md.num_seqs));
    if (md.num_seqs > max_seqs) return OutOfMemory("too many sequences");
    for (int32_t t : md.input_ids) {
      if (t == poison) return OutOfMemory("this one never fits");
    }
    out->assign(rows.size(), SampleResult{});
    for (size_t i = 0; i < rows.size(); ++i) {
      (*out)[i].token_id =
          md.input_ids[md.logits_rows.at(rows[i].logits_index)] + 1000 * rows[i].sample_index;
    }
    return Status::Ok();
  }
  Status forward(const BatchMetadata&, float*) override { return Unsupported("not here"); }
  Status copy_blocks(const std::vector<BlockCopy>& copies) override {
    log.push_back("copy:" + std::to_string(copies.size()));
    return fail_copies ? Internal("copy failed") : Status::Ok();
  }
  Status swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection d) override {
    log.push_back(std::string(d == SwapDirection::kOut ? "out:" : "in:") +
                  std::to_string(copies.size()));
    return Status::Ok();
  }
  int32_t num_blocks() const override { return 64; }
  int32_t block_size() const override { return 16; }

  std::vector<std::string> log;
  int32_t max_seqs = 1 << 20;
  int32_t poison = -1;
  bool fail_copies = false;
};

class ModelRunnerTest : public ::testing::Test {
 protected:
  ModelRunnerTest()
      : kv_(make_kv_cache_manager(KvAllocator::kPaged, 64, 16, false, 256)),
        scheduler_(SchedulerConfig{}, kv_.get()),
        runner_(&backend_, kv_.get(), 2000) {}

  // Sequences whose prompts end with `last[i]`, scheduled in one batch.
  ScheduledBatch schedule(const std::vector<int32_t>& last) {
    for (size_t i = 0; i < last.size(); ++i) {
      auto seq = std::make_unique<Sequence>();
      seq->seq_id = i + 1;
      seq->request_id = i + 1;
      seq->arrival_order = i;
      seq->token_ids = {1, 2, last[i]};
      seq->num_prompt_tokens = 3;
      scheduler_.add(seq.get());
      seqs_.push_back(std::move(seq));
    }
    return scheduler_.schedule();
  }

  // One draw per sequence, or `n` for the first.
  std::vector<SeqPlan> plans(const ScheduledBatch& batch, int32_t n_first = 1) {
    std::vector<SeqPlan> out(batch.seqs.size());
    for (size_t i = 0; i < out.size(); ++i) {
      for (int32_t k = 0; k < (i == 0 ? n_first : 1); ++k) {
        SampleRow r;
        r.params = &params_;
        r.sample_index = k;
        out[i].draws.push_back(r);
      }
    }
    return out;
  }

  RecordingBackend backend_;
  std::unique_ptr<KvCacheManager> kv_;
  Scheduler scheduler_;
  ModelRunner runner_;
  SamplingParams params_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(ModelRunnerTest, EverySequenceGetsItsPlannedDrawsInBatchOrder) {
  const ScheduledBatch batch = schedule({7, 8, 9});
  ASSERT_EQ(batch.seqs.size(), 3u);
  ModelRunner::Result result;
  runner_.run(batch, plans(batch, 3), &result);
  ASSERT_EQ(result.outcomes.size(), 3u);
  ASSERT_EQ(result.outcomes[0].samples.size(), 3u);
  for (int32_t k = 0; k < 3; ++k) EXPECT_EQ(result.outcomes[0].samples[k].token_id, 7 + 1000 * k);
  EXPECT_EQ(result.outcomes[1].samples.at(0).token_id, 8);
  EXPECT_EQ(result.outcomes[2].samples.at(0).token_id, 9);
}

TEST_F(ModelRunnerTest, OutOfMemorySplitsTheBatchUntilOnlyWhatCannotRunAloneFails) {
  const ScheduledBatch batch = schedule({7, 8, 9, 10});
  backend_.max_seqs = 1;
  backend_.poison = 9;
  ModelRunner::Result result;
  runner_.run(batch, plans(batch), &result);
  for (size_t i = 0; i < 4; ++i) {
    if (i == 2) {
      EXPECT_EQ(result.outcomes[i].status.code(), StatusCode::kOutOfMemory);
      EXPECT_TRUE(result.outcomes[i].samples.empty());
    } else {
      ASSERT_TRUE(result.outcomes[i].status.ok())
          << i << ": " << result.outcomes[i].status.message();
      EXPECT_EQ(result.outcomes[i].samples.at(0).token_id, static_cast<int32_t>(7 + i));
    }
  }
}

TEST_F(ModelRunnerTest, BlockTrafficRunsForkCopiesThenSwapsThenCopiesThenTheForward) {
  ScheduledBatch batch = schedule({7});
  batch.fork_copies = {BlockCopy{1, 2}};
  batch.swap_out = {BlockCopy{3, 0}, BlockCopy{4, 1}};
  batch.swap_in = {BlockCopy{0, 5}};
  batch.copies = {BlockCopy{6, 7}, BlockCopy{8, 9}, BlockCopy{10, 11}};
  ModelRunner::Result result;
  runner_.run(batch, plans(batch), &result);
  EXPECT_EQ(backend_.log,
            (std::vector<std::string>{"copy:1", "out:2", "in:1", "copy:3", "forward:1"}));
  EXPECT_TRUE(result.forks_lost.ok());
  EXPECT_TRUE(result.swaps_lost.ok());
}

TEST_F(ModelRunnerTest, AFailedForkCopyLosesTheForkedAndTheUnsavedSwapsAndFailsTheBatch) {
  ScheduledBatch batch = schedule({7, 8});
  batch.fork_copies = {BlockCopy{1, 2}};
  batch.forked = {42};
  batch.swap_out = {BlockCopy{3, 0}};
  backend_.fail_copies = true;
  ModelRunner::Result result;
  runner_.run(batch, plans(batch), &result);
  EXPECT_EQ(backend_.log, std::vector<std::string>{"copy:1"}) << "nothing runs after it";
  EXPECT_FALSE(result.forks_lost.ok());
  EXPECT_FALSE(result.swaps_lost.ok()) << "the swap-outs never ran";
  for (const SeqOutcome& o : result.outcomes) EXPECT_FALSE(o.status.ok());
}

TEST_F(ModelRunnerTest, AnEmptyBatchStillFillsPendingForks) {
  ScheduledBatch batch;
  batch.fork_copies = {BlockCopy{1, 2}, BlockCopy{3, 4}};
  ModelRunner::Result result;
  runner_.run(batch, {}, &result);
  EXPECT_EQ(backend_.log, std::vector<std::string>{"copy:2"});
  EXPECT_TRUE(result.outcomes.empty());
}

}  // namespace
}  // namespace pvllm
