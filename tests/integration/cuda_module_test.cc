// The CUDA module loader, device selection, open_backend, the GPU memory
// estimate and the engine's CUDA path, driven through
// tests/util/fake_cuda_module.cc (ctest names it in $PVLLM_CUDA_BACKEND):
// what a module reports reaches the caller as a status naming it, and
// "auto" falls back to the CPU when the module cannot serve.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/backend/backend_loader.h"
#include "core/base/fault_injection.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/kv/kv_cache_dtype.h"
#include "core/model/model.h"
#include "core/model/random_model.h"

namespace pvllm {
namespace {

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

EngineConfig random_config(const char* device) {
  EngineConfig c;
  c.random_weights = "tiny";
  c.device = device;
  c.num_threads = 1;
  return c;
}

class FakeCudaModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("PVLLM_FAKE_CUDA_REFUSAL") != nullptr)
      GTEST_SKIP() << "this run checks a module that is refused";
    const char* path = std::getenv("PVLLM_CUDA_BACKEND");
    if (path == nullptr || std::string(path).find("fake") == std::string::npos)
      GTEST_SKIP() << "PVLLM_CUDA_BACKEND does not name the fake module (run through ctest)";
  }
};

TEST_F(FakeCudaModuleTest, TheModuleLoadsAndReportsItsDevices) {
  const CudaModule* module = nullptr;
  ASSERT_TRUE(CudaModule::get(&module).ok());
  EXPECT_EQ(module->path(), std::getenv("PVLLM_CUDA_BACKEND"));
  int32_t count = 0;
  ASSERT_TRUE(module->device_count(&count).ok());
  EXPECT_EQ(count, 1);
  bool use_cuda = false;
  EXPECT_TRUE(resolve_cuda(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, &use_cuda).ok());
  EXPECT_TRUE(use_cuda);
}

