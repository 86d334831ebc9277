// The OutputProcessor without a backend: a real scheduler over a paged KV
// cache schedules, the test plays the model runner (its draws are made up),
// and the events are checked: the n-sample fork planned once and mirrored,
// stop tokens and strings, held-back text, failures, aborts, lost
// sequences, prompt logprobs and the request's metrics.
#include "core/engine/output_processor.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/kv/kv_cache_manager.h"
#include "core/sched/scheduler.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

constexpr int32_t kVocab = 64;
constexpr int32_t kMaxModelLen = 128;

class OutputProcessorTest : public ::testing::Test {
 protected:
  void SetUp() override { make_parts(nullptr); }

  void make_parts(const Tokenizer* tokenizer) {
    processor_.reset();
    kv_ = make_kv_cache_manager(KvAllocator::kPaged, 64, 16, false, kMaxModelLen);
    scheduler_ = std::make_unique<Scheduler>(SchedulerConfig{}, kv_.get());
    vocab_ = tokenizer != nullptr ? tokenizer->vocab_size() : kVocab;
    processor_ =
        std::make_unique<OutputProcessor>(tokenizer, vocab_, kMaxModelLen, scheduler_.get());
  }

  // A request as Engine::submit_tokens makes it.
  uint64_t add(std::vector<int32_t> prompt, SamplingParams params,
               std::vector<int32_t> stop_ids = {}) {
    auto req = std::make_unique<Request>();
    req->id = next_id_++;
    req->prompt_ids = std::move(prompt);
    req->params = std::move(params);
    req->arrival_order = req->id;
    req->stop_ids = std::move(stop_ids);
    for (const std::string& s : req->params.stop) {
      req->max_stop_len = std::max(req->max_stop_len, s.size());
    }
    req->submit_time = OutputProcessor::Clock::now();
    const uint64_t id = req->id;
    processor_->add(std::move(req));
    return id;
  }

  // One step, the test standing in for the model runner: `draw` gives each
  // planned draw's token (sample index, tokens so far); `fail` says which
  // scheduled sequences fail. Returns the step's plans.
  using DrawFn = std::function<int32_t(const SampleRow&)>;
  std::vector<SeqPlan> step(const DrawFn& draw, const std::function<bool(size_t)>& fail = {}) {
    processor_->set_step_time(OutputProcessor::Clock::now());
    std::vector<Output> events;
    for (uint64_t id : aborts_) processor_->abort(id, &events);
    aborts_.clear();
    const ScheduledBatch batch = scheduler_->schedule();
    const std::span<const SeqPlan> planned = processor_->plan(batch);
    const std::vector<SeqPlan> plans(planned.begin(), planned.end());
    std::vector<SeqOutcome> outcomes(batch.seqs.size());
    ScheduledBatch ran;
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      if (fail && fail(i)) {
        outcomes[i].status = Internal("the device fell over");
        continue;
      }
      for (const SampleRow& row : plans[i].draws) {
        SampleResult r;
        r.token_id = draw(row);
        outcomes[i].samples.push_back(r);
      }
      if (plans[i].prompt_logprobs >= 0) {
        const Sequence& seq = *batch.seqs[i].seq;
        const int32_t last = std::min(seq.num_computed_tokens + batch.seqs[i].num_new_tokens,
                                      seq.num_prompt_tokens - 1);
        for (int32_t p = seq.num_computed_tokens; p < last; ++p) {
          outcomes[i].prompt_logprobs.push_back(
              OutputLogprobs{seq.token_ids[p + 1], -0.5f * static_cast<float>(p + 1), {}});
        }
      }
      processor_->record_ran(batch.seqs[i], &outcomes[i], OutputProcessor::Clock::now());
      ran.seqs.push_back(batch.seqs[i]);
    }
    scheduler_->on_batch_computed(ran);
    processor_->process(batch, plans, outcomes, &events);
    processor_->attach_prompt_logprobs(&events);
    processor_->forget_finished();
    for (Output& e : events) events_.push_back(std::move(e));
    return plans;
  }

  void run(const DrawFn& draw) {
    for (int i = 0; i < 200 && processor_->num_requests() > 0; ++i) step(draw);
    ASSERT_EQ(processor_->num_requests(), 0u) << "requests left after 200 steps";
  }

  std::vector<int32_t> tokens_of(int32_t sample) const {
    std::vector<int32_t> out;
    for (const Output& e : events_) {
      if (e.sample_index == sample) out.insert(out.end(), e.token_ids.begin(), e.token_ids.end());
    }
    return out;
  }
  std::string text_of(int32_t sample) const {
    std::string out;
    for (const Output& e : events_) {
      if (e.sample_index == sample) out += e.text;
    }
    return out;
  }
  const Output& last_event_of(int32_t sample) const {
    for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
      if (it->sample_index == sample) return *it;
    }
    ADD_FAILURE() << "no event for sample " << sample;
    return events_.front();
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<OutputProcessor> processor_;
  int32_t vocab_ = kVocab;
  uint64_t next_id_ = 1;
  std::vector<uint64_t> aborts_;
  std::vector<Output> events_;
};

