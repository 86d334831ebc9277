// Speculative decoding in the engine (docs/speculative.md): greedy output is
// the same token for token with and without proposals, whatever the
// proposer (prompt lookup, or a replay right for all, none or exactly j of
// its proposals) and k = 1..8, alone and batched with requests that keep out
// of it; the counters say exactly what the replay proposer was right about;
// max_tokens and stop tokens inside an accepted run end it there; a seeded
// request at temperature 1 emits the same tokens whatever its batch mates;
// the KV pool is whole again afterwards. On tiny random-weight models the
// test writes, fp32 on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/spec/replay_proposer.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

class SpeculativeEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 256;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("speculative_test"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  static EngineConfig config() {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 2;
    return c;
  }

  // Prompts with repeats in them (prompt lookup has something to find).
  static std::vector<std::vector<int32_t>> prompts(int count) {
    std::vector<std::vector<int32_t>> out;
    uint32_t x = 11;
    for (int i = 0; i < count; ++i) {
      std::vector<int32_t> p{1};
      const int len = 4 + (i * 5) % 20;
      for (int k = 0; k < len; ++k) {
        x = x * 1664525u + 1013904223u;
        p.push_back(3 + static_cast<int32_t>((x >> 8) % (tiny_tokenizer_vocab_size() - 3)));
      }
      const std::vector<int32_t> head(p.begin() + 1, p.begin() + 1 + std::min(len, 6));
      p.insert(p.end(), head.begin(), head.end());  // a passage again
      out.push_back(p);
    }
    return out;
  }

  static SamplingParams greedy_params(int32_t max_tokens) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
  }

  // The engine's config with a replay proposer right for `right` (-1: all)
  // of up to k proposals a step, into *replay.
  static EngineConfig with_replay(int32_t right, int32_t k,
                                  std::shared_ptr<ReplayProposer>* replay) {
    EngineConfig c = config();
    *replay = std::make_shared<ReplayProposer>(tiny_tokenizer_vocab_size(), right);
    c.proposer = *replay;
    c.speculative_tokens = k;
    return c;
  }

  // Each prompt's output with every request in one engine; `replay`, when
  // given, is told each request's expected continuation (from `expect`).
  static std::vector<std::vector<int32_t>> run(
      EngineConfig c, const std::vector<std::vector<int32_t>>& ps,
      const std::vector<SamplingParams>& params, ReplayProposer* replay = nullptr,
      const std::vector<std::vector<int32_t>>* expect = nullptr, EngineStats* stats = nullptr) {
    auto engine = make_engine(std::move(c));
    const int32_t free_before = engine->stats().num_blocks_free;
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < ps.size(); ++i) {
      uint64_t id = 0;
      EXPECT_TRUE(engine->submit_tokens(ps[i], params[i % params.size()], 0, &id).ok());
      if (replay != nullptr) replay->expect(id, 0, expect->at(i));
      ids.push_back(id);
    }
    Outputs out = run_to_completion(engine.get());
    std::vector<std::vector<int32_t>> result;
    for (uint64_t id : ids) result.push_back(out.at({id, 0}).token_ids);
    const EngineStats st = engine->stats();
    EXPECT_EQ(st.num_blocks_free + st.num_blocks_cached, free_before)
        << "KV blocks not back in the pool";
    if (stats != nullptr) *stats = st;
    return result;
  }

  static std::string* model_dir_;
};

std::string* SpeculativeEngineTest::model_dir_ = nullptr;

TEST_F(SpeculativeEngineTest, GreedyOutputIsTheSameWithEveryProposerAndK) {
  const auto ps = prompts(5);
  const SamplingParams g = greedy_params(24);
  const auto base = run(config(), ps, {g});
  for (int32_t k = 1; k <= 8; ++k) {
    EngineConfig ngram = config();
    ngram.speculative = "ngram";
    ngram.speculative_tokens = k;
    ngram.ngram_min = 1;
    ngram.ngram_max = 3;
    EngineStats st;
    EXPECT_EQ(run(ngram, ps, {g}, nullptr, nullptr, &st), base) << "ngram k " << k;
    EXPECT_GT(st.num_spec_drafts, 0) << "prompt lookup never proposed (k " << k << ")";
    for (int32_t right : {-1, 0, 1, 3}) {
      EngineConfig c = config();
      auto replay = std::make_shared<ReplayProposer>(tiny_tokenizer_vocab_size(), right);
      c.proposer = replay;
      c.speculative_tokens = k;
      EXPECT_EQ(run(c, ps, {g}, replay.get(), &base, &st), base)
          << "replay right " << right << " k " << k;
      EXPECT_GT(st.num_spec_drafts, 0);
      if (right < 0) {
        EXPECT_EQ(st.num_spec_accepted_tokens, st.num_spec_proposed_tokens);
      }
      if (right == 0) {
        EXPECT_EQ(st.num_spec_accepted_tokens, 0);
      }
    }
  }
}