TEST_F(FakeCudaModuleTest, ADeviceIndexBeyondTheCountIsUnsupported) {
  bool use_cuda = true;
  const Status st = resolve_cuda(DeviceSpec{DeviceSpec::Kind::kCuda, 3}, &use_cuda);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("device \"cuda:3\": CUDA device 3 does not exist (1 devices)"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(use_cuda);
}

TEST_F(FakeCudaModuleTest, TheModulesStatusesReachTheCaller) {
  const CudaModule* module = nullptr;
  ASSERT_TRUE(CudaModule::get(&module).ok());
  int32_t count = 0;
  {
    ScopedEnv env("PVLLM_FAKE_CUDA_STATUS", "6");
    const Status st = module->device_count(&count);
    EXPECT_EQ(st.code(), StatusCode::kOutOfMemory);
    EXPECT_EQ(st.message(), "the fake module fails with 6");
    size_t free_bytes = 0, total_bytes = 0;
    EXPECT_EQ(module->mem_info(0, &free_bytes, &total_bytes).code(), StatusCode::kOutOfMemory);
    // "auto" serves on the CPU when the module cannot; "cuda" says why not.
    bool use_cuda = true;
    EXPECT_TRUE(resolve_cuda(DeviceSpec{DeviceSpec::Kind::kAuto, 0}, &use_cuda).ok());
    EXPECT_FALSE(use_cuda);
    EXPECT_EQ(resolve_cuda(DeviceSpec{DeviceSpec::Kind::kCuda, 0}, &use_cuda).code(),
              StatusCode::kOutOfMemory);
  }
  {
    // A code outside StatusCode is a broken module: INTERNAL.
    ScopedEnv env("PVLLM_FAKE_CUDA_STATUS", "99");
    const Status st = module->device_count(&count);
    EXPECT_EQ(st.code(), StatusCode::kInternal);
    EXPECT_EQ(st.message(), "CUDA module: the fake module fails with 99");
  }
}

TEST_F(FakeCudaModuleTest, TheGpuEstimateSizesThePoolFromFreeMemory) {
  MemoryEstimate e;
  ASSERT_TRUE(estimate_memory(random_config("cuda"), &e).ok());
  EXPECT_GT(e.weight_bytes, 0u);
  EXPECT_GT(e.kv_bytes_per_block, 0u);
  EXPECT_GT(e.num_blocks, 0);
  EXPECT_EQ(e.kv_bytes_total, e.kv_bytes_per_block * static_cast<size_t>(e.num_blocks));
  EXPECT_EQ(e.max_tokens_in_cache, int64_t{e.num_blocks} * 16);
  // A fixed pool needs no free-memory query.
  EngineConfig fixed = random_config("cuda:0");
  fixed.num_kv_blocks = 7;
  ASSERT_TRUE(estimate_memory(fixed, &e).ok());
  EXPECT_EQ(e.num_blocks, 7);
  // The query's failure reaches the caller.
  ScopedEnv env("PVLLM_FAKE_CUDA_STATUS", "3");
  EXPECT_EQ(estimate_memory(random_config("cuda"), &e).code(), StatusCode::kIoError);
}

// fp32 (dtype 3) holds weights and K/V in 4-byte elements: twice the bytes
// of bf16 for the same model and block size.
TEST_F(FakeCudaModuleTest, TheGpuEstimateCountsFourByteElementsInFp32) {
  EngineConfig half = random_config("cuda");
  half.num_kv_blocks = 7;
  EngineConfig full = half;
  full.dtype = 3;
  MemoryEstimate h, f;
  ASSERT_TRUE(estimate_memory(half, &h).ok());
  ASSERT_TRUE(estimate_memory(full, &f).ok());
  EXPECT_EQ(f.weight_bytes, 2 * h.weight_bytes);
  EXPECT_EQ(f.kv_bytes_per_block, 2 * h.kv_bytes_per_block);
  EXPECT_EQ(f.kv_bytes_total, 2 * h.kv_bytes_total);
}

// The CUDA estimate resolves kv_cache_dtype as the CUDA backend does
// (cuda_kv_cache_dtype at the activation dtype) and counts the bytes per
// block the backend's pool allocates (kv_bytes_per_block of that dtype):
// 8-bit codes plus one fp16 scale per token row, or the activation dtype.
TEST_F(FakeCudaModuleTest, TheGpuEstimateCountsTheCudaPoolsBytesPerBlock) {
  EngineConfig c = random_config("cuda");
  c.num_kv_blocks = 7;
  MemoryEstimate auto_e;
  ASSERT_TRUE(estimate_memory(c, &auto_e).ok());
  ModelSummary summary;
  ASSERT_TRUE(inspect_random_model("tiny", DType::kBF16, &summary).ok());
  const ModelConfig& m = summary.config;
  const size_t heads = size_t{2} * m.num_layers * m.num_kv_heads;  // K and V, every layer
  const size_t bs = static_cast<size_t>(c.block_size), d = static_cast<size_t>(m.head_dim);
  EXPECT_EQ(auto_e.kv_bytes_per_block, heads * bs * d * 2);  // bf16
  for (KvCacheDtype kv : {KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3}) {
    for (int32_t dtype : {0, 1, 2, 3}) {
      EngineConfig q = c;
      q.kv_cache_dtype = kv;
      q.dtype = dtype;
      MemoryEstimate e;
      const Status st = estimate_memory(q, &e);
      ASSERT_TRUE(st.ok()) << kv_cache_dtype_name(kv) << ": " << st.message();
      EXPECT_EQ(e.kv_bytes_per_block, heads * bs * (d + 2)) << kv_cache_dtype_name(kv);
      KvCacheDtype resolved = KvCacheDtype::kAuto;
      ASSERT_TRUE(
          cuda_kv_cache_dtype(kv, cuda_activation_dtype(dtype, DType::kBF16), &resolved).ok());
      EXPECT_EQ(e.kv_bytes_per_block, kv_bytes_per_block(m, c.block_size, resolved));
      EXPECT_EQ(e.num_blocks, 7);
      EXPECT_EQ(e.kv_bytes_total, 7 * e.kv_bytes_per_block);
    }
  }
  // A budget buys more 8-bit blocks than bf16 ones (the fake reports 1 GiB free).
  EngineConfig budget = random_config("cuda");
  MemoryEstimate half, eight;
  ASSERT_TRUE(estimate_memory(budget, &half).ok());
  budget.kv_cache_dtype = KvCacheDtype::kInt8;
  ASSERT_TRUE(estimate_memory(budget, &eight).ok());
  EXPECT_GT(eight.num_blocks, half.num_blocks);
  // The activation dtype named is served, another 16/32-bit dtype refused
  // (as the backend refuses it at create).
  EngineConfig own = c;
  own.dtype = 2;
  own.kv_cache_dtype = KvCacheDtype::kF16;
  MemoryEstimate e;
  ASSERT_TRUE(estimate_memory(own, &e).ok());
  EXPECT_EQ(e.kv_bytes_per_block, auto_e.kv_bytes_per_block);
  own.dtype = 3;
  own.kv_cache_dtype = KvCacheDtype::kF32;
  ASSERT_TRUE(estimate_memory(own, &e).ok());
  EXPECT_EQ(e.kv_bytes_per_block, 2 * auto_e.kv_bytes_per_block);
  EngineConfig other = c;
  other.kv_cache_dtype = KvCacheDtype::kF32;  // bf16 activations
  Status st = estimate_memory(other, &e);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("kv_cache_dtype f32"), std::string::npos) << st.message();
  other.kv_cache_dtype = KvCacheDtype::kF16;
  EXPECT_EQ(estimate_memory(other, &e).code(), StatusCode::kUnsupported);
}