SamplingParams greedy(int32_t max_tokens, int32_t n = 1) {
  SamplingParams p;
  p.temperature = n > 1 ? 1.0f : 0.0f;
  p.max_tokens = max_tokens;
  p.n = n;
  return p;
}

// Each sample draws 10 * (sample + 1) + its step: the samples' tokens
// tell them apart.
int32_t by_sample(const SampleRow& r) { return 10 * (r.sample_index + 1) + r.step; }

TEST_F(OutputProcessorTest, FirstTokenOfNSamplesIsPlannedNTimesThenEachSampleDrawsOnce) {
  add({1, 2, 3, 4, 5}, greedy(3, 3));
  const std::vector<SeqPlan> first = step(by_sample);
  ASSERT_EQ(first.size(), 1u) << "one sequence before the fork";
  ASSERT_EQ(first[0].draws.size(), 3u);
  for (int32_t k = 0; k < 3; ++k) EXPECT_EQ(first[0].draws[k].sample_index, k);
  EXPECT_EQ(scheduler_->num_running(), 3) << "the siblings were forked into the running set";
  const std::vector<SeqPlan> second = step(by_sample);
  ASSERT_EQ(second.size(), 3u);
  for (const SeqPlan& p : second) EXPECT_EQ(p.draws.size(), 1u);
  run(by_sample);
  for (int32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(tokens_of(k),
              (std::vector<int32_t>{10 * (k + 1), 10 * (k + 1) + 1, 10 * (k + 1) + 2}))
        << "sample " << k;
    EXPECT_EQ(last_event_of(k).finish_reason, FinishReason::kLength);
  }
  ASSERT_TRUE(events_.back().request_finished);
  EXPECT_EQ(events_.back().metrics.num_generated_tokens, 9);
  EXPECT_EQ(events_.back().metrics.num_prompt_tokens, 5);
  EXPECT_EQ(events_.back().metrics.num_prefill_tokens, 5);
  for (const Output& e : events_) {
    if (&e != &events_.back()) EXPECT_FALSE(e.request_finished);
  }
  EXPECT_EQ(kv_->metrics().num_used_blocks, 0) << "every sample freed its blocks";
}

TEST_F(OutputProcessorTest, AStopTokenEndsTheSampleAndIsNotReported) {
  add({1, 2, 3}, greedy(10), /*stop_ids=*/{7});
  int32_t next = 5;
  run([&](const SampleRow&) { return next++; });  // 5, 6, then 7 stops
  EXPECT_EQ(tokens_of(0), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(last_event_of(0).finish_reason, FinishReason::kStop);
  EXPECT_TRUE(last_event_of(0).request_finished);
}

TEST_F(OutputProcessorTest, AFailedBatchEndsEveryUnforkedSampleWithTheError) {
  add({1, 2, 3}, greedy(4, 2));
  step(by_sample, [](size_t) { return true; });
  ASSERT_EQ(events_.size(), 2u) << "one final event per sample, forked or not";
  for (const Output& e : events_) {
    EXPECT_EQ(e.finish_reason, FinishReason::kError);
    EXPECT_EQ(e.error, "the device fell over");
  }
  EXPECT_TRUE(events_.back().request_finished);
  EXPECT_EQ(processor_->num_requests(), 0u);
  EXPECT_EQ(scheduler_->num_running() + scheduler_->num_waiting(), 0);
}

TEST_F(OutputProcessorTest, AbortEndsOnlyTheSamplesStillRunning) {
  const uint64_t id = add({1, 2, 3}, greedy(50, 2));
  step(by_sample);
  step(by_sample);
  aborts_.push_back(id);
  aborts_.push_back(id + 100);  // unknown: nothing happens
  step(by_sample);
  EXPECT_EQ(processor_->num_requests(), 0u);
  EXPECT_EQ(last_event_of(0).finish_reason, FinishReason::kAbort);
  EXPECT_EQ(last_event_of(1).finish_reason, FinishReason::kAbort);
  EXPECT_EQ(tokens_of(0).size(), 2u);
  EXPECT_TRUE(events_.back().request_finished);
}

TEST_F(OutputProcessorTest, ALostSequenceEndsWithTheReasonOnceAndAnEndedOneIsLeftAlone) {
  add({1, 2, 3}, greedy(50));
  step(by_sample);
  std::vector<Output> events;
  processor_->fail_lost(/*seq_id=*/1, "its K/V was lost", &events);
  processor_->fail_lost(/*seq_id=*/1, "again", &events);
  processor_->fail_lost(/*seq_id=*/99, "unknown", &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].finish_reason, FinishReason::kError);
  EXPECT_EQ(events[0].error, "its K/V was lost");
  EXPECT_TRUE(events[0].request_finished);
}

