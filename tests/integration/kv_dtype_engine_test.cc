// The engine with the KV cache in f16, bf16 and int8 on the CPU: blocks are
// carried as stored through batching, chunked prefill, preemption (by
// recompute and by swap), the prefix cache, copy-on-write forks and the
// contiguous allocator's copies, so every path gives a request the tokens
// it gets alone; quantized weights combine with an 8-bit cache; the
// estimate counts the dtype as create allocates it; and a dtype the CPU
// does not store is refused. (How far each dtype moves the tokens and the
// distributions from the fp32 cache is docs/memory.md's study:
// bench/kv_dtype_accuracy.cc.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/engine/engine_config.h"
#include "core/kv/kv_cache_dtype.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/shared_paths.h"

namespace pvllm::testing {
namespace {

std::string repo_model_path() {
  const char* repo = std::getenv("PVLLM_REPO_MODELS");
  if (repo != nullptr && *repo != '\0') return std::string(repo) + "/stories260K/stories260K.bin";
  const std::string shared = shared_dir();
  return shared.empty() ? "" : shared + "/models/stories260K/stories260K.bin";
}

const char* const kPrompts[] = {"Once upon a time", "Lily and Ben went to the park",
                                "The little dog", "One day, a girl named Sue found a big box",
                                "Tom"};

struct Generated {
  std::vector<std::vector<int32_t>> tokens;  // per prompt (sample 0)
  EngineStats stats;
};

class KvDtypeEngineTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    model_ = repo_model_path();
    if (model_.empty()) {
      GTEST_SKIP() << "set $PVLLM_REPO_MODELS to the repository's models/ folder (ctest sets it)";
    }
    ASSERT_TRUE(parse_kv_cache_dtype(GetParam(), &dtype_).ok());
  }

  EngineConfig config() const {
    EngineConfig c;
    c.model_path = model_;
    c.device = "cpu";
    c.kv_cache_dtype = dtype_;
    c.max_model_len = 256;  // so that a small pool holds one sequence
    return c;
  }

  // Every prompt, greedy for `max_tokens` (EOS ignored), submitted at once
  // (or one engine run each when `alone`); `n` samples per prompt.
  Generated run(const EngineConfig& c, bool alone, int32_t n = 1, int repeats = 1) {
    Generated r;
    auto engine = make_engine(c);
    SamplingParams p = greedy(kMaxTokens);
    p.ignore_eos = true;
    p.n = n;
    for (int rep = 0; rep < repeats; ++rep) {
      std::vector<uint64_t> ids;
      r.tokens.clear();
      for (const char* prompt : kPrompts) {
        std::vector<int32_t> prompt_ids;
        EXPECT_TRUE(engine->tokenizer()->encode(prompt, true, &prompt_ids).ok());
        uint64_t id = 0;
        EXPECT_TRUE(engine->submit_tokens(prompt_ids, p, 0, &id).ok());
        ids.push_back(id);
        if (alone) {
          const Outputs out = run_to_completion(engine.get());
          r.tokens.push_back(out.at({id, 0}).token_ids);
          for (int32_t s = 1; s < n; ++s) {
            EXPECT_EQ(out.at({id, s}).token_ids, r.tokens.back()) << "greedy sample " << s;
          }
        }
      }
      if (!alone) {
        const Outputs out = run_to_completion(engine.get());
        for (uint64_t id : ids) {
          r.tokens.push_back(out.at({id, 0}).token_ids);
          for (int32_t s = 1; s < n; ++s) {
            EXPECT_EQ(out.at({id, s}).token_ids, r.tokens.back()) << "greedy sample " << s;
          }
        }
      }
    }
    r.stats = engine->stats();
    return r;
  }

  static constexpr int32_t kMaxTokens = 120;
  std::string model_;
  KvCacheDtype dtype_ = KvCacheDtype::kAuto;
};

