// Per-request timing and token counts on a request's last event, and the
// engine's step-time percentiles and prefix-cache evictions (issue 21, 0.5).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

class EngineMetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 256;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("engine_metrics"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  EngineConfig config() const {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 2;
    return c;
  }
  // Prompts fed 16 tokens a step, no prefix cache: every position computed.
  EngineConfig chunked(const std::string& model_path) const {
    EngineConfig c = config();
    c.model_path = model_path;
    c.max_num_batched_tokens = 16;
    c.enable_prefix_caching = false;
    return c;
  }

  static std::vector<int32_t> prompt(int32_t length, int32_t salt) {
    std::vector<int32_t> p{1};
    for (int32_t i = 1; i < length; ++i) p.push_back(3 + (i * 7 + salt * 13) % 200);
    return p;
  }

  static std::string* model_dir_;
};

std::string* EngineMetricsTest::model_dir_ = nullptr;

TEST_F(EngineMetricsTest, TheLastEventCarriesTheRequestsTimingAndCounts) {
  auto engine = make_engine(config());
  SamplingParams p = greedy(9);
  p.ignore_eos = true;
  p.n = 3;
  p.temperature = 0.8f;
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(21, 1), p, 0, &id).ok());
  const std::vector<Output> events = run_events(engine.get());
  ASSERT_FALSE(events.empty());
  int64_t tokens = 0;
  for (const Output& ev : events) {
    tokens += static_cast<int64_t>(ev.token_ids.size());
    if (!ev.request_finished) {
      EXPECT_EQ(ev.metrics.e2e_latency, 0.0) << "only the last event is stamped";
      EXPECT_EQ(ev.metrics.num_generated_tokens, 0);
    }
  }
  const RequestMetrics& m = events.back().metrics;
  ASSERT_TRUE(events.back().request_finished);
  EXPECT_EQ(m.num_prompt_tokens, 21);
  EXPECT_EQ(m.num_prefill_tokens, 21);
  EXPECT_EQ(m.num_cached_prompt_tokens, 0);
  EXPECT_EQ(m.num_generated_tokens, tokens);
  EXPECT_EQ(m.num_generated_tokens, 27);  // 3 samples x 9 tokens
  EXPECT_GE(m.time_queued, 0.0);
  EXPECT_GE(m.time_to_first_token, m.time_queued);
  EXPECT_GT(m.time_to_first_token, 0.0);
  EXPECT_GE(m.e2e_latency, m.time_to_first_token);
  // Eight steps after the first token's, in lockstep for the 3 samples.
  EXPECT_GT(m.time_per_output_token, 0.0);
  EXPECT_NEAR(m.time_per_output_token * 8, m.e2e_latency - m.time_to_first_token, 1e-9);
}

// num_kv_tokens_attended adds, per step, the context each computed sequence
// has after it: a 40-token prompt in chunks of 16, 16 and 8 attends to 16,
// 32 and 40 positions (its first token comes with the last chunk), then
// three decodes to 41, 42 and 43; a second request decoding beside it adds
// its own contexts.
TEST_F(EngineMetricsTest, AttendedContextIsCountedPerStep) {
  auto engine = make_engine(chunked(*model_dir_));
  SamplingParams p = greedy(4);
  p.ignore_eos = true;
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(40, 3), p, 0, &id).ok());
  run_events(engine.get());
  const int64_t one = 16 + 32 + 40 + 41 + 42 + 43;
  EXPECT_EQ(engine->stats().num_kv_tokens_attended, one);
  EXPECT_EQ(engine->stats().num_steps, 6);
  // Two 5-token prompts batched: 5 each, then 6, 7, 8 each.
  ASSERT_TRUE(engine->submit_tokens(prompt(5, 4), p, 0, &id).ok());
  ASSERT_TRUE(engine->submit_tokens(prompt(5, 5), p, 0, &id).ok());
  run_events(engine.get());
  EXPECT_EQ(engine->stats().num_kv_tokens_attended, one + 2 * (5 + 6 + 7 + 8));
}

// With a sliding window, a sequence attends to the last `window` positions.
TEST_F(EngineMetricsTest, AttendedContextStopsAtTheSlidingWindow) {
  TinyModelSpec spec;
  spec.max_position_embeddings = 256;
  spec.arch = "mistral";
  spec.sliding_window = 20;
  auto engine =
      make_engine(chunked(write_tiny_hf_model(make_temp_dir("engine_metrics_window"), spec)));
  SamplingParams p = greedy(3);
  p.ignore_eos = true;
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(30, 6), p, 0, &id).ok());
  run_events(engine.get());
  // Chunks of 16 and 14 (contexts 16, 30 -> 20), decodes at 31 and 32 -> 20.
  EXPECT_EQ(engine->stats().num_kv_tokens_attended, 16 + 20 + 20 + 20);
}

TEST_F(EngineMetricsTest, CachedPrefixAndChunkedPrefillAreCounted) {
  EngineConfig c = config();
  c.max_num_batched_tokens = 16;  // a 40-token prompt takes three steps
  auto engine = make_engine(c);
  SamplingParams p = greedy(2);
  p.ignore_eos = true;
  const std::vector<int32_t> shared = prompt(40, 2);
  uint64_t first = 0, second = 0;
  ASSERT_TRUE(engine->submit_tokens(shared, p, 0, &first).ok());
  std::vector<Output> events = run_events(engine.get());
  std::vector<int32_t> longer = shared;
  for (int32_t i = 0; i < 5; ++i) longer.push_back(50 + i);
  ASSERT_TRUE(engine->submit_tokens(longer, p, 0, &second).ok());
  const std::vector<Output> more = run_events(engine.get());
  events.insert(events.end(), more.begin(), more.end());
  std::map<uint64_t, RequestMetrics> last;
  for (const Output& ev : events) {
    if (ev.request_finished) last[ev.request_id] = ev.metrics;
  }
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[first].num_prefill_tokens, 40);
  EXPECT_EQ(last[first].num_cached_prompt_tokens, 0);
  // The second reuses the first's two full blocks of 16 and computes the rest.
  EXPECT_EQ(last[second].num_cached_prompt_tokens, 32);
  EXPECT_EQ(last[second].num_prefill_tokens, 45 - 32);
  EXPECT_EQ(last[second].num_prompt_tokens, 45);
}

TEST_F(EngineMetricsTest, StatsGiveStepTimesAndEvictions) {
  EngineConfig c = config();
  c.num_kv_blocks = 6;  // room for about one request: earlier prefixes are evicted
  c.block_size = 16;
  c.max_model_len = 64;  // a sequence needs 4 of the 6 blocks
  auto engine = make_engine(c);
  EXPECT_EQ(engine->stats().step_time_p50_ms, 0.0f);
  SamplingParams p = greedy(4);
  p.ignore_eos = true;
  for (int32_t r = 0; r < 6; ++r) {
    uint64_t id = 0;
    ASSERT_TRUE(engine->submit_tokens(prompt(60, 10 + r), p, 0, &id).ok());
    run_events(engine.get());
  }
  const EngineStats s = engine->stats();
  EXPECT_GT(s.step_time_p50_ms, 0.0f);
  EXPECT_GE(s.step_time_p99_ms, s.step_time_p50_ms);
  EXPECT_GE(s.step_time_max_ms, s.step_time_p99_ms);
  EXPECT_GT(s.num_prefix_cache_evictions, 0) << "six 60-token prompts through 6 blocks";
}

}  // namespace
}  // namespace pvllm::testing
