// pvllm_engine_params.quantize through the C ABI (0.10): the real
// stories260K checkpoint quantized while loading generates; the estimate
// counts the quantized bytes; an unknown scheme and an already quantized
// GGUF file are refused; a 0.9 caller (whose struct ends before the field)
// gets no quantizing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/integration/capi_generate.h"

namespace pvllm::testing {
namespace {

// $PVLLM_REPO_MODELS and $PVLLM_TEST_DATA, which ctest sets.
std::string env_path(const char* name, const std::string& tail) {
  const char* dir = std::getenv(name);
  return dir != nullptr && *dir != '\0' ? std::string(dir) + tail : std::string();
}

std::string stories260k() { return env_path("PVLLM_REPO_MODELS", "/stories260K/stories260K.bin"); }

std::string q8_0_gguf() { return env_path("PVLLM_TEST_DATA", "/gguf/stories260K-Q8_0-pure.gguf"); }

class CapiQuantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = stories260k();
    ASSERT_FALSE(model_.empty()) << "PVLLM_REPO_MODELS is not set (ctest sets it)";
  }

  pvllm_engine_params params(const char* quantize) const {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof(p));
    p.model_path = model_.c_str();
    p.device = "cpu";
    p.num_threads = 2;
    p.kv_cache_bytes = 8 << 20;
    p.quantize = quantize;
    return p;
  }

  // Creates the engine (its status and message when that fails) and
  // generates greedily from "Once upon a time"; `stages` collects the
  // progress stages create reported.
  static pvllm_status generate(pvllm_engine_params p, std::vector<int32_t>* ids,
                               std::string* message, std::vector<std::string>* stages = nullptr) {
    if (stages != nullptr) {
      p.progress = [](float, const char* stage, void* user) {
        auto* seen = static_cast<std::vector<std::string>*>(user);
        if (seen->empty() || seen->back() != stage) seen->push_back(stage);
      };
      p.progress_user_data = stages;
    }
    return generate_greedy(p, 8, ids, message);
  }

  static pvllm_status estimate(const pvllm_engine_params& p, pvllm_memory_estimate* out,
                               std::string* message) {
    pvllm_memory_estimate_init(out, sizeof(*out));
    pvllm_error* error = nullptr;
    const pvllm_status st = pvllm_estimate_memory(&p, out, &error);
    *message = take_message(error);
    return st;
  }

  std::string model_;
};

