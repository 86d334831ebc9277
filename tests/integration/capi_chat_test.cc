// pvllm_apply_chat_template through libpvllm.so and pvllm.hpp on a tiny
// model whose folder holds tests/data/chat_template_tiny's template: the
// renderings match tests/data/chat_goldens/tiny.json (made by
// @huggingface/jinja), the buffer protocol and the documented statuses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pvllm/pvllm.hpp>
#include <sstream>
#include <string>

#include "tests/util/tiny_model.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

class CapiChatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* data = std::getenv("PVLLM_TEST_DATA");
    if (data == nullptr) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (run through ctest)";
    data_ = data;
    model_dir_ = pvllm::testing::write_tiny_hf_model(pvllm::testing::make_temp_dir("capi_chat"),
                                                     pvllm::testing::TinyModelSpec{});
    fs::copy_file(data_ / "chat_template_tiny/tokenizer_config.json",
                  fs::path(model_dir_) / "tokenizer_config.json");
  }

  pvllm::cxx::Engine make_engine(const std::string& path) {
    pvllm_engine_params params = pvllm::cxx::defaults<pvllm_engine_params>();
    params.model_path = path.c_str();
    params.device = "cpu";
    params.num_threads = 1;
    return pvllm::cxx::Engine(params);
  }

  fs::path data_;
  std::string model_dir_;
};

TEST_F(CapiChatTest, RendersTheGoldenConversations) {
  const Json golden = Json::parse(read_text(data_ / "chat_goldens/tiny.json"));
  pvllm::cxx::Engine engine = make_engine(model_dir_);
  ASSERT_GE(golden["cases"].size(), 5u);
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string messages = c["messages"].dump();
    pvllm_chat_template_params params = pvllm::cxx::defaults<pvllm_chat_template_params>();
    params.messages_json = messages.c_str();
    params.add_generation_prompt = c["add_generation_prompt"].get<bool>() ? 1 : 0;
    if (c.contains("error")) {
      try {
        engine.apply_chat_template(params);
        ADD_FAILURE() << "rendered, but the reference failed: " << c["error"];
      } catch (const pvllm::cxx::Error& e) {
        EXPECT_EQ(e.status(), PVLLM_STATUS_INVALID_ARGUMENT);
        EXPECT_EQ(std::string(e.what()), c["error"].get<std::string>());  // raise_exception's text
      }
      continue;
    }
    EXPECT_EQ(engine.apply_chat_template(params), c["expected"].get<std::string>());
  }
}

TEST_F(CapiChatTest, BufferProtocolAndStatuses) {
  pvllm::cxx::Engine engine = make_engine(model_dir_);
  pvllm_chat_template_params params = pvllm::cxx::defaults<pvllm_chat_template_params>();
  EXPECT_EQ(params.add_generation_prompt, 1);
  params.messages_json = R"([{"role": "user", "content": "Hi"}])";
  const std::string expected = "<s>[USER] Hi\n[BOT]";
  size_t len = 99;
  pvllm::cxx::ErrorPtr error;
  EXPECT_EQ(pvllm_apply_chat_template(engine.get(), &params, nullptr, 0, &len,
                                      pvllm::cxx::out_ptr(error)),
            PVLLM_STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, expected.size());
  std::string buffer(expected.size() + 1, 'x');
  ASSERT_EQ(pvllm_apply_chat_template(engine.get(), &params, buffer.data(), buffer.size(), &len,
                                      pvllm::cxx::out_ptr(error)),
            PVLLM_STATUS_OK);
  EXPECT_EQ(std::string(buffer.c_str()), expected);

  auto status_of = [&](const pvllm_chat_template_params* p) {
    size_t n = 7;
    const pvllm_status st = pvllm_apply_chat_template(engine.get(), p, buffer.data(), buffer.size(),
                                                      &n, pvllm::cxx::out_ptr(error));
    EXPECT_EQ(n, 0u);
    return st;
  };
  EXPECT_EQ(status_of(nullptr), PVLLM_STATUS_INVALID_ARGUMENT);
  pvllm_chat_template_params bad = params;
  bad.messages_json = nullptr;
  EXPECT_EQ(status_of(&bad), PVLLM_STATUS_INVALID_ARGUMENT);
  bad.messages_json = "[{\"role\": ";
  EXPECT_EQ(status_of(&bad), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pvllm_error_message(error.get())).find("messages_json"), std::string::npos);
  bad = params;
  bad.extra_context_json = "[1]";
  EXPECT_EQ(status_of(&bad), PVLLM_STATUS_INVALID_ARGUMENT);
  bad = params;
  bad.template_name = "tool_use";
  EXPECT_EQ(status_of(&bad), PVLLM_STATUS_NOT_FOUND);
  bad = params;
  bad.struct_size = 4;
  EXPECT_EQ(status_of(&bad), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(pvllm_apply_chat_template(nullptr, &params, nullptr, 0, &len, nullptr),
            PVLLM_STATUS_INVALID_ARGUMENT);
}

TEST_F(CapiChatTest, ExtraContextReachesTheTemplate) {
  const fs::path dir = pvllm::testing::write_tiny_hf_model(
      pvllm::testing::make_temp_dir("capi_chat_extra"), pvllm::testing::TinyModelSpec{});
  std::ofstream(dir / "chat_template.jinja")
      << "{% if enable_thinking is defined and not enable_thinking %}no-think {% endif %}"
         "{{ messages | length }}";
  pvllm::cxx::Engine engine = make_engine(dir.string());
  pvllm_chat_template_params params = pvllm::cxx::defaults<pvllm_chat_template_params>();
  params.messages_json = "[{}, {}]";
  EXPECT_EQ(engine.apply_chat_template(params), "2");
  params.extra_context_json = R"({"enable_thinking": false})";
  EXPECT_EQ(engine.apply_chat_template(params), "no-think 2");
}

TEST_F(CapiChatTest, ModelWithoutTemplateIsNotFoundAndUnsupportedIsNamed) {
  const fs::path dir = pvllm::testing::write_tiny_hf_model(
      pvllm::testing::make_temp_dir("capi_chat_none"), pvllm::testing::TinyModelSpec{});
  pvllm::cxx::Engine engine = make_engine(dir.string());  // creates without a template
  try {
    engine.apply_chat_template("[]");
    ADD_FAILURE() << "no template, yet it rendered";
  } catch (const pvllm::cxx::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_NOT_FOUND) << e.what();
  }
  std::ofstream(dir / "chat_template.jinja") << "{{ messages | batch(2) }}";
  pvllm::cxx::Engine unsupported = make_engine(dir.string());
  try {
    unsupported.apply_chat_template("[]");
    ADD_FAILURE() << "an unsupported filter rendered";
  } catch (const pvllm::cxx::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("filter 'batch'"), std::string::npos) << e.what();
  }
}

}  // namespace