TEST_F(OutputProcessorTest, PromptLogprobsArePlannedForTheFirstChunksAndRideTheFirstEvent) {
  SamplingParams p = greedy(2);
  p.prompt_logprobs = 1;
  add({1, 2, 3, 4, 5, 6}, p);
  const std::vector<SeqPlan> plans = step(by_sample);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].prompt_logprobs, 1);
  ASSERT_FALSE(events_.empty());
  const std::vector<OutputLogprobs>& lp = events_.front().prompt_logprobs;
  ASSERT_EQ(lp.size(), 5u) << "one per prompt token after the first";
  for (size_t i = 0; i < lp.size(); ++i) {
    EXPECT_EQ(lp[i].token_id, static_cast<int32_t>(i) + 2);
    EXPECT_FLOAT_EQ(lp[i].logprob, -0.5f * static_cast<float>(i + 1));
  }
  const std::vector<SeqPlan> later = step(by_sample);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].prompt_logprobs, -1) << "a decode predicts no prompt token";
  for (size_t i = 1; i < events_.size(); ++i) EXPECT_TRUE(events_[i].prompt_logprobs.empty());
}

TEST_F(OutputProcessorTest, StopStringsCutTheTextAndHoldBackWhatCouldStillBecomeOne) {
  std::unique_ptr<Tokenizer> tok;
  ASSERT_TRUE(Tokenizer::load_file(testing::tiny_tokenizer_path(), &tok).ok());
  make_parts(tok.get());
  std::vector<int32_t> prompt;
  ASSERT_TRUE(tok->encode("Once", true, &prompt).ok());
  std::vector<int32_t> script;
  ASSERT_TRUE(tok->encode(" upon a time there was", false, &script).ok());
  ASSERT_GE(script.size(), 4u);
  SamplingParams p = greedy(100);
  p.stop = {"a time"};
  add(prompt, p);
  size_t at = 0;
  std::vector<std::string> deltas;
  for (int i = 0; i < 50 && processor_->num_requests() > 0; ++i) {
    const size_t before = events_.size();
    step([&](const SampleRow&) { return script.at(std::min(at++, script.size() - 1)); });
    for (size_t k = before; k < events_.size(); ++k) deltas.push_back(events_[k].text);
  }
  ASSERT_EQ(processor_->num_requests(), 0u);
  // What the script reads as, detokenized after the prompt as the
  // processor does: the output is that text up to the stop string.
  IncrementalDetokenizer detok(tok.get(), prompt.back());
  std::string full;
  for (int32_t t : script) full += detok.push(t);
  full += detok.flush();
  const size_t stop_at = full.find("a time");
  ASSERT_NE(stop_at, std::string::npos) << full;
  EXPECT_NE(full.substr(0, stop_at).find("upon"), std::string::npos);
  EXPECT_EQ(text_of(0), full.substr(0, stop_at)) << "the text ends right before the stop string";
  EXPECT_EQ(last_event_of(0).finish_reason, FinishReason::kStop);
  // Nothing of "a time" was ever released, even in part.
  std::string released;
  for (const std::string& d : deltas) {
    released += d;
    EXPECT_EQ(released.find('a'), std::string::npos) << "released: " << released;
  }
}

}  // namespace
}  // namespace pvllm
