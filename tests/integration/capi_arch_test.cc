// The architectures through the C ABI: each refused config field ends
// pvllm_engine_create with UNSUPPORTED and a message naming the field and
// its value; pvllm_model_info_config reports every honoured field.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "pvllm/pvllm.h"
#include "tests/util/refused_fields.h"
#include "tests/util/tiny_model.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string write_tiny(const std::string& root, const std::string& tiny, const json& set = {}) {
  const std::string dir = root + "/" + tiny;
  fs::create_directories(dir);
  pvllm::testing::write_tiny_hf_model(dir, pvllm::testing::tiny_arch_spec(tiny));
  pvllm::testing::edit_hf_config(dir, set);
  return dir;
}

// pvllm_engine_create on the CPU with a small KV pool; the message on failure.
pvllm_status create_engine(const std::string& dir, std::string* message,
                           int32_t max_model_len = 0) {
  pvllm_engine_params params;
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = dir.c_str();
  params.max_model_len = max_model_len;
  params.device = "cpu";
  params.kv_cache_bytes = 1 << 20;
  pvllm_engine* engine = nullptr;
  pvllm_error* error = nullptr;
  const pvllm_status status = pvllm_engine_create(&params, &engine, &error);
  EXPECT_EQ(engine == nullptr, status != PVLLM_STATUS_OK);
  *message = error != nullptr ? pvllm_error_message(error) : "";
  pvllm_error_free(error);
  pvllm_engine_destroy(engine);
  return status;
}

class CapiArchTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = pvllm::testing::make_temp_dir("pvllm_capi_arch_"); }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

class CapiRefusedFieldTest : public CapiArchTest,
                             public ::testing::WithParamInterface<pvllm::testing::RefusedField> {};

TEST_P(CapiRefusedFieldTest, EngineCreateIsUnsupportedNamingFieldAndValue) {
  const pvllm::testing::RefusedField& r = GetParam();
  const std::string dir = write_tiny(root_, r.tiny, r.set);
  std::string message;
  EXPECT_EQ(create_engine(dir, &message), PVLLM_STATUS_UNSUPPORTED);
  const std::string named = "field \"" + r.field + "\" = " + r.value;
  EXPECT_NE(message.find(named), std::string::npos)
      << "message \"" << message << "\" does not contain " << named;
}

INSTANTIATE_TEST_SUITE_P(Fields, CapiRefusedFieldTest,
                         ::testing::ValuesIn(pvllm::testing::refused_fields()),
                         [](const auto& info) { return std::string(info.param.name); });

pvllm_model_config config_of(const std::string& dir) {
  pvllm_model_config c;
  pvllm_model_config_init(&c, sizeof c);
  pvllm_model_info* info = nullptr;
  EXPECT_EQ(pvllm_model_inspect(dir.c_str(), &info, nullptr), PVLLM_STATUS_OK);
  EXPECT_EQ(pvllm_model_info_config(info, &c, nullptr), PVLLM_STATUS_OK);
  pvllm_model_info_free(info);
  return c;
}

TEST_F(CapiArchTest, ModelConfigReportsEveryHonouredField) {
  pvllm_model_config c = config_of(write_tiny(root_, "llama3"));
  EXPECT_EQ(c.rope_type, PVLLM_ROPE_LLAMA3);
  EXPECT_EQ(c.rope_factor, 8.0f);
  EXPECT_EQ(c.rope_low_freq_factor, 1.0f);
  EXPECT_EQ(c.rope_high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_original_max_position_embeddings, 32);
  EXPECT_EQ(c.eos_token_id, 2);
  ASSERT_EQ(c.num_stop_token_ids, 2);
  EXPECT_EQ(c.stop_token_ids[0], 5);
  EXPECT_EQ(c.stop_token_ids[1], 7);

  c = config_of(write_tiny(root_, "mistral"));
  EXPECT_EQ(std::string(c.architecture), "mistral");
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.rope_type, PVLLM_ROPE_DEFAULT);
  EXPECT_EQ(c.rope_factor, 0.0f);

  c = config_of(write_tiny(root_, "qwen2"));
  EXPECT_EQ(c.qkv_bias, 1);
  EXPECT_EQ(c.o_bias, 0);
  EXPECT_EQ(c.tie_word_embeddings, 1);

  c = config_of(write_tiny(root_, "qwen3"));
  EXPECT_EQ(c.qk_norm, 1);
  EXPECT_EQ(c.head_dim, 16);

  c = config_of(write_tiny(root_, "llama-dynamic"));
  EXPECT_EQ(c.rope_type, PVLLM_ROPE_DYNAMIC);
  EXPECT_EQ(c.rope_factor, 2.0f);
  EXPECT_EQ(c.rope_original_max_position_embeddings, 16);
}

TEST_F(CapiArchTest, AnOlderCallersStructEndsBeforeTheNewFields) {
  const std::string dir = write_tiny(root_, "mistral");
  // A 0.2 caller's struct ends after eos_token_id: nothing past it is written.
  unsigned char buf[sizeof(pvllm_model_config) + 8];
  std::memset(buf, 0xab, sizeof buf);
  auto* c = reinterpret_cast<pvllm_model_config*>(buf);
  const size_t old_size = offsetof(pvllm_model_config, rope_type);
  pvllm_model_config_init(c, old_size);
  pvllm_model_info* info = nullptr;
  ASSERT_EQ(pvllm_model_inspect(dir.c_str(), &info, nullptr), PVLLM_STATUS_OK);
  EXPECT_EQ(pvllm_model_info_config(info, c, nullptr), PVLLM_STATUS_OK);
  pvllm_model_info_free(info);
  EXPECT_EQ(c->eos_token_id, 2);
  for (size_t i = old_size; i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xab) << i;
  EXPECT_FALSE(PVLLM_STRUCT_HAS(c, pvllm_model_config, sliding_window));
}

TEST_F(CapiArchTest, EachArchitectureOpensAnEngineOnTheCpu) {
  for (const char* tiny : {"llama3", "mistral", "qwen2", "qwen3", "llama-bias"}) {
    const std::string dir = write_tiny(root_, tiny);
    std::string message;
    EXPECT_EQ(create_engine(dir, &message), PVLLM_STATUS_OK) << tiny << ": " << message;
  }
}

// Linear and dynamic scaling stretch the context by their factor: the
// llama-dynamic model (max_position_embeddings 16, factor 2) serves 32
// tokens and no more; an unscaled model stops at max_position_embeddings.
TEST_F(CapiArchTest, RopeScalingStretchesTheLongestContext) {
  const std::string dynamic = write_tiny(root_, "llama-dynamic");
  std::string message;
  EXPECT_EQ(create_engine(dynamic, &message, 32), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(create_engine(dynamic, &message, 33), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("longest context 32"), std::string::npos) << message;

  const std::string plain = write_tiny(root_, "llama2");
  const int32_t max_pos = config_of(plain).max_position_embeddings;
  EXPECT_EQ(create_engine(plain, &message, max_pos), PVLLM_STATUS_OK) << message;
  EXPECT_EQ(create_engine(plain, &message, max_pos + 1), PVLLM_STATUS_INVALID_ARGUMENT);
}

}  // namespace
