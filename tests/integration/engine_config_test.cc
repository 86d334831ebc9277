// EngineConfig::validate: every field out of range is refused with
// INVALID_ARGUMENT naming the field and the value given, before anything
// is loaded; estimate_memory passes the refusal on.
#include "core/engine/engine_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/backend/backend_loader.h"
#include "core/engine/engine.h"
#include "core/sample/sampling_params.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

EngineConfig valid_config() {
  EngineConfig c;
  c.random_weights = "tiny";
  c.device = "cpu";
  return c;
}

struct BadField {
  const char* needle;  // what the message must say
  std::function<void(EngineConfig*)> spoil;
};

TEST(EngineConfigTest, EachFieldOutOfRangeIsNamedWithItsValue) {
  const BadField cases[] = {
      {"model_path is empty", [](EngineConfig* c) { c->random_weights.clear(); }},
      {"gpu_memory_utilization must be in (0, 1], got 0",
       [](EngineConfig* c) { c->gpu_memory_utilization = 0.0f; }},
      {"gpu_memory_utilization must be in (0, 1], got 1.5",
       [](EngineConfig* c) { c->gpu_memory_utilization = 1.5f; }},
      {"dtype must be 0 (auto), 1 (bf16), 2 (fp16) or 3 (fp32), got 4",
       [](EngineConfig* c) { c->dtype = 4; }},
      {"dtype must be 0 (auto), 1 (bf16), 2 (fp16) or 3 (fp32), got -1",
       [](EngineConfig* c) { c->dtype = -1; }},
      {"block_size must be a power of two from 8 to 256, got 12",
       [](EngineConfig* c) { c->block_size = 12; }},
      {"block_size must be a power of two from 8 to 256, got 4",
       [](EngineConfig* c) { c->block_size = 4; }},
      {"block_size must be a power of two from 8 to 256, got 512",
       [](EngineConfig* c) { c->block_size = 512; }},
      {"num_kv_blocks must be >= 0, got -1", [](EngineConfig* c) { c->num_kv_blocks = -1; }},
      {"kv_cache_bytes must be > 0 when num_kv_blocks is 0, got 0",
       [](EngineConfig* c) { c->kv_cache_bytes = 0; }},
      {"max_num_seqs must be >= 1, got 0", [](EngineConfig* c) { c->max_num_seqs = 0; }},
      {"max_num_batched_tokens must be >= 1, got 0",
       [](EngineConfig* c) { c->max_num_batched_tokens = 0; }},
      {"max_model_len must be >= 0, got -5", [](EngineConfig* c) { c->max_model_len = -5; }},
      {"kv_allocator must be paged (0) or contiguous (1), got 9",
       [](EngineConfig* c) { c->kv_allocator = static_cast<KvAllocator>(9); }},
      {"num_threads must be >= 0, got -2", [](EngineConfig* c) { c->num_threads = -2; }},
  };
  ASSERT_TRUE(valid_config().validate().ok());
  for (const BadField& b : cases) {
    SCOPED_TRACE(b.needle);
    EngineConfig c = valid_config();
    b.spoil(&c);
    const Status st = c.validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(b.needle), std::string::npos) << st.message();
    MemoryEstimate e;
    EXPECT_EQ(estimate_memory(c, &e).code(), StatusCode::kInvalidArgument);
  }
}

TEST(EngineConfigTest, AKvBudgetOfBlocksNeedsNoByteBudget) {
  EngineConfig c = valid_config();
  c.kv_cache_bytes = 0;
  c.num_kv_blocks = 8;
  EXPECT_TRUE(c.validate().ok());
}

TEST(EngineConfigTest, EstimatingAnUnknownShapeOrDeviceIsRefused) {
  EngineConfig c = valid_config();
  c.random_weights = "no-such-shape";
  MemoryEstimate e;
  EXPECT_EQ(estimate_memory(c, &e).code(), StatusCode::kInvalidArgument);
  c = valid_config();
  c.device = "tpu";
  EXPECT_EQ(estimate_memory(c, &e).code(), StatusCode::kInvalidArgument);
}

// Quantizing while loading runs on the CPU: "auto" goes there and "cuda"
// is refused by name, before anything is read (so the CUDA case holds on a
// machine without a GPU too, where create would refuse the device first).
TEST(EngineConfigTest, QuantizingChoosesTheCpuOrRefusesCuda) {
  EngineConfig config;
  config.quantize = "q4_k_m";
  config.device = "cuda:1";
  DeviceSpec cuda{DeviceSpec::Kind::kCuda, 1};
  const Status refused = device_for_quantize(config, &cuda);
  EXPECT_EQ(refused.code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.message().find("q4_k_m"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("cuda:1"), std::string::npos) << refused.message();
  DeviceSpec automatic{DeviceSpec::Kind::kAuto, 0};
  ASSERT_TRUE(device_for_quantize(config, &automatic).ok());
  EXPECT_EQ(automatic.kind, DeviceSpec::Kind::kCpu);
  config.quantize.clear();
  DeviceSpec kept{DeviceSpec::Kind::kCuda, 1};
  ASSERT_TRUE(device_for_quantize(config, &kept).ok());
  EXPECT_EQ(kept.kind, DeviceSpec::Kind::kCuda);
}

TEST(EngineCreateTest, ABackendFactoryThatFailsOrGivesNothingIsNamed) {
  EngineConfig c = valid_config();
  c.backend_factory = [](const Model&, const BackendOptions&, std::unique_ptr<Backend>*) {
    return Unsupported("this factory serves nothing");
  };
  std::unique_ptr<Engine> engine;
  Status st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), "this factory serves nothing");
  c.backend_factory = [](const Model&, const BackendOptions&, std::unique_ptr<Backend>*) {
    return Status::Ok();
  };
  st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("returned no backend"), std::string::npos) << st.message();
  EXPECT_EQ(engine, nullptr);
}

TEST(EngineCreateTest, ATokenizerLargerThanTheModelsVocabularyIsCorrupt) {
  testing::TinyModelSpec spec;
  spec.vocab_size = testing::tiny_tokenizer_vocab_size() - 10;
  EngineConfig c;
  c.model_path = testing::write_tiny_hf_model(testing::make_temp_dir("pvllm_small_vocab"), spec);
  c.device = "cpu";
  c.num_threads = 1;
  std::unique_ptr<Engine> engine;
  const Status st = Engine::create(c, &engine);
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel);
  EXPECT_NE(
      st.message().find("pieces but the model's vocabulary is " + std::to_string(spec.vocab_size)),
      std::string::npos)
      << st.message();
}

TEST(EngineCreateTest, PromptsOutsideTheModelAreRefused) {
  EngineConfig c;
  c.model_path = testing::write_tiny_hf_model(testing::make_temp_dir("pvllm_prompts"),
                                              testing::TinyModelSpec{});
  c.device = "cpu";
  c.num_threads = 1;
  std::unique_ptr<Engine> engine;
  ASSERT_TRUE(Engine::create(c, &engine).ok());
  uint64_t id = 0;
  Status st = engine->submit_text("", SamplingParams{}, 0, &id);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "prompt is empty");
  st = engine->submit_tokens({1, -3}, SamplingParams{}, 0, &id);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("prompt token 1 is -3, outside the vocabulary"), std::string::npos)
      << st.message();
  st = engine->submit_tokens({}, SamplingParams{}, 0, &id);
  EXPECT_EQ(st.message(), "prompt has no tokens");
}

}  // namespace
}  // namespace pvllm
