// The engine on a sliding-window (Mistral) model: the blocks before each
// sequence's window are freed after every step, so a generation far longer
// than the KV pool runs in it, and the tokens are those of a run whose
// block table keeps every block (the CPU backend driven directly).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/sequence_driver.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

constexpr int32_t kWindow = 16;
constexpr int32_t kBlock = 8;
constexpr int32_t kContext = 512;
// One window's blocks: 1 + ceil((16 - 1) / 8).
constexpr int32_t kWindowBlocks = 3;

class SlidingWindowEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec = tiny_arch_spec("mistral");
    spec.sliding_window = kWindow;
    spec.max_position_embeddings = kContext;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("swa_engine_test"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  EngineConfig config(int32_t num_blocks) const {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 2;
    c.block_size = kBlock;
    c.num_kv_blocks = num_blocks;
    c.max_num_batched_tokens = 64;
    return c;
  }

  static std::vector<int32_t> prompt(int32_t n, int32_t salt) {
    std::vector<int32_t> ids{1};
    for (int32_t i = 1; i < n; ++i) {
      ids.push_back(3 + (7 * i + 13 * salt + 11) % (tiny_tokenizer_vocab_size() - 3));
    }
    return ids;
  }

  // Greedy tokens of the CPU backend driven without the engine: the whole
  // prompt in one step, then one token per step, over a block table that
  // keeps every block of the context.
  static std::vector<int32_t> full_table_greedy(const std::vector<int32_t>& ids, int32_t count) {
    std::unique_ptr<Model> model;
    Status st = load_model(*model_dir_, &model);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return {};
    EXPECT_EQ(model->config.sliding_window, kWindow);
    BackendOptions o;
    o.num_blocks = kContext / kBlock;
    o.block_size = kBlock;
    o.num_threads = 2;
    std::unique_ptr<Backend> backend;
    st = create_cpu_backend(*model, o, &backend);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return {};
    const int32_t vocab = model->config.vocab_size;
    SequenceDriver driver(backend.get(), vocab);
    std::vector<int32_t> out;
    std::vector<int32_t> feed = ids;
    std::vector<float> logits;
    for (int32_t i = 0; i < count; ++i) {
      st = driver.step(feed, &logits);
      EXPECT_TRUE(st.ok()) << st.message();
      if (!st.ok()) return out;
      out.push_back(argmax(logits.data() + logits.size() - vocab, vocab));
      feed = {out.back()};
    }
    return out;
  }

  static SamplingParams long_greedy(int32_t max_tokens) {
    SamplingParams p = greedy(max_tokens);
    p.ignore_eos = true;
    return p;
  }

  static std::string* model_dir_;
};

std::string* SlidingWindowEngineTest::model_dir_ = nullptr;

TEST_F(SlidingWindowEngineTest, CreateNeedsOneWindowOfBlocksNotTheWholeContext) {
  std::unique_ptr<Engine> engine;
  const Status too_small = Engine::create(config(kWindowBlocks - 1), &engine);
  EXPECT_EQ(too_small.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_small.message().find("sliding window of 16"), std::string::npos)
      << too_small.message();
  EXPECT_TRUE(Engine::create(config(kWindowBlocks), &engine).ok());
  // The contiguous policy reserves max_model_len whatever the window.
  EngineConfig contiguous = config(kWindowBlocks);
  contiguous.kv_allocator = KvAllocator::kContiguous;
  EXPECT_EQ(Engine::create(contiguous, &engine).code(), StatusCode::kInvalidArgument);
}

TEST_F(SlidingWindowEngineTest, GenerationFarLongerThanThePoolGivesTheFullTableTokens) {
  // 50 prompt tokens and 250 generated: 38 blocks of context, 3 in the pool.
  const std::vector<int32_t> ids = prompt(50, 0);
  const std::vector<int32_t> want = full_table_greedy(ids, 250);
  ASSERT_EQ(want.size(), 250u);
  auto engine = make_engine(config(kWindowBlocks));
  ASSERT_TRUE(engine);
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(ids, long_greedy(250), 0, &id).ok());
  Outputs out;
  int32_t max_used = 0;
  for (int i = 0; i < 1000 && engine->has_unfinished(); ++i) {
    ASSERT_TRUE(engine->step().ok());
    collect(engine.get(), &out);
    max_used = std::max(max_used, engine->stats().num_blocks_used);
  }
  ASSERT_FALSE(engine->has_unfinished());
  EXPECT_EQ(out.at({id, 0}).token_ids, want);
  EXPECT_EQ(out.at({id, 0}).finish_reason, FinishReason::kLength);
  EXPECT_LE(max_used, kWindowBlocks);
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.num_preemptions, 0);
  EXPECT_EQ(s.num_blocks_used, 0);
}

