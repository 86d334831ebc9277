// Preemption by swap through the whole engine on the CPU backend: requests
// that outgrow a tight KV pool are swapped to the host swap space and back
// and end with the tokens of a calm run (greedy, seeded sampling, n
// samples); the stats count the traffic; auto and a full swap space fall
// back to recompute where they must.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/model/model_config.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

class SwapPreemptionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 128;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("swap_preemption"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  static EngineConfig config(PreemptionMode mode, int32_t num_kv_blocks) {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 1;
    c.block_size = 8;
    c.num_kv_blocks = num_kv_blocks;
    c.max_model_len = 96;
    c.preemption_mode = mode;
    return c;
  }

  // Six requests: greedy, seeded sampling, and n = 2, long enough to
  // outgrow a 14-block pool together.
  static Outputs run(Engine* engine, std::vector<uint64_t>* ids) {
    ids->clear();
    for (int32_t r = 0; r < 6; ++r) {
      std::vector<int32_t> prompt{1};
      for (int32_t i = 1; i < 9 + 3 * r; ++i) prompt.push_back(3 + (i * 11 + r * 29) % 200);
      SamplingParams p = greedy(40);
      p.ignore_eos = true;
      if (r % 3 == 1) {
        p.temperature = 0.9f;
        p.has_seed = true;
        p.seed = 100 + r;
      }
      if (r % 3 == 2) {
        p.temperature = 0.7f;
        p.has_seed = true;
        p.seed = 200 + r;
        p.n = 2;
      }
      uint64_t id = 0;
      EXPECT_TRUE(engine->submit_tokens(prompt, p, 0, &id).ok());
      ids->push_back(id);
    }
    return run_to_completion(engine);
  }

  static void expect_same(const Outputs& got, const std::vector<uint64_t>& got_ids,
                          const Outputs& calm, const std::vector<uint64_t>& calm_ids) {
    for (size_t r = 0; r < got_ids.size(); ++r) {
      for (int32_t s = 0; s < (r % 3 == 2 ? 2 : 1); ++s) {
        EXPECT_EQ(got.at({got_ids[r], s}).token_ids, calm.at({calm_ids[r], s}).token_ids)
            << "request " << r << " sample " << s;
      }
    }
  }

  static std::string* model_dir_;
};

std::string* SwapPreemptionTest::model_dir_ = nullptr;

TEST_F(SwapPreemptionTest, SwappedRequestsEndAsInACalmRun) {
  std::vector<uint64_t> calm_ids, ids;
  auto calm = make_engine(config(PreemptionMode::kRecompute, 200));
  const Outputs calm_out = run(calm.get(), &calm_ids);
  ASSERT_EQ(calm->stats().num_preemptions, 0);

  auto engine = make_engine(config(PreemptionMode::kSwap, 14));
  const Outputs out = run(engine.get(), &ids);
  expect_same(out, ids, calm_out, calm_ids);
  const EngineStats s = engine->stats();
  EXPECT_GT(s.num_preemptions_by_swap, 0);
  EXPECT_EQ(s.num_preemptions_by_swap, s.num_preemptions) << "the swap space had room for all";
  EXPECT_EQ(s.num_blocks_swapped_in, s.num_blocks_swapped_out);
  const ModelConfig& mc = engine->model().config;
  EXPECT_EQ(s.num_swap_bytes,
            (s.num_blocks_swapped_out + s.num_blocks_swapped_in) *
                static_cast<int64_t>(kv_bytes_per_block(mc, 8, KvCacheDtype::kF32)));
  EXPECT_EQ(s.num_blocks_used, 0);
}

TEST_F(SwapPreemptionTest, AutoAndASmallSwapSpaceStillGiveTheSameTokens) {
  std::vector<uint64_t> calm_ids, ids;
  auto calm = make_engine(config(PreemptionMode::kRecompute, 200));
  const Outputs calm_out = run(calm.get(), &calm_ids);

  auto automatic = make_engine(config(PreemptionMode::kAuto, 14));
  expect_same(run(automatic.get(), &ids), ids, calm_out, calm_ids);
  EXPECT_GT(automatic->stats().num_preemptions, 0);

  // Room for one block: most victims do not fit and are recomputed.
  EngineConfig c = config(PreemptionMode::kSwap, 14);
  c.swap_space_bytes =
      static_cast<int64_t>(kv_bytes_per_block(calm->model().config, 8, KvCacheDtype::kF32));
  auto small = make_engine(c);
  expect_same(run(small.get(), &ids), ids, calm_out, calm_ids);
  const EngineStats s = small->stats();
  EXPECT_GT(s.num_preemptions, s.num_preemptions_by_swap);
}

TEST_F(SwapPreemptionTest, BadSettingsAreRefused) {
  EngineConfig c = config(static_cast<PreemptionMode>(3), 14);
  std::unique_ptr<Engine> engine;
  Status st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("preemption_mode"), std::string::npos) << st.message();
  c = config(PreemptionMode::kSwap, 14);
  c.swap_space_bytes = -1;
  st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("swap_space_bytes"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pvllm::testing
