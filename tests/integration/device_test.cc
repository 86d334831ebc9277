// Device selection through the C ABI: "auto" falls back to the CPU, "cuda"
// without a usable GPU is UNSUPPORTED with the reason, a bogus device string
// is INVALID_ARGUMENT, and libpvllm.so never links CUDA (the backend is the
// dlopen'ed module libpvllm_cuda.so).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "pvllm/pvllm.hpp"
#include "tests/util/loaded_library.h"
#include "tests/util/tiny_model.h"

namespace {

using pvllm::testing::library_holding;
using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;

using EnginePtr = pvllm::cxx::EnginePtr;

struct Created {
  pvllm_status status = PVLLM_STATUS_OK;
  std::string message;
  EnginePtr engine;
};

// Lines of a shell command's output.
std::vector<std::string> run_lines(const std::string& command) {
  std::vector<std::string> lines;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return lines;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) lines.emplace_back(buf);
  pclose(pipe);
  return lines;
}

bool names_cuda(const std::string& line) {
  std::string lower;
  for (char c : line) lower.push_back(static_cast<char>(std::tolower(c)));
  return lower.find("cuda") != std::string::npos || lower.find("cublas") != std::string::npos;
}

class DeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // head_dim 64: a shape the CUDA kernels serve, so on a GPU machine
    // "cuda" really succeeds and the no-GPU expectations below skip.
    TinyModelSpec spec;
    spec.hidden_size = 128;
    spec.num_heads = 2;
    spec.num_kv_heads = 1;
    spec.intermediate_size = 128;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("pvllm_device_test"), spec));
  }
  static void TearDownTestSuite() {
    delete model_dir_;
    model_dir_ = nullptr;
  }

  static pvllm_engine_params params(const char* device) {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof p);
    p.model_path = model_dir_->c_str();
    p.device = device;
    p.num_kv_blocks = 64;
    p.num_threads = 1;
    return p;
  }

  static Created create(const pvllm_engine_params& p) {
    Created c;
    pvllm_engine* raw = nullptr;
    pvllm_error* error = nullptr;
    c.status = pvllm_engine_create(&p, &raw, &error);
    if (error != nullptr) c.message = pvllm_error_message(error);
    pvllm_error_free(error);
    c.engine.reset(raw);
    return c;
  }

  // Greedy tokens for one prompt of token ids.
  static std::vector<int32_t> generate(pvllm_engine* engine, int32_t max_tokens) {
    const std::vector<int32_t> prompt = {1, 5, 9, 14, 3, 7};
    pvllm_sampling_params s;
    pvllm_sampling_params_init(&s, sizeof s);
    s.temperature = 0.0f;
    s.max_tokens = max_tokens;
    s.ignore_eos = 1;
    pvllm_request r;
    pvllm_request_init(&r, sizeof r);
    r.prompt_token_ids = prompt.data();
    r.num_prompt_token_ids = prompt.size();
    r.sampling = &s;
    uint64_t id = 0;
    EXPECT_EQ(pvllm_submit(engine, &r, &id, nullptr), PVLLM_STATUS_OK);
    std::vector<int32_t> tokens;
    int32_t num_unfinished = 1;
    for (int step = 0; step < 100 && num_unfinished > 0; ++step) {
      EXPECT_EQ(pvllm_step(engine, &num_unfinished, nullptr), PVLLM_STATUS_OK);
      pvllm_output_batch* batch = nullptr;
      EXPECT_EQ(pvllm_poll(engine, 0, &batch, nullptr), PVLLM_STATUS_OK);
      for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
        const pvllm_output* o = pvllm_output_batch_get(batch, i);
        tokens.insert(tokens.end(), o->token_ids, o->token_ids + o->num_token_ids);
      }
      pvllm_output_batch_free(batch);
    }
    return tokens;
  }

  // Whether this machine serves "cuda" (then the no-GPU tests skip).
  static bool cuda_usable() {
    static const bool usable = create(params("cuda")).status == PVLLM_STATUS_OK;
    return usable;
  }

  static std::string* model_dir_;
};

std::string* DeviceTest::model_dir_ = nullptr;

TEST_F(DeviceTest, ParamsDefaultToAutoDeviceAndGpuSettings) {
  pvllm_engine_params p;
  pvllm_engine_params_init(&p, sizeof p);
  EXPECT_STREQ(p.device, "auto");
  EXPECT_FLOAT_EQ(p.gpu_memory_utilization, 0.90f);
  EXPECT_EQ(p.dtype, PVLLM_DTYPE_AUTO);
  EXPECT_EQ(p.enable_cuda_graphs, 1);
}

TEST_F(DeviceTest, AutoGivesAWorkingEngineMatchingTheCpu) {
  Created cpu = create(params("cpu"));
  ASSERT_EQ(cpu.status, PVLLM_STATUS_OK) << cpu.message;
  Created automatic = create(params("auto"));
  ASSERT_EQ(automatic.status, PVLLM_STATUS_OK) << automatic.message;
  const std::vector<int32_t> auto_tokens = generate(automatic.engine.get(), 8);
  ASSERT_EQ(auto_tokens.size(), 8u);
  if (cuda_usable()) GTEST_SKIP() << "a CUDA device is present: \"auto\" ran on it";
  // Without a GPU "auto" is the CPU backend: the same tokens exactly.
  EXPECT_EQ(auto_tokens, generate(cpu.engine.get(), 8));
}