TEST_F(SpeculativeEngineTest, CountersSayExactlyWhatTheReplayWasRightAbout) {
  // One request, k = 4, the replay right for its first 2 proposals: every
  // draft that proposed at least 3 accepts exactly 2 (positions 0 and 1),
  // one that proposed fewer accepts what it proposed up to 2.
  const auto ps = prompts(1);
  const SamplingParams g = greedy_params(30);
  const auto base = run(config(), ps, {g});
  std::shared_ptr<ReplayProposer> replay;
  const EngineConfig c = with_replay(2, 4, &replay);
  EngineStats st;
  ASSERT_EQ(run(c, ps, {g}, replay.get(), &base, &st), base);
  // Each draft emits its accepted proposals and one more token: 3 per draft
  // until fewer than 3 remain, then what max_tokens leaves.
  EXPECT_GT(st.num_spec_drafts, 5);
  EXPECT_EQ(st.spec_accepted_at[2], 0);
  EXPECT_EQ(st.spec_accepted_at[3], 0);
  EXPECT_EQ(st.num_spec_accepted_tokens, st.spec_accepted_at[0] + st.spec_accepted_at[1]);
  EXPECT_GE(st.spec_accepted_at[0], st.spec_accepted_at[1]);
  EXPECT_GE(st.spec_accepted_at[1], st.num_spec_drafts - 2);
  // The first token comes from the prefill; then each draft emits
  // accepted + 1: 30 tokens in all.
  EXPECT_EQ(1 + st.num_spec_accepted_tokens + st.num_spec_drafts, 30);
}

TEST_F(SpeculativeEngineTest, BatchedWithRequestsThatKeepOut) {
  const auto ps = prompts(6);
  SamplingParams on = greedy_params(20), off = on;
  off.speculative = false;
  const auto base = run(config(), ps, {on});
  EngineConfig c = config();
  auto replay = std::make_shared<ReplayProposer>(tiny_tokenizer_vocab_size(), 2);
  c.proposer = replay;
  c.speculative_tokens = 3;
  c.max_num_batched_tokens = 16;  // prefill in chunks beside the drafts
  EngineStats st;
  EXPECT_EQ(run(c, ps, {on, off}, replay.get(), &base, &st), base);
  EXPECT_GT(st.num_spec_drafts, 0);
  // Under load: no proposals while more than 2 sequences run.
  c.speculative_max_running = 2;
  auto replay2 = std::make_shared<ReplayProposer>(tiny_tokenizer_vocab_size(), -1);
  c.proposer = replay2;
  EngineStats loaded;
  EXPECT_EQ(run(c, ps, {on}, replay2.get(), &base, &loaded), base);
  EXPECT_LT(loaded.num_spec_drafts, st.num_spec_drafts + 100);
}

TEST_F(SpeculativeEngineTest, MaxTokensAndStopTokensInsideAnAcceptedRun) {
  const auto ps = prompts(1);
  const auto base = run(config(), ps, {greedy_params(24)});
  ASSERT_GE(base[0].size(), 12u);
  std::shared_ptr<ReplayProposer> replay;
  const EngineConfig c = with_replay(-1, 8, &replay);
  for (int32_t max_tokens : {1, 2, 5, 7, 9}) {
    const std::vector<std::vector<int32_t>> prefix = {
        std::vector<int32_t>(base[0].begin(), base[0].begin() + max_tokens)};
    EXPECT_EQ(run(c, ps, {greedy_params(max_tokens)}, replay.get(), &base), prefix)
        << "max_tokens " << max_tokens;
  }
  // A stop token that comes at the 6th token: the output ends before it.
  SamplingParams stop = greedy_params(24);
  stop.stop_token_ids = {base[0][5]};
  const auto stopped = run(config(), ps, {stop});
  EXPECT_EQ(run(c, ps, {stop}, replay.get(), &base), stopped);
  EXPECT_LE(stopped[0].size(), 5u);
}

