// The engine on a random-weights model (EngineConfig::random_weights): it
// builds without any file, generates from token ids, refuses text prompts
// with a tokenizer error, and the memory estimate covers shapes too.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/engine/engine.h"
#include "core/model/random_model.h"
#include "tests/integration/engine_harness.h"

namespace pvllm {
namespace {

using testing::greedy;
using testing::make_engine;
using testing::run_to_completion;

EngineConfig tiny_random_config() {
  EngineConfig c;
  c.random_weights = "tiny";  // no model_path
  c.num_kv_blocks = 256;
  c.num_threads = 1;
  return c;
}

std::vector<int32_t> greedy_tokens(Engine* engine, std::vector<int32_t> prompt, int32_t n) {
  uint64_t id = 0;
  Status st = engine->submit_tokens(std::move(prompt), greedy(n), 0, &id);
  EXPECT_TRUE(st.ok()) << st.message();
  testing::Outputs out = run_to_completion(engine);
  return out[{id, 0}].token_ids;
}

TEST(RandomWeightsEngineTest, GeneratesFromTokenIdsDeterministically) {
  auto a = make_engine(tiny_random_config());
  auto b = make_engine(tiny_random_config());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->model().config.hidden_size, 64);
  EXPECT_EQ(a->tokenizer(), nullptr);
  const std::vector<int32_t> ta = greedy_tokens(a.get(), {1, 17, 300, 42}, 6);
  const std::vector<int32_t> tb = greedy_tokens(b.get(), {1, 17, 300, 42}, 6);
  ASSERT_EQ(ta.size(), 6u);
  EXPECT_EQ(ta, tb) << "the same shape and seed must give the same model";
  for (int32_t t : ta) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 512);
  }
  // A different prompt reaches a different continuation (the weights are
  // not degenerate).
  EXPECT_NE(greedy_tokens(a.get(), {1, 99, 7, 250}, 6), ta);
}

TEST(RandomWeightsEngineTest, TextPromptIsATokenizerErrorNamingTheShape) {
  auto engine = make_engine(tiny_random_config());
  ASSERT_TRUE(engine);
  uint64_t id = 0;
  const Status st = engine->submit_text("hello", greedy(2), 0, &id);
  EXPECT_EQ(st.code(), StatusCode::kTokenizerError);
  EXPECT_NE(st.message().find("random-weights"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("token ids"), std::string::npos) << st.message();
  EXPECT_FALSE(engine->has_unfinished());
}

TEST(RandomWeightsEngineTest, UnknownShapeIsInvalidArgument) {
  EngineConfig c = tiny_random_config();
  c.random_weights = "llama-9000";
  std::unique_ptr<Engine> engine;
  const Status st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tinyllama-1.1b"), std::string::npos) << st.message();
}

TEST(RandomWeightsEngineTest, MemoryEstimateOfABigShapeNeedsNoFile) {
  EngineConfig c;
  c.random_weights = "tinyllama-1.1b";
  c.kv_cache_bytes = 1ll << 30;
  MemoryEstimate e;
  ASSERT_TRUE(estimate_memory(c, &e).ok());
  EXPECT_EQ(e.weight_bytes, size_t{1100048384} * 2);
  EXPECT_GT(e.kv_bytes_per_block, 0u);
  EXPECT_GT(e.num_blocks, 0);
  EXPECT_EQ(e.kv_bytes_total, e.kv_bytes_per_block * static_cast<size_t>(e.num_blocks));
}

}  // namespace
}  // namespace pvllm
