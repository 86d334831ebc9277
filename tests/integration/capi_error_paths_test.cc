// C ABI error paths the other suites leave unexercised (found with
// scripts/coverage.sh): each bad argument gets its status and a message
// naming what is wrong, and the engine keeps working after it.
#include <gtest/gtest.h>
#include <pvllm/pvllm.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/util/tiny_model.h"

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;

std::string message_of(pvllm_error* error) {
  std::string m = pvllm_error_message(error);
  pvllm_error_free(error);
  return m;
}

class CapiErrorPathsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = write_tiny_hf_model(make_temp_dir("pvllm_capi_errors"), TinyModelSpec{});
  }
  static pvllm_engine_params params() {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof p);
    p.model_path = model_dir_.c_str();
    p.device = "cpu";
    p.num_threads = 1;
    p.num_kv_blocks = 64;
    return p;
  }
  // An engine over the tiny model made with `p`; NULL (and a failure) when
  // create fails.
  static pvllm_engine* create(const pvllm_engine_params& p) {
    pvllm_engine* engine = nullptr;
    pvllm_error* error = nullptr;
    const pvllm_status st = pvllm_engine_create(&p, &engine, &error);
    EXPECT_EQ(st, PVLLM_STATUS_OK) << pvllm_error_message(error);
    pvllm_error_free(error);
    return engine;
  }
  // One user message saying "hi".
  static pvllm_chat_template_params hi_chat() {
    pvllm_chat_template_params c;
    pvllm_chat_template_params_init(&c, sizeof c);
    c.messages_json = R"([{"role": "user", "content": "hi"}])";
    return c;
  }
  // Renders hi_chat() with `engine`'s templates into a small buffer.
  static pvllm_status apply_hi_chat(pvllm_engine* engine, pvllm_error** error) {
    const pvllm_chat_template_params c = hi_chat();
    char text[64];
    size_t len = 0;
    return pvllm_apply_chat_template(engine, &c, text, sizeof text, &len, error);
  }
  static std::string model_dir_;
};

std::string CapiErrorPathsTest::model_dir_;

TEST_F(CapiErrorPathsTest, AnUnknownKvAllocatorIsNamed) {
  pvllm_engine_params p = params();
  p.kv_allocator = 7;
  pvllm_engine* engine = nullptr;
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("kv_allocator"), std::string::npos);
  EXPECT_EQ(engine, nullptr);
}

void record_progress(float fraction, const char* stage, void* user) {
  auto* seen = static_cast<std::vector<std::pair<float, std::string>>*>(user);
  seen->emplace_back(fraction, stage);
}