TEST_F(SpeculativeEngineTest, SeededSamplingIsIndependentOfBatchMates) {
  const auto ps = prompts(4);
  SamplingParams seeded;
  seeded.temperature = 1.0f;
  seeded.max_tokens = 20;
  seeded.ignore_eos = true;
  seeded.has_seed = true;
  seeded.seed = 77;
  EngineConfig c = config();
  c.speculative = "ngram";
  c.speculative_tokens = 4;
  const auto alone = run(c, {ps[0]}, {seeded});
  SamplingParams noisy = seeded;
  noisy.has_seed = false;
  const auto together = run(c, ps, {seeded, noisy});
  EXPECT_EQ(together[0], alone[0]);
}

TEST_F(SpeculativeEngineTest, RejectedProposalsGiveTheirBlocksBack) {
  // Blocks of 8 slots and 8 proposals a step, all wrong: each step takes
  // one or two blocks more for them and gives them back. After every step
  // the sequence holds the blocks of its computed K/V, as without
  // proposals: ceil((prompt + generated - 1) / 8).
  const auto ps = prompts(1);
  const auto prompt_len = static_cast<int32_t>(ps[0].size());
  auto held_as_computed = [&](EngineConfig c, ReplayProposer* replay,
                              const std::vector<int32_t>& continuation) {
    c.block_size = 8;
    c.enable_prefix_caching = false;
    auto engine = make_engine(std::move(c));
    uint64_t id = 0;
    EXPECT_TRUE(engine->submit_tokens(ps[0], greedy_params(40), 0, &id).ok());
    if (replay != nullptr) replay->expect(id, 0, continuation);
    Outputs out;
    int steps = 0;
    while (engine->has_unfinished()) {
      EXPECT_TRUE(engine->step().ok());
      collect(engine.get(), &out);
      const SampleOutput& so = out[{id, 0}];
      if (so.num_finish_events > 0) break;
      const auto generated = static_cast<int32_t>(so.token_ids.size());
      EXPECT_EQ(engine->stats().num_blocks_used, (prompt_len + generated - 1 + 7) / 8)
          << "after step " << steps << ", " << generated << " tokens generated";
      ++steps;
    }
    while (engine->has_unfinished()) EXPECT_TRUE(engine->step().ok());
    collect(engine.get(), &out);
    EXPECT_EQ(engine->stats().num_blocks_used, 0);
    return out.at({id, 0}).token_ids;
  };
  const std::vector<int32_t> plain = held_as_computed(config(), nullptr, {});
  std::shared_ptr<ReplayProposer> wrong;
  EXPECT_EQ(held_as_computed(with_replay(0, 8, &wrong), wrong.get(), plain), plain);
}

TEST_F(SpeculativeEngineTest, FailedDraftsBackOff) {
  // Always wrong: drafts at decode steps 0, 2, 6, 14, 30, 62 and 126 of a
  // 150-token output (waits of 1, 3, 7, 15, 31, 63 after each miss), not
  // one per step.
  const auto ps = prompts(1);
  const SamplingParams g = greedy_params(150);
  const auto base = run(config(), ps, {g});
  std::shared_ptr<ReplayProposer> wrong;
  const EngineConfig c = with_replay(0, 4, &wrong);
  EngineStats st;
  EXPECT_EQ(run(c, ps, {g}, wrong.get(), &base, &st), base);
  EXPECT_EQ(st.num_spec_drafts, 7);
  EXPECT_EQ(st.num_spec_accepted_tokens, 0);
}

TEST_F(SpeculativeEngineTest, BadConfigurationsAreRefused) {
  EngineConfig c = config();
  c.speculative = "draft";
  EXPECT_FALSE(c.validate().ok());
  c = config();
  c.speculative_tokens = 0;
  EXPECT_FALSE(c.validate().ok());
  c.speculative_tokens = EngineConfig::kMaxSpeculativeTokens + 1;
  EXPECT_FALSE(c.validate().ok());
  c = config();
  c.ngram_min = 3;
  c.ngram_max = 2;
  EXPECT_FALSE(c.validate().ok());
  c = config();
  c.speculative_max_running = -1;
  EXPECT_FALSE(c.validate().ok());
}

}  // namespace
}  // namespace pvllm::testing
