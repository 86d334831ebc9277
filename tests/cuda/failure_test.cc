// CUDA failures are statuses: a device that does not exist, a KV pool that
// does not fit and out of memory during a step, through Engine as an
// embedder meets them. Every test skips where no CUDA device is present (the
// no-GPU cases are in tests/integration/device_test.cc).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

// Holds (nearly) all free device memory until destroyed: allocations of
// 256 MiB, then smaller ones down to 64 KiB, until none succeeds.
class MemoryHog {
 public:
  MemoryHog() {
    for (size_t size = size_t{256} << 20; size >= (size_t{64} << 10); size /= 2) {
      void* p = nullptr;
      while (cudaMalloc(&p, size) == cudaSuccess) blocks_.push_back(p);
      cudaGetLastError();  // the failed allocation's error is expected
    }
  }
  ~MemoryHog() {
    for (void* p : blocks_) cudaFree(p);
  }
  MemoryHog(const MemoryHog&) = delete;
  MemoryHog& operator=(const MemoryHog&) = delete;
  size_t num_blocks() const { return blocks_.size(); }

 private:
  std::vector<void*> blocks_;
};

class CudaFailureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.hidden_size = 256;
    spec.num_heads = 4;  // head_dim 64: a shape the CUDA kernels serve
    spec.num_kv_heads = 2;
    spec.intermediate_size = 512;
    spec.max_position_embeddings = 512;
    spec.dtype = DType::kBF16;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("cuda_failure_test"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  EngineConfig config() const {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cuda";
    c.num_kv_blocks = 256;
    return c;
  }

  static std::string* model_dir_;
};

std::string* CudaFailureTest::model_dir_ = nullptr;

TEST_F(CudaFailureTest, MissingDeviceIndexIsUnsupported) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EngineConfig c = config();
  c.device = "cuda:" + std::to_string(count);
  std::unique_ptr<Engine> engine;
  const Status s = Engine::create(c, &engine);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  EXPECT_EQ(engine, nullptr);
}

TEST_F(CudaFailureTest, KvPoolLargerThanTheDeviceIsOutOfMemory) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  EngineConfig c = config();
  c.num_kv_blocks = 1 << 26;  // 2^26 blocks of 16 tokens: far past any GPU
  std::unique_ptr<Engine> engine;
  const Status s = Engine::create(c, &engine);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.message();
  EXPECT_NE(s.message().find("cache"), std::string::npos) << s.message();
  // Nothing leaked: a normal engine still fits afterwards.
  c.num_kv_blocks = 256;
  const Status again = Engine::create(c, &engine);
  EXPECT_TRUE(again.ok()) << again.message();
}

TEST_F(CudaFailureTest, NoMemoryLeftForTheKvCacheIsOutOfMemory) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  EngineConfig c = config();
  c.num_kv_blocks = 0;  // sized from free memory
  c.gpu_memory_utilization = 0.001f;
  std::unique_ptr<Engine> engine;
  const Status s = Engine::create(c, &engine);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.message();
  EXPECT_NE(s.message().find("gpu_memory_utilization"), std::string::npos) << s.message();
}

TEST_F(CudaFailureTest, CreateOnAFullDeviceIsOutOfMemory) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  MemoryHog hog;
  ASSERT_GT(hog.num_blocks(), 0u);
  std::unique_ptr<Engine> engine;
  const Status s = Engine::create(config(), &engine);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.message();
  EXPECT_EQ(engine, nullptr);
}

// Out of memory in the middle of serving: a request whose sampling needs
// more device memory (128 penalized samples over a long prompt) cannot run
// while the device is full, and ends with FINISH_ERROR; a plain request in
// the same steps goes on with its work intact and, once the memory is back,
// penalized requests run again.
TEST_F(CudaFailureTest, OutOfMemoryDuringAStepEndsOnlyTheRequestThatCannotRun) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  EngineConfig c = config();
  c.max_num_seqs = 256;
  c.num_kv_blocks = 1024;  // the prompt's 19 blocks plus one or two per sample
  std::unique_ptr<Engine> engine = make_engine(c);
  ASSERT_NE(engine, nullptr);
  std::vector<int32_t> long_prompt = {1};
  for (int32_t i = 0; i < 300; ++i) long_prompt.push_back(3 + (i * 37) % 250);
  SamplingParams plain = greedy(24);
  plain.ignore_eos = true;
  SamplingParams penalized;
  penalized.n = 128;  // with the plain request, within max_num_seqs: one batch
  penalized.repetition_penalty = 1.3f;
  penalized.max_tokens = 4;
  penalized.ignore_eos = true;

  // The plain request alone, for reference.
  uint64_t ref_id = 0;
  ASSERT_TRUE(engine->submit_tokens({1, 5, 9, 14}, plain, 0, &ref_id).ok());
  const Outputs ref = run_to_completion(engine.get());

  Outputs out;
  uint64_t plain_id = 0, penalized_id = 0;
  {
    MemoryHog hog;
    ASSERT_TRUE(engine->submit_tokens({1, 5, 9, 14}, plain, 0, &plain_id).ok());
    ASSERT_TRUE(engine->submit_tokens(long_prompt, penalized, 0, &penalized_id).ok());
    int num_failed_steps = 0;
    for (int i = 0; i < 200 && engine->has_unfinished(); ++i) {
      const Status st = engine->step();
      if (!st.ok()) {
        EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.message();
        ++num_failed_steps;
      }
      collect(engine.get(), &out);
    }
    EXPECT_GE(num_failed_steps, 1);
  }
  EXPECT_FALSE(engine->has_unfinished());
  EXPECT_EQ(out.at({plain_id, 0}).token_ids, ref.at({ref_id, 0}).token_ids)
      << "the plain request lost or changed its work";
  for (int32_t k = 0; k < penalized.n; ++k) {
    const SampleOutput& o = out.at({penalized_id, k});
    EXPECT_EQ(o.finish_reason, FinishReason::kError) << "sample " << k;
    EXPECT_EQ(o.num_finish_events, 1) << "sample " << k;
  }

  // With the memory back, the same request runs.
  uint64_t again_id = 0;
  ASSERT_TRUE(engine->submit_tokens(long_prompt, penalized, 0, &again_id).ok());
  const Outputs again = run_to_completion(engine.get());
  for (int32_t k = 0; k < penalized.n; ++k) {
    EXPECT_EQ(again.at({again_id, k}).finish_reason, FinishReason::kLength) << "sample " << k;
  }
}

}  // namespace
}  // namespace pvllm::testing
