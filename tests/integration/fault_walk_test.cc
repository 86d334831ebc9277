// Walks an injected fault over every pass through a site (core/base/
// fault_injection.h) during engine create, submit and step: for N = 1, 2,
// ... the Nth pass fails, until a run passes the site fewer than N times.
// Every run must end cleanly: create fails with a status, or every request
// ends exactly once, those the fault hit with FINISH_ERROR and every other
// one with the tokens of a calm run, and the KV pool is whole again. Under
// AddressSanitizer (scripts/sanitize.sh asan) nothing may leak either. The
// CUDA module's allocations are walked where a GPU is (gpu_check.sh runs
// this suite on the GPU machine); elsewhere that test skips, saying why.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/base/fault_injection.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

struct RunResult {
  Status create;
  std::vector<Status> submits;
  std::vector<uint64_t> ids;  // 0 where the submit failed
  Outputs outputs;
  int32_t blocks_used = -1;  // held by sequences (cached-but-free blocks are not)
  bool finished = false;
};

class FaultWalkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 128;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("pvllm_fault_walk"), spec));
    // A shape the CUDA kernels serve: head_dim 64.
    spec.hidden_size = 128;
    spec.num_heads = 2;
    spec.num_kv_heads = 1;
    cuda_model_dir_ =
        new std::string(write_tiny_hf_model(make_temp_dir("pvllm_fault_walk_cuda"), spec));
  }
  static void TearDownTestSuite() {
    delete model_dir_;
    delete cuda_model_dir_;
  }
  void TearDown() override { fault::disarm(); }

  // The walk's engine: on the CPU, or on a GPU for the device allocations.
  static EngineConfig config() {
    EngineConfig c;
    c.model_path = cuda_ ? *cuda_model_dir_ : *model_dir_;
    c.device = cuda_ ? "cuda" : "cpu";
    c.num_threads = 1;
    c.num_kv_blocks = cuda_ ? 6 : 12;  // tight: admission waits and preemption happen
    c.block_size = cuda_ ? 16 : 8;     // the CUDA kernels serve 16, 32 and 256
    c.max_model_len = 64;
    c.max_num_batched_tokens = 16;  // prompts prefill in chunks
    return c;
  }

  static std::vector<std::vector<int32_t>> prompts() {
    return {{1, 5, 9, 14, 20, 27, 35, 44, 50, 61, 72, 80, 91},
            {1, 7, 3, 12},
            {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58}};
  }

  static RunResult run() {
    RunResult r;
    std::unique_ptr<Engine> engine;
    r.create = Engine::create(config(), &engine);
    if (!r.create.ok()) return r;
    SamplingParams p = greedy(10);
    p.ignore_eos = true;
    for (const auto& prompt : prompts()) {
      uint64_t id = 0;
      r.submits.push_back(engine->submit_tokens(prompt, p, 0, &id));
      r.ids.push_back(r.submits.back().ok() ? id : 0);
    }
    for (int i = 0; i < 2000 && engine->has_unfinished(); ++i) {
      // A failed step is allowed; what it did to the requests is checked below.
      (void)engine->step();
      collect(engine.get(), &r.outputs);
    }
    collect(engine.get(), &r.outputs);
    r.finished = !engine->has_unfinished();
    const EngineStats s = engine->stats();
    r.blocks_used = s.num_blocks_used;
    return r;
  }

  // Walks `site`; returns how many passes it covered.
  static int64_t walk(fault::Site site, const RunResult& calm, int* num_errors) {
    int64_t n = 1;
    for (;; ++n) {
      fault::arm(site, n);
      const RunResult r = run();
      const bool fired = fault::fired(site);
      fault::disarm();
      const std::string where = "fault at pass " + std::to_string(n);
      if (!r.create.ok()) {
        EXPECT_TRUE(fired) << where << ": create failed without the fault: " << r.create.message();
        EXPECT_FALSE(r.create.message().empty()) << where;
        EXPECT_NE(r.create.code(), StatusCode::kInternal) << where << ": " << r.create.message();
        continue;
      }
      EXPECT_TRUE(r.finished) << where << ": requests never ended";
      EXPECT_EQ(r.blocks_used, 0) << where << ": blocks still held after every request ended";
      for (size_t i = 0; i < r.ids.size(); ++i) {
        if (r.ids[i] == 0) {
          EXPECT_TRUE(fired) << where << ": submit failed: " << r.submits[i].message();
          continue;
        }
        const auto it = r.outputs.find({r.ids[i], 0});
        if (it == r.outputs.end()) {
          ADD_FAILURE() << where << ": request " << i << " made no event";
          continue;
        }
        EXPECT_EQ(it->second.num_finish_events, 1) << where << ": request " << i;
        if (it->second.finish_reason == FinishReason::kError) {
          EXPECT_TRUE(fired) << where << ": request " << i << " failed without the fault";
          ++*num_errors;
          continue;
        }
        EXPECT_EQ(it->second.token_ids, calm.outputs.at({calm.ids[i], 0}).token_ids)
            << where << ": request " << i << " lost or changed work";
      }
      if (!fired) return n - 1;  // the run passed the site fewer than n times
      if (n > 5000) {
        ADD_FAILURE() << "the walk did not end";
        return n;
      }
    }
  }

  static std::string* model_dir_;
  static std::string* cuda_model_dir_;
  static bool cuda_;
};

std::string* FaultWalkTest::model_dir_ = nullptr;
std::string* FaultWalkTest::cuda_model_dir_ = nullptr;
bool FaultWalkTest::cuda_ = false;

TEST_F(FaultWalkTest, EveryFailureEndsCleanly) {
  const RunResult calm = run();
  ASSERT_TRUE(calm.create.ok()) << calm.create.message();
  ASSERT_TRUE(calm.finished);
  for (size_t i = 0; i < calm.ids.size(); ++i) {
    ASSERT_EQ(calm.outputs.at({calm.ids[i], 0}).token_ids.size(), 10u);
  }
  struct Named {
    fault::Site site;
    const char* name;
  };
  for (const Named s : {Named{fault::Site::kHostAlloc, "host allocations"},
                        Named{fault::Site::kKvBlocks, "KV pool room"},
                        Named{fault::Site::kFileRead, "file reads (short)"}}) {
    int errors = 0;
    const int64_t covered = walk(s.site, calm, &errors);
    std::printf("fault walk: %s: %lld passes walked, %d requests ended with FINISH_ERROR\n", s.name,
                static_cast<long long>(covered), errors);
    EXPECT_GT(covered, 0) << s.name << ": the site was never passed";
  }
}

// The CUDA module's device and pinned-host allocations (the weights, the
// activation buffers, the KV pool, the staging buffers, and those a step
// grows), on a GPU: each fails in turn as out of memory.
TEST_F(FaultWalkTest, DeviceAllocationsOnCudaEndCleanly) {
  cuda_ = true;
  const RunResult calm = run();
  if (calm.create.code() == StatusCode::kUnsupported) {
    cuda_ = false;
    GTEST_SKIP() << "no CUDA engine here: " << calm.create.message();
  }
  ASSERT_TRUE(calm.create.ok()) << calm.create.message();
  ASSERT_TRUE(calm.finished);
  int errors = 0;
  const int64_t covered = walk(fault::Site::kDeviceAlloc, calm, &errors);
  cuda_ = false;
  std::printf(
      "fault walk: CUDA device allocations: %lld passes walked, %d requests ended with "
      "FINISH_ERROR\n",
      static_cast<long long>(covered), errors);
  EXPECT_GT(covered, 0) << "the module made no allocation through the fault site";
}

}  // namespace
}  // namespace pvllm::testing