TEST_F(CapiErrorPathsTest, ProgressReachesTheCallerInOrder) {
  std::vector<std::pair<float, std::string>> seen;
  pvllm_engine_params p = params();
  p.progress = record_progress;
  p.progress_user_data = &seen;
  pvllm_engine* engine = nullptr;
  ASSERT_EQ(pvllm_engine_create(&p, &engine, nullptr), PVLLM_STATUS_OK);
  ASSERT_GE(seen.size(), 2u);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].first, seen[i - 1].first);
  EXPECT_EQ(seen.back().first, 1.0f);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiErrorPathsTest, NullArraysWithNonZeroCountsAreNamed) {
  pvllm_engine_params p = params();
  pvllm_engine* engine = nullptr;
  ASSERT_EQ(pvllm_engine_create(&p, &engine, nullptr), PVLLM_STATUS_OK);
  pvllm_sampling_params s;
  pvllm_sampling_params_init(&s, sizeof s);
  pvllm_request r;
  pvllm_request_init(&r, sizeof r);
  r.prompt_text = "Once";
  r.sampling = &s;
  uint64_t id = 0;
  struct Case {
    const char* needle;
    void (*apply)(pvllm_request*, pvllm_sampling_params*);
  };
  const Case cases[] = {
      {"stop_token_ids is NULL",
       [](pvllm_request*, pvllm_sampling_params* sp) { sp->num_stop_token_ids = 2; }},
      {"stop[1] is NULL",
       [](pvllm_request*, pvllm_sampling_params* sp) {
         static const char* stops[] = {"x", nullptr};
         sp->stop = stops;
         sp->num_stop = 2;
       }},
      {"prompt_token_ids is NULL",
       [](pvllm_request* rq, pvllm_sampling_params*) {
         rq->prompt_text = nullptr;
         rq->num_prompt_token_ids = 3;
       }},
  };
  for (const Case& c : cases) {
    pvllm_sampling_params sp = s;
    pvllm_request rq = r;
    rq.sampling = &sp;
    c.apply(&rq, &sp);
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_submit(engine, &rq, &id, &error), PVLLM_STATUS_INVALID_ARGUMENT) << c.needle;
    EXPECT_NE(message_of(error).find(c.needle), std::string::npos) << c.needle;
    EXPECT_EQ(id, 0u);
  }
  // The engine is unharmed.
  EXPECT_EQ(pvllm_submit(engine, &r, &id, nullptr), PVLLM_STATUS_OK);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiErrorPathsTest, DetokenizingWithoutATokenizerIsATokenizerError) {
  pvllm_engine_params p;
  pvllm_engine_params_init(&p, sizeof p);
  p.random_weights = "tiny";
  p.device = "cpu";
  p.num_threads = 1;
  p.max_model_len = 64;
  pvllm_engine* engine = nullptr;
  ASSERT_EQ(pvllm_engine_create(&p, &engine, nullptr), PVLLM_STATUS_OK);
  const int32_t ids[] = {1, 2};
  char text[16];
  size_t len = 7;
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_detokenize(engine, ids, 2, text, sizeof text, &len, &error),
            PVLLM_STATUS_TOKENIZER_ERROR);
  EXPECT_NE(message_of(error).find("no tokenizer"), std::string::npos);
  EXPECT_EQ(len, 0u);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiErrorPathsTest, EmptyPathsAndShapesAreNamed) {
  pvllm_engine* engine = nullptr;
  pvllm_error* error = nullptr;
  pvllm_engine_params p = params();
  p.model_path = "";
  EXPECT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("params->model_path is empty"), std::string::npos);
  p.random_weights = "";
  EXPECT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("params->random_weights is empty"), std::string::npos);
  EXPECT_EQ(engine, nullptr);

  pvllm_model_info* info = nullptr;
  EXPECT_EQ(pvllm_model_inspect("", &info, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("model_path is empty"), std::string::npos);
  EXPECT_EQ(pvllm_model_inspect_random(nullptr, &info, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("shape is NULL"), std::string::npos);
  EXPECT_EQ(pvllm_model_inspect_random("tiny", nullptr, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("out_info is NULL"), std::string::npos);
  EXPECT_EQ(info, nullptr);
}

TEST_F(CapiErrorPathsTest, StructSizesNoHeaderHasAreRefusedOrIgnored) {
  pvllm_engine_params p = params();
  p.struct_size = 1u << 20;  // garbage, not a newer header
  pvllm_engine* engine = nullptr;
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("params->struct_size is 1048576"), std::string::npos);
  // *_init leaves a struct alone when the size is garbage or too small to
  // hold struct_size.
  pvllm_sampling_params s;
  std::memset(&s, 0xAB, sizeof s);
  pvllm_sampling_params_init(&s, 1u << 20);
  EXPECT_EQ(s.struct_size, 0xABABABABu);
  pvllm_sampling_params_init(&s, 2);
  EXPECT_EQ(s.struct_size, 0xABABABABu);
  pvllm_sampling_params_init(nullptr, sizeof s);  // no crash
}

TEST_F(CapiErrorPathsTest, ChatTemplateOutParametersAreChecked) {
  pvllm_engine_params p = params();
  p.device = nullptr;  // "auto"
  pvllm_engine* engine = create(p);
  ASSERT_NE(engine, nullptr);
  const pvllm_chat_template_params c = hi_chat();
  char text[16];
  size_t len = 5;
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_apply_chat_template(engine, &c, text, sizeof text, nullptr, &error),
            PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("out_len is NULL"), std::string::npos);
  EXPECT_EQ(pvllm_apply_chat_template(engine, &c, nullptr, 8, &len, &error),
            PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message_of(error).find("text is NULL but capacity is > 0"), std::string::npos);
  EXPECT_EQ(len, 0u);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiErrorPathsTest, AMalformedTokenizerConfigReachesTheChatTemplateCaller) {
  const std::string dir = write_tiny_hf_model(make_temp_dir("pvllm_capi_bad_tc"), TinyModelSpec{});
  std::ofstream(dir + "/tokenizer_config.json") << "{ not json";
  pvllm_engine_params p = params();
  p.model_path = dir.c_str();
  // The model serves; only its chat templates are unreadable.
  pvllm_engine* engine = create(p);
  ASSERT_NE(engine, nullptr);
  pvllm_error* error = nullptr;
  EXPECT_EQ(apply_hi_chat(engine, &error), PVLLM_STATUS_CORRUPT_MODEL);
  EXPECT_NE(message_of(error).find("tokenizer_config.json"), std::string::npos);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiErrorPathsTest, StopTokenIdsAreTaken) {
  pvllm_engine_params p = params();
  pvllm_engine* engine = create(p);
  ASSERT_NE(engine, nullptr);
  pvllm_sampling_params s;
  pvllm_sampling_params_init(&s, sizeof s);
  const int32_t stops[] = {3, 4};
  s.stop_token_ids = stops;
  s.num_stop_token_ids = 2;
  pvllm_request r;
  pvllm_request_init(&r, sizeof r);
  r.prompt_text = "Once";
  r.sampling = &s;
  uint64_t id = 0;
  EXPECT_EQ(pvllm_submit(engine, &r, &id, nullptr), PVLLM_STATUS_OK);
  EXPECT_NE(id, 0u);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiErrorPathsTest, ModelInfoCopiesAtMostSixteenStopIds) {
  TinyModelSpec spec;
  for (int32_t i = 0; i < 20; ++i) spec.generation_eos_ids.push_back(3 + i);
  const std::string dir = write_tiny_hf_model(make_temp_dir("pvllm_capi_stops"), spec);
  pvllm_model_info* info = nullptr;
  ASSERT_EQ(pvllm_model_inspect(dir.c_str(), &info, nullptr), PVLLM_STATUS_OK);
  pvllm_model_config c;
  pvllm_model_config_init(&c, sizeof c);
  ASSERT_EQ(pvllm_model_info_config(info, &c, nullptr), PVLLM_STATUS_OK);
  ASSERT_GE(c.num_stop_token_ids, 16);  // all of them are counted
  for (int i = 0; i < 16; ++i) EXPECT_NE(c.stop_token_ids[i], 0) << i;
  pvllm_model_info_free(info);
}