TEST_F(DeviceTest, CudaWithoutAGpuIsUnsupportedNamingTheReason) {
  if (cuda_usable()) GTEST_SKIP() << "a CUDA device is present";
  for (const char* device : {"cuda", "cuda:0"}) {
    Created c = create(params(device));
    EXPECT_EQ(c.status, PVLLM_STATUS_UNSUPPORTED) << device << ": " << c.message;
    EXPECT_EQ(c.engine, nullptr);
    const bool names_reason = c.message.find("libpvllm_cuda.so") != std::string::npos ||
                              c.message.find("CUDA driver") != std::string::npos ||
                              c.message.find("CUDA device") != std::string::npos;
    EXPECT_TRUE(names_reason) << device << ": " << c.message;
  }
}

TEST_F(DeviceTest, MissingDeviceIndexIsUnsupported) {
  Created c = create(params("cuda:999"));
  EXPECT_EQ(c.status, PVLLM_STATUS_UNSUPPORTED) << c.message;
  EXPECT_FALSE(c.message.empty());
}

TEST_F(DeviceTest, BogusDeviceStringIsInvalidArgument) {
  for (const char* device : {"gpu", "cuda:", "cuda:x", "cuda0", "cuda:-1", "CPU", ""}) {
    Created c = create(params(device));
    EXPECT_EQ(c.status, PVLLM_STATUS_INVALID_ARGUMENT) << "\"" << device << "\": " << c.message;
    EXPECT_NE(c.message.find("device"), std::string::npos) << c.message;
  }
}

TEST_F(DeviceTest, GpuSettingsOutOfRangeAreInvalidArgument) {
  pvllm_engine_params p = params("cpu");
  p.gpu_memory_utilization = 1.5f;
  EXPECT_EQ(create(p).status, PVLLM_STATUS_INVALID_ARGUMENT);
  p = params("cpu");
  p.dtype = 7;
  EXPECT_EQ(create(p).status, PVLLM_STATUS_INVALID_ARGUMENT);
}

TEST_F(DeviceTest, EstimateOnCudaWithoutAGpuIsUnsupported) {
  pvllm_memory_estimate cpu_est;
  pvllm_memory_estimate_init(&cpu_est, sizeof cpu_est);
  pvllm_engine_params p = params("cpu");
  p.num_kv_blocks = 0;
  ASSERT_EQ(pvllm_estimate_memory(&p, &cpu_est, nullptr), PVLLM_STATUS_OK);
  if (cuda_usable()) GTEST_SKIP() << "a CUDA device is present";
  pvllm_memory_estimate est;
  pvllm_memory_estimate_init(&est, sizeof est);
  p.device = "cuda";
  EXPECT_EQ(pvllm_estimate_memory(&p, &est, nullptr), PVLLM_STATUS_UNSUPPORTED);
  // "auto" without a GPU estimates the CPU pool.
  p.device = "auto";
  ASSERT_EQ(pvllm_estimate_memory(&p, &est, nullptr), PVLLM_STATUS_OK);
  EXPECT_EQ(est.num_blocks, cpu_est.num_blocks);
  EXPECT_EQ(est.kv_bytes_per_block, cpu_est.kv_bytes_per_block);
}

// The libpvllm.so this process loaded (build tree or bundle), found by
// dladdr on one of its functions.
std::string loaded_libpvllm() {
  return library_holding(reinterpret_cast<const void*>(&pvllm_version));
}

TEST(DeviceLibraryTest, LibpvllmHasNoUndefinedCudaSymbols) {
  const std::string library = loaded_libpvllm();
  ASSERT_NE(library.find("libpvllm"), std::string::npos)
      << "dladdr did not find libpvllm.so: \"" << library << "\"";
  const std::vector<std::string> lines = run_lines("nm -D --undefined-only '" + library + "'");
  ASSERT_FALSE(lines.empty()) << "nm printed nothing for " << library;
  for (const std::string& line : lines) EXPECT_FALSE(names_cuda(line)) << line;
  for (const std::string& line : run_lines("readelf -d '" + library + "'")) {
    if (line.find("NEEDED") != std::string::npos) {
      EXPECT_FALSE(names_cuda(line)) << line;
    }
  }
}

// The module named by $PVLLM_CUDA_BACKEND (ctest sets it when the build has
// one; scripts/gpu_check.sh sets it to the bundle's copy) exports only
// pvllm_cuda_* functions, the loader's three among them.
TEST(DeviceLibraryTest, CudaModuleExportsOnlyItsFactory) {
  const char* module = std::getenv("PVLLM_CUDA_BACKEND");
  if (module == nullptr || *module == '\0') {
    GTEST_SKIP() << "PVLLM_CUDA_BACKEND is unset (ctest sets it when the build has the module)";
  }
  const std::vector<std::string> lines =
      run_lines(std::string("nm -D --defined-only '") + module + "'");
  std::vector<std::string> names;
  for (const std::string& line : lines) {
    // "<addr> <type> <name>[@@version]"; the version node itself is type A.
    char type = 0;
    char name[512] = "";
    if (std::sscanf(line.c_str(), "%*s %c %511s", &type, name) != 2 || type == 'A') continue;
    std::string n = name;
    n = n.substr(0, n.find('@'));
    names.push_back(n);
  }
  ASSERT_FALSE(names.empty()) << "nm found no exports in " << module;
  for (const std::string& n : names) {
    EXPECT_EQ(n.rfind("pvllm_cuda_", 0), 0u) << module << " exports " << n;
  }
  for (const char* factory :
       {"pvllm_cuda_backend_create", "pvllm_cuda_device_count", "pvllm_cuda_mem_info"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), factory), names.end())
        << module << " lacks " << factory;
  }
}

}  // namespace