TEST_F(CapiQuantizeTest, Q8_0Generates) {
  std::vector<int32_t> ids;
  std::string message;
  std::vector<std::string> stages;
  ASSERT_EQ(generate(params("q8_0"), &ids, &message, &stages), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(ids.size(), 8u);
  EXPECT_NE(std::find(stages.begin(), stages.end(), "quantizing weights"), stages.end());
  // Without the field the stage is not reported.
  std::vector<int32_t> plain;
  std::vector<std::string> plain_stages;
  ASSERT_EQ(generate(params(nullptr), &plain, &message, &plain_stages), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(plain.size(), 8u);
  EXPECT_EQ(std::find(plain_stages.begin(), plain_stages.end(), "quantizing weights"),
            plain_stages.end());
}

TEST_F(CapiQuantizeTest, Q4_K_MGenerates) {
  std::vector<int32_t> ids;
  std::string message;
  ASSERT_EQ(generate(params("q4_k_m"), &ids, &message), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(ids.size(), 8u);
}

TEST_F(CapiQuantizeTest, SchemeNamesAreCaseInsensitiveAndEmptyIsNone) {
  std::vector<int32_t> ids;
  std::string message;
  ASSERT_EQ(generate(params("Q8_0"), &ids, &message), PVLLM_STATUS_OK) << message;
  pvllm_memory_estimate none, empty;
  ASSERT_EQ(estimate(params(nullptr), &none, &message), PVLLM_STATUS_OK) << message;
  ASSERT_EQ(estimate(params(""), &empty, &message), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(empty.weight_bytes, none.weight_bytes);
}

// The estimate goes through the memory plan create checks: quantized
// weights count fewer bytes, fewer in 4 bits than in 8.
TEST_F(CapiQuantizeTest, EstimateCountsTheQuantizedBytes) {
  pvllm_memory_estimate plain, q8, q4;
  std::string message;
  ASSERT_EQ(estimate(params(nullptr), &plain, &message), PVLLM_STATUS_OK) << message;
  ASSERT_EQ(estimate(params("q8_0"), &q8, &message), PVLLM_STATUS_OK) << message;
  ASSERT_EQ(estimate(params("q4_k_m"), &q4, &message), PVLLM_STATUS_OK) << message;
  EXPECT_GT(plain.weight_bytes, 0u);
  EXPECT_LT(q8.weight_bytes, plain.weight_bytes);
  EXPECT_LT(q4.weight_bytes, q8.weight_bytes);
  // The KV pool does not change with the weights' type.
  EXPECT_EQ(q8.kv_bytes_per_block, plain.kv_bytes_per_block);
  EXPECT_EQ(q8.num_blocks, plain.num_blocks);
  // "auto" estimates the CPU engine quantized weights run on.
  pvllm_engine_params p = params("q8_0");
  p.device = "auto";
  pvllm_memory_estimate on_auto;
  ASSERT_EQ(estimate(p, &on_auto, &message), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(on_auto.weight_bytes, q8.weight_bytes);
  EXPECT_EQ(on_auto.num_blocks, q8.num_blocks);
}

TEST_F(CapiQuantizeTest, AnUnknownSchemeIsInvalidArgumentListingTheSchemes) {
  for (const char* scheme : {"q9_9", "none", "q4_k_s", "fp8"}) {
    SCOPED_TRACE(scheme);
    std::vector<int32_t> ids;
    std::string message;
    EXPECT_EQ(generate(params(scheme), &ids, &message), PVLLM_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(message.find(std::string("\"") + scheme + "\""), std::string::npos) << message;
    EXPECT_NE(message.find("q8_0"), std::string::npos) << message;
    EXPECT_NE(message.find("q4_k_m"), std::string::npos) << message;
    pvllm_memory_estimate e;
    pvllm_memory_estimate_init(&e, sizeof(e));
    e.weight_bytes = 12345;
    pvllm_error* error = nullptr;
    const pvllm_engine_params p = params(scheme);
    EXPECT_EQ(pvllm_estimate_memory(&p, &e, &error), PVLLM_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(take_message(error).find(scheme), std::string::npos);
    EXPECT_EQ(e.weight_bytes, 12345u);  // left as it was
  }
}

TEST_F(CapiQuantizeTest, AnAlreadyQuantizedModelIsUnsupportedNamingTheTensor) {
  const std::string gguf = q8_0_gguf();
  ASSERT_FALSE(gguf.empty()) << "PVLLM_TEST_DATA is not set (ctest sets it)";
  pvllm_engine_params p = params("q4_k_m");
  p.model_path = gguf.c_str();
  std::vector<int32_t> ids;
  std::string message;
  EXPECT_EQ(generate(p, &ids, &message), PVLLM_STATUS_UNSUPPORTED);
  EXPECT_NE(message.find(".weight"), std::string::npos) << message;
  EXPECT_NE(message.find("Q8_0"), std::string::npos) << message;
  // The estimate, through the same memory plan, refuses it too.
  pvllm_memory_estimate e;
  EXPECT_EQ(estimate(p, &e, &message), PVLLM_STATUS_UNSUPPORTED);
  EXPECT_NE(message.find(".weight is already Q8_0"), std::string::npos) << message;
  // The same file without quantize serves.
  p.quantize = nullptr;
  EXPECT_EQ(generate(p, &ids, &message), PVLLM_STATUS_OK) << message;
}

// A caller built against 0.9 passes a struct that ends before quantize:
// whatever lies beyond is not read. A struct_size ending inside the field
// is refused.
TEST_F(CapiQuantizeTest, AStructWithoutTheFieldQuantizesNothing) {
  pvllm_engine_params old = params("not a scheme");  // beyond the 0.9 struct_size: unread
  old.struct_size = offsetof(pvllm_engine_params, quantize);
  pvllm_memory_estimate plain, old_caller;
  std::string message;
  ASSERT_EQ(estimate(params(nullptr), &plain, &message), PVLLM_STATUS_OK) << message;
  ASSERT_EQ(estimate(old, &old_caller, &message), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(old_caller.weight_bytes, plain.weight_bytes);

  pvllm_engine_params torn = params("q8_0");
  torn.struct_size = offsetof(pvllm_engine_params, quantize) + 4;
  pvllm_memory_estimate e;
  EXPECT_EQ(estimate(torn, &e, &message), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("quantize"), std::string::npos) << message;
}

}  // namespace
}  // namespace pvllm::testing