TEST_F(CapiErrorPathsTest, RandomWeightsWithAModelPathLoadNoChatTemplates) {
  const std::string dir = write_tiny_hf_model(make_temp_dir("pvllm_capi_rw_tc"), TinyModelSpec{});
  std::ofstream(dir + "/tokenizer_config.json") << R"({"chat_template": "x"})";
  pvllm_engine_params p = params();
  p.model_path = dir.c_str();
  p.random_weights = "tiny";
  p.max_model_len = 64;
  pvllm_engine* engine = create(p);
  ASSERT_NE(engine, nullptr);
  pvllm_error* error = nullptr;
  // The shape serves, not the folder: its template is not the model's.
  EXPECT_EQ(apply_hi_chat(engine, &error), PVLLM_STATUS_NOT_FOUND);
  pvllm_error_free(error);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiErrorPathsTest, AnAllocationThatFailsIsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' allocators abort on a request this large";
#else
  pvllm_engine_params p = params();
  pvllm_engine* engine = create(p);
  ASSERT_NE(engine, nullptr);
  // A count of 2^50 ids: copying them needs 4 PiB, which operator new
  // refuses with std::bad_alloc before a byte of `ids` is read.
  const int32_t ids[] = {1};
  char text[8];
  size_t len = 0;
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_detokenize(engine, ids, size_t{1} << 50, text, sizeof text, &len, &error),
            PVLLM_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(message_of(error), "out of memory");
  EXPECT_EQ(len, 0u);
  pvllm_engine_destroy(engine);
#endif
}

}  // namespace