TEST_P(KvDtypeEngineTest, EveryPathGivesTheTokensARequestGetsAlone) {
  const Generated alone = run(config(), true);
  for (const auto& t : alone.tokens) ASSERT_EQ(t.size(), static_cast<size_t>(kMaxTokens));

  EngineConfig chunked = config();
  chunked.max_num_batched_tokens = 16;  // chunked prefill next to decodes
  EXPECT_EQ(run(chunked, false).tokens, alone.tokens) << "batched, chunked prefill";

  // A pool too small for all five: preempted by recompute, then by swap.
  EngineConfig small = config();
  small.block_size = 8;
  small.num_kv_blocks = 40;
  const Generated recomputed = run(small, false);
  EXPECT_GT(recomputed.stats.num_preemptions, 0) << "the pool was meant to run dry";
  EXPECT_EQ(recomputed.tokens, alone.tokens) << "preempted by recompute";
  small.preemption_mode = PreemptionMode::kSwap;
  const Generated swapped = run(small, false);
  EXPECT_GT(swapped.stats.num_blocks_swapped_out, 0) << "meant to swap";
  EXPECT_GT(swapped.stats.num_blocks_swapped_in, 0);
  EXPECT_EQ(swapped.tokens, alone.tokens) << "preempted by swap";

  // The same prompts again on one engine: the second round reads the
  // first's blocks from the prefix cache.
  const Generated cached = run(config(), false, 1, 2);
  EXPECT_GT(cached.stats.num_cached_prompt_tokens, 0) << "meant to hit the prefix cache";
  EXPECT_EQ(cached.tokens, alone.tokens) << "prefix cache";

  // Three greedy samples per prompt share the prompt's blocks and copy the
  // last one on write; the contiguous allocator copies every prompt block.
  const Generated forked = run(config(), false, 3);
  EXPECT_GT(forked.stats.num_block_copies, 0) << "meant to copy on write";
  EXPECT_EQ(forked.tokens, alone.tokens) << "forks";
  EngineConfig contiguous = config();
  contiguous.kv_allocator = KvAllocator::kContiguous;
  const Generated copied = run(contiguous, false, 2);
  EXPECT_GT(copied.stats.num_block_copies, 0);
  EXPECT_EQ(copied.tokens, alone.tokens) << "contiguous allocator";
}

// Weights quantized while loading (q8_0, q4_k_m) with the cache in this
// dtype: batched and preempted runs give the tokens each request gets alone.
TEST_P(KvDtypeEngineTest, QuantizedWeightsWorkWithTheCache) {
  for (const char* scheme : {"q8_0", "q4_0"}) {
    EngineConfig c = config();
    c.quantize = scheme;
    const Generated alone = run(c, true);
    c.block_size = 8;
    c.num_kv_blocks = 40;
    c.preemption_mode = PreemptionMode::kSwap;
    const Generated swapped = run(c, false);
    EXPECT_GT(swapped.stats.num_preemptions, 0) << scheme;
    EXPECT_EQ(swapped.tokens, alone.tokens) << scheme;
  }
}