TEST_F(FakeCudaModuleTest, AnEngineOnCudaGetsTheModulesRefusalAndAutoFallsBackToTheCpu) {
  std::unique_ptr<Engine> engine;
  const Status st = Engine::create(random_config("cuda"), &engine);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("the fake module creates no backend"), std::string::npos)
      << st.message();
  EXPECT_EQ(engine, nullptr);
  ASSERT_TRUE(Engine::create(random_config("auto"), &engine).ok());
  EXPECT_EQ(engine->backend_name().rfind("cpu", 0), 0u) << engine->backend_name();
}

// The engine hands the module its device-allocation fault site: armed, the
// module's nth allocation fails as out of memory and create says so; the
// count is libpvllm's (the module's own copy of the fault state is never
// armed). FaultWalkTest walks the real module's allocations on a GPU.
TEST_F(FakeCudaModuleTest, TheDeviceAllocationFaultSiteReachesTheModule) {
  ScopedEnv allocs("PVLLM_FAKE_CUDA_ALLOCS", "3");
  std::unique_ptr<Engine> engine;
  fault::arm(fault::Site::kDeviceAlloc, 2);
  const Status st = Engine::create(random_config("cuda"), &engine);
  const bool fired = fault::fired(fault::Site::kDeviceAlloc);
  const int64_t passes = fault::passes(fault::Site::kDeviceAlloc);
  fault::disarm();
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.message();
  EXPECT_NE(st.message().find("the fake module's allocation 2 failed"), std::string::npos)
      << st.message();
  EXPECT_TRUE(fired);
  EXPECT_EQ(passes, 2);
  EXPECT_EQ(engine, nullptr);
  // Disarmed, all three allocations pass and the module's refusal comes
  // through as before.
  EXPECT_EQ(Engine::create(random_config("cuda"), &engine).code(), StatusCode::kUnsupported);
}

// open_backend on its own: "cuda" returns the module's refusal, "auto"
// falls back to the CPU on it (asking for the host pool only then), and the
// options' fault hook reaches the module, whose OUT_OF_MEMORY no device
// falls back from.
TEST_F(FakeCudaModuleTest, OpenBackendReturnsTheModulesRefusalOrFallsBackOnAuto) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(make_random_model("tiny", DType::kBF16, /*seed=*/0, &model).ok());
  int host_asks = 0;
  OpenBackendOptions o;
  o.num_threads = 1;
  o.host_num_blocks = [&host_asks](int32_t* n) {
    ++host_asks;
    *n = 8;
    return Status::Ok();
  };
  std::unique_ptr<Backend> backend;
  bool on_cuda = true;
  Status st = open_backend({DeviceSpec::Kind::kCuda, 0}, model.get(), o, &backend, &on_cuda);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), "the fake module creates no backend");
  EXPECT_EQ(backend, nullptr);
  EXPECT_FALSE(on_cuda);
  EXPECT_EQ(host_asks, 0);

  ASSERT_TRUE(open_backend({DeviceSpec::Kind::kAuto, 0}, model.get(), o, &backend, &on_cuda).ok());
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name().rfind("cpu", 0), 0u) << backend->name();
  EXPECT_EQ(backend->num_blocks(), 8);
  EXPECT_FALSE(on_cuda);
  EXPECT_EQ(host_asks, 1);

  ScopedEnv allocs("PVLLM_FAKE_CUDA_ALLOCS", "3");
  o.cuda.fail_device_alloc = [] { return true; };
  backend.reset();
  st = open_backend({DeviceSpec::Kind::kAuto, 0}, model.get(), o, &backend, &on_cuda);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(st.message(), "the fake module's allocation 1 failed");
  EXPECT_EQ(backend, nullptr);
  EXPECT_EQ(host_asks, 1);
}

// Run by ctest with $PVLLM_CUDA_BACKEND naming a library that must be
// refused, and $PVLLM_FAKE_CUDA_REFUSAL what the refusal must say.
TEST(CudaModuleRefusalTest, AModuleThatCannotServeIsRefusedNamingWhy) {
  const char* expected = std::getenv("PVLLM_FAKE_CUDA_REFUSAL");
  if (expected == nullptr) GTEST_SKIP() << "PVLLM_FAKE_CUDA_REFUSAL is unset (run through ctest)";
  const CudaModule* module = nullptr;
  const Status st = CudaModule::get(&module);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find(expected), std::string::npos) << st.message();
  // The failure is remembered: the second call says the same.
  EXPECT_EQ(CudaModule::get(&module).message(), st.message());
  bool use_cuda = true;
  EXPECT_TRUE(resolve_cuda(DeviceSpec{DeviceSpec::Kind::kAuto, 0}, &use_cuda).ok());
  EXPECT_FALSE(use_cuda);
}

}  // namespace
}  // namespace pvllm