TEST_F(SlidingWindowEngineTest, SharedPrefixesAndParallelSamplesInATightPoolMatchARoomyOne) {
  // Four prompts over one 40-token prefix, and a request of 3 seeded samples.
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int32_t> prefix = prompt(40, 1);
  for (int32_t k = 0; k < 4; ++k) {
    std::vector<int32_t> p = prefix;
    const std::vector<int32_t> tail = prompt(5 + 3 * k, 2 + k);
    p.insert(p.end(), tail.begin() + 1, tail.end());
    prompts.push_back(p);
  }
  SamplingParams sampled = long_greedy(60);
  sampled.temperature = 0.8f;
  sampled.n = 3;
  sampled.has_seed = true;
  sampled.seed = 42;
  auto run = [&](int32_t num_blocks, EngineStats* stats) {
    auto engine = make_engine(config(num_blocks));
    std::vector<uint64_t> ids;
    for (const auto& p : prompts) {
      uint64_t id = 0;
      EXPECT_TRUE(engine->submit_tokens(p, long_greedy(60), 0, &id).ok());
      ids.push_back(id);
    }
    uint64_t id = 0;
    EXPECT_TRUE(engine->submit_tokens(prompt(30, 9), sampled, 0, &id).ok());
    ids.push_back(id);
    Outputs out = run_to_completion(engine.get(), 5000);
    *stats = engine->stats();
    std::vector<std::vector<int32_t>> tokens;
    for (uint64_t i : ids) {
      for (int32_t k = 0; k < (i == id ? 3 : 1); ++k) tokens.push_back(out.at({i, k}).token_ids);
    }
    return tokens;
  };
  EngineStats roomy_stats, tight_stats;
  const auto roomy = run(kContext / kBlock * 8, &roomy_stats);
  const auto tight = run(8, &tight_stats);
  ASSERT_EQ(roomy.size(), 7u);
  EXPECT_EQ(tight, roomy);
  EXPECT_EQ(roomy[0], full_table_greedy(prompts[0], 60));
  EXPECT_GT(roomy_stats.prefix_cache_hits, 0);
  EXPECT_NE(roomy[4], roomy[5]) << "seeded samples differ from each other";
  EXPECT_EQ(tight_stats.num_blocks_used, 0);
  EXPECT_EQ(roomy_stats.num_blocks_used, 0);
}

TEST_F(SlidingWindowEngineTest, AbortAfterBlocksWereReleasedReturnsEveryBlock) {
  auto engine = make_engine(config(kWindowBlocks));
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(20, 3), long_greedy(200), 0, &id).ok());
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(engine->step().ok());
  EXPECT_GT(engine->stats().num_blocks_used, 0);
  ASSERT_TRUE(engine->abort(id).ok());
  Outputs out = run_to_completion(engine.get());
  EXPECT_EQ(out.at({id, 0}).finish_reason, FinishReason::kAbort);
  EXPECT_EQ(engine->stats().num_blocks_used, 0);
  // The pool serves the next request in full.
  uint64_t next = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(20, 3), long_greedy(30), 0, &next).ok());
  out = run_to_completion(engine.get());
  EXPECT_EQ(out.at({next, 0}).token_ids, full_table_greedy(prompt(20, 3), 30));
}

TEST_F(SlidingWindowEngineTest, ContiguousPolicyReleasesFromTheFrontAndGivesTheSameTokens) {
  EngineConfig c = config(kContext / kBlock);
  c.kv_allocator = KvAllocator::kContiguous;
  auto engine = make_engine(c);
  ASSERT_TRUE(engine);
  uint64_t id = 0;
  const std::vector<int32_t> ids = prompt(30, 4);
  ASSERT_TRUE(engine->submit_tokens(ids, long_greedy(100), 0, &id).ok());
  Outputs out;
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(engine->step().ok());
  // 89 tokens computed: positions from 74 on are read, so the first 9 of
  // the 64 reserved blocks went back.
  EXPECT_EQ(engine->stats().num_blocks_used, kContext / kBlock - 9);
  out = run_to_completion(engine.get());
  EXPECT_EQ(out.at({id, 0}).token_ids, full_table_greedy(ids, 100));
  EXPECT_EQ(engine->stats().num_blocks_used, 0);
}

}  // namespace
}  // namespace pvllm::testing