// pvllm_estimate_memory's figures are what create allocates: the block's
// bytes by kv_head_block_bytes' rule, and the blocks a budget buys.
TEST_P(KvDtypeEngineTest, EstimateCountsTheDtypeAsCreateAllocates) {
  EngineConfig c = config();
  c.kv_cache_bytes = 3 << 20;
  MemoryEstimate e;
  ASSERT_TRUE(estimate_memory(c, &e).ok());
  auto engine = make_engine(c);
  const ModelConfig& m = engine->model().config;
  const size_t elem = dtype_ == KvCacheDtype::kInt8 ? 1 : (dtype_ == KvCacheDtype::kF32 ? 4 : 2);
  const size_t scales = dtype_ == KvCacheDtype::kInt8 ? 2 : 0;
  const size_t want = size_t{2} * m.num_layers * m.num_kv_heads * c.block_size *
                      (size_t{static_cast<size_t>(m.head_dim)} * elem + scales);
  EXPECT_EQ(e.kv_bytes_per_block, want);
  EXPECT_EQ(e.num_blocks, static_cast<int32_t>(c.kv_cache_bytes / want));
  EXPECT_EQ(engine->stats().num_blocks_total, e.num_blocks);
  EXPECT_EQ(e.kv_bytes_total, want * e.num_blocks);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvDtypeEngineTest, ::testing::Values("f32", "f16", "bf16", "int8"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// The CUDA pool's rule (core, no GPU): auto is the activation dtype; int8
// and fp8_e4m3 at any activation dtype; f16 / bf16 / f32 only when they are
// the activation dtype; anything else UNSUPPORTED naming what is served.
TEST(KvCacheDtypeRule, CudaStoresAutoEightBitOrItsActivationDtype) {
  struct Case {
    KvCacheDtype requested;
    DType activation;
    KvCacheDtype resolved;  // kAuto: refused
  };
  const Case cases[] = {
      {KvCacheDtype::kAuto, DType::kBF16, KvCacheDtype::kBF16},
      {KvCacheDtype::kAuto, DType::kF16, KvCacheDtype::kF16},
      {KvCacheDtype::kAuto, DType::kF32, KvCacheDtype::kF32},
      {KvCacheDtype::kInt8, DType::kBF16, KvCacheDtype::kInt8},
      {KvCacheDtype::kInt8, DType::kF32, KvCacheDtype::kInt8},
      {KvCacheDtype::kFp8E4M3, DType::kF16, KvCacheDtype::kFp8E4M3},
      {KvCacheDtype::kFp8E4M3, DType::kF32, KvCacheDtype::kFp8E4M3},
      {KvCacheDtype::kBF16, DType::kBF16, KvCacheDtype::kBF16},
      {KvCacheDtype::kF16, DType::kF16, KvCacheDtype::kF16},
      {KvCacheDtype::kF32, DType::kF32, KvCacheDtype::kF32},
      {KvCacheDtype::kF16, DType::kBF16, KvCacheDtype::kAuto},
      {KvCacheDtype::kF32, DType::kBF16, KvCacheDtype::kAuto},
      {KvCacheDtype::kBF16, DType::kF16, KvCacheDtype::kAuto},
      {KvCacheDtype::kBF16, DType::kF32, KvCacheDtype::kAuto},
  };
  for (const Case& c : cases) {
    KvCacheDtype out = KvCacheDtype::kAuto;
    const Status st = cuda_kv_cache_dtype(c.requested, c.activation, &out);
    const std::string what =
        std::string(kv_cache_dtype_name(c.requested)) + " in " + dtype_name(c.activation);
    if (c.resolved != KvCacheDtype::kAuto) {
      EXPECT_TRUE(st.ok()) << what << ": " << st.message();
      EXPECT_EQ(out, c.resolved) << what;
    } else {
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << what;
      EXPECT_NE(
          st.message().find(std::string("kv_cache_dtype ") + kv_cache_dtype_name(c.requested)),
          std::string::npos)
          << st.message();
      EXPECT_NE(st.message().find("int8 or fp8_e4m3"), std::string::npos) << st.message();
    }
  }
  KvCacheDtype out = KvCacheDtype::kAuto;
  EXPECT_EQ(cuda_kv_cache_dtype(static_cast<KvCacheDtype>(6), DType::kBF16, &out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_kv_cache_dtype(KvCacheDtype::kInt8, DType::kQ8_0, &out).code(),
            StatusCode::kInvalidArgument);
  // The auto dtype the backend and the estimate both take.
  EXPECT_EQ(cuda_activation_dtype(0, DType::kF16), DType::kF16);
  EXPECT_EQ(cuda_activation_dtype(0, DType::kF32), DType::kBF16);
  EXPECT_EQ(cuda_activation_dtype(2, DType::kBF16), DType::kF16);
  EXPECT_EQ(cuda_activation_dtype(3, DType::kBF16), DType::kF32);
}

TEST(KvDtypeEngine, TheCpuRefusesDtypesItDoesNotStore) {
  const std::string model = repo_model_path();
  if (model.empty()) GTEST_SKIP() << "set $PVLLM_REPO_MODELS (ctest sets it)";
  EngineConfig c;
  c.model_path = model;
  c.device = "cpu";
  c.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
  std::unique_ptr<Engine> engine;
  Status st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("fp8_e4m3"), std::string::npos) << st.message();
  MemoryEstimate e;
  EXPECT_EQ(estimate_memory(c, &e).code(), StatusCode::kUnsupported);
  c.kv_cache_dtype = static_cast<KvCacheDtype>(9);
  st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("kv_cache_dtype"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pvllm::testing
