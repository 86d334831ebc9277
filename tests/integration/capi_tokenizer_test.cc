// pvllm_tokenizer (0.9) through libpvllm.so and pvllm.hpp: every model path
// an engine takes gives the engine's own ids without loading weights; a
// folder of chat templates alone renders them; bad paths are statuses.
// pvllm_request.add_special_tokens: a chat prompt that writes its BOS,
// submitted with it off, reaches the model with exactly one BOS (Llama 3.1's
// tokenizer.json and template, from the reference packages).
// pvllm_chat_template_params.chat_template replaces the model's template.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pvllm/pvllm.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/pvllm_file_edit.h"
#include "tests/util/tiny_model.h"

namespace {

namespace fs = std::filesystem;
namespace px = pvllm::cxx;

px::Engine make_engine(const std::string& path) {
  pvllm_engine_params params = px::defaults<pvllm_engine_params>();
  params.model_path = path.c_str();
  params.device = "cpu";
  params.num_threads = 1;
  params.kv_cache_bytes = 16 << 20;
  return px::Engine(params);
}

// A tiny Hugging Face folder at `dir` (made first).
std::string tiny_hf(const std::string& dir) {
  fs::create_directories(dir);
  return pvllm::testing::write_tiny_hf_model(dir, {});
}

pvllm_status open_status(const char* path, std::string* message) {
  pvllm_tokenizer* tokenizer = nullptr;
  pvllm_error* error = nullptr;
  const pvllm_status status = pvllm_tokenizer_open(path, &tokenizer, &error);
  *message = error != nullptr ? pvllm_error_message(error) : "";
  EXPECT_EQ(tokenizer == nullptr, status != PVLLM_STATUS_OK);
  pvllm_error_free(error);
  pvllm_tokenizer_free(tokenizer);
  return status;
}

class CapiTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = pvllm::testing::make_temp_dir("capi_tokenizer"); }
  std::string dir_;
};

TEST_F(CapiTokenizerTest, EveryPathAnEngineTakesGivesTheEnginesIds) {
  const std::string hf = tiny_hf(dir_ + "/hf");
  fs::create_directories(dir_ + "/l2c");
  const std::string bin = pvllm::testing::write_tiny_llama2c_model(dir_ + "/l2c", {});
  const std::string packed = dir_ + "/tiny.pvllm";
  pvllm::testing::convert_model(hf, packed);
  const std::string text = "Once upon a time, a cat sat. <s> ünïcödé";
  for (const std::string& path : {hf, bin, dir_ + "/l2c", packed}) {
    SCOPED_TRACE(path);
    const px::Tokenizer tokenizer = px::Tokenizer::open(path);
    const px::Engine engine = make_engine(path);
    for (const bool special : {true, false}) {
      const std::vector<int32_t> ids = tokenizer.encode(text, special);
      EXPECT_EQ(ids, engine.tokenize(text, special));
      EXPECT_EQ(tokenizer.decode(ids), engine.detokenize(ids));
    }
    const pvllm_tokenizer_info info = tokenizer.info();
    EXPECT_EQ(info.kind, std::string("sentencepiece"));
    EXPECT_EQ(info.bos_id, 1);
    EXPECT_EQ(info.eos_id, 2);
    EXPECT_EQ(info.bos_token, std::string("<s>"));
    EXPECT_EQ(info.eos_token, std::string("</s>"));
    EXPECT_EQ(info.adds_bos, 1);
    EXPECT_EQ(info.vocab_size, pvllm::testing::tiny_tokenizer_vocab_size());
    EXPECT_NE(std::string(info.source).find(path == packed ? ".pvllm" : "tokenizer.model"),
              std::string::npos)
        << info.source;
  }
}

TEST_F(CapiTokenizerTest, ChatTemplatesAloneRenderAndRefuseToTokenize) {
  const char* data = std::getenv("PVLLM_TEST_DATA");
  if (data == nullptr) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (run through ctest)";
  const std::string folder = (fs::path(data) / "chat_template_tiny").string();
  const px::Tokenizer tokenizer = px::Tokenizer::open(folder);
  EXPECT_EQ(tokenizer.info().has_chat_template, 1);
  EXPECT_EQ(tokenizer.info().vocab_size, 0);
  EXPECT_EQ(tokenizer.info().bos_token, std::string("<s>"));
  pvllm_chat_template_params params = px::defaults<pvllm_chat_template_params>();
  params.messages_json = R"([{"role": "user", "content": "Hi"}])";
  EXPECT_EQ(tokenizer.apply_chat_template(params), "<s>[USER] Hi\n[BOT]");
  try {
    tokenizer.encode("Hi");
    ADD_FAILURE() << "encoded without a tokenizer";
  } catch (const px::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_TOKENIZER_ERROR);
  }
}

TEST_F(CapiTokenizerTest, ATemplateGivenByTheCallerReplacesTheModels) {
  const std::string hf = tiny_hf(dir_ + "/hf");
  std::ofstream(hf + "/tokenizer_config.json") << R"({"bos_token": "<s>"})";
  const px::Tokenizer tokenizer = px::Tokenizer::open(hf);
  EXPECT_EQ(tokenizer.info().has_chat_template, 0);
  pvllm_chat_template_params params = px::defaults<pvllm_chat_template_params>();
  params.messages_json = R"([{"role": "user", "content": "Hi"}])";
  try {
    tokenizer.apply_chat_template(params);
    ADD_FAILURE() << "rendered a template the model does not have";
  } catch (const px::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_NOT_FOUND);
  }
  params.chat_template =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  params.template_name = "no-such-name";  // ignored with a template given
  EXPECT_EQ(tokenizer.apply_chat_template(params), "<s><user>Hi");
  EXPECT_EQ(make_engine(hf).apply_chat_template(params), "<s><user>Hi");
  // A caller built against the 0.8 header: the struct ends before
  // chat_template, which is then not read (the model has no template).
  pvllm_chat_template_params old = params;
  old.struct_size = static_cast<uint32_t>(offsetof(pvllm_chat_template_params, chat_template));
  try {
    tokenizer.apply_chat_template(old);
    ADD_FAILURE() << "read chat_template beyond the caller's struct";
  } catch (const px::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_NOT_FOUND) << e.what();
  }
  params.chat_template = "{% if %}";
  try {
    tokenizer.apply_chat_template(params);
    ADD_FAILURE() << "rendered a template that does not parse";
  } catch (const px::Error& e) {
    EXPECT_NE(e.status(), PVLLM_STATUS_NOT_FOUND) << e.what();  // the given one failed
  }
}

TEST_F(CapiTokenizerTest, PathsWithoutATokenizerAreStatusesNamingWhatWasLookedFor) {
  std::string message;
  EXPECT_EQ(open_status((dir_ + "/missing").c_str(), &message), PVLLM_STATUS_NOT_FOUND);
  fs::create_directories(dir_ + "/empty");
  EXPECT_EQ(open_status((dir_ + "/empty").c_str(), &message), PVLLM_STATUS_NOT_FOUND);
  EXPECT_NE(message.find("tokenizer.model"), std::string::npos) << message;
  std::ofstream(dir_ + "/empty/notes.txt") << "x";
  EXPECT_EQ(open_status((dir_ + "/empty/notes.txt").c_str(), &message), PVLLM_STATUS_UNSUPPORTED);
  EXPECT_EQ(open_status(nullptr, &message), PVLLM_STATUS_INVALID_ARGUMENT);
  // A checkpoint whose tokenizer is not beside it.
  fs::create_directories(dir_ + "/alone");
  const std::string bin = pvllm::testing::write_tiny_llama2c_model(dir_ + "/alone", {});
  fs::remove(dir_ + "/alone/tokenizer.model");
  EXPECT_EQ(open_status(bin.c_str(), &message), PVLLM_STATUS_NOT_FOUND);
  EXPECT_NE(message.find("no tokenizer beside it"), std::string::npos) << message;

  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_tokenizer_open("x", nullptr, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  pvllm_error_free(error);
  const px::Tokenizer tokenizer = px::Tokenizer::open(pvllm::testing::tiny_tokenizer_path());
  pvllm_tokenizer_info info;
  pvllm_tokenizer_info_init(&info, sizeof info);
  info.struct_size = 3;
  EXPECT_EQ(pvllm_tokenizer_get_info(tokenizer.get(), &info, nullptr),
            PVLLM_STATUS_INVALID_ARGUMENT);
  pvllm_tokenizer_info_init(&info, sizeof info);
  EXPECT_EQ(pvllm_tokenizer_get_info(nullptr, &info, nullptr), PVLLM_STATUS_INVALID_ARGUMENT);
  size_t n = 7;
  EXPECT_EQ(pvllm_tokenizer_encode(nullptr, "x", 1, nullptr, 0, &n, nullptr),
            PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(n, 0u);
  pvllm_tokenizer_free(nullptr);
}

// Llama 3.1's tokenizer adds <|begin_of_text|> and its chat template writes
// it too: the rendered prompt submitted with add_special_tokens = 0 starts
// with one BOS; with the default (1) it would hold two.
class CapiOneBosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* refs = std::getenv("PVLLM_REFERENCE_TOKENIZERS");
    if (refs == nullptr || *refs == '\0') {
      GTEST_SKIP() << "needs PVLLM_REFERENCE_TOKENIZERS (bash scripts/reference/install.sh)";
    }
    const fs::path package = fs::path(refs) / "tokenizer-llama3_1" / "models";
    if (!fs::exists(package / "tokenizer.json")) {
      GTEST_SKIP() << package << " has no tokenizer.json";
    }
    pvllm::testing::TinyModelSpec spec;
    spec.vocab_size = 128256;  // Llama 3's embedding rows
    spec.hidden_size = 32;
    model_dir_ =
        pvllm::testing::write_tiny_hf_model(pvllm::testing::make_temp_dir("capi_one_bos"), spec);
    fs::remove(fs::path(model_dir_) / "tokenizer.model");
    fs::copy_file(package / "tokenizer.json", fs::path(model_dir_) / "tokenizer.json");
    fs::copy_file(package / "tokenizer_config.json",
                  fs::path(model_dir_) / "tokenizer_config.json");
  }

  // The prompt ids the engine computed: the first from the count, the rest
  // from the prompt logprobs (entry i is prompt token i + 1).
  static std::vector<int32_t> submitted_tail(px::Engine& engine, const std::string& prompt,
                                             bool add_special, int64_t* num_prompt_tokens) {
    pvllm_sampling_params sampling = px::defaults<pvllm_sampling_params>();
    sampling.max_tokens = 1;
    sampling.temperature = 0.0f;
    sampling.prompt_logprobs = 0;
    pvllm_request request = px::defaults<pvllm_request>();
    request.prompt_text = prompt.c_str();
    request.add_special_tokens = add_special ? 1 : 0;
    request.sampling = &sampling;
    const uint64_t id = engine.submit(request);
    std::vector<int32_t> tail;
    for (bool finished = false; !finished;) {
      engine.step();
      for (const pvllm_output& out : engine.poll()) {
        if (out.request_id != id) continue;
        for (size_t i = 0; i < out.num_prompt_logprobs; ++i) {
          tail.push_back(out.prompt_logprobs[i].token_id);
        }
        if (out.request_finished) {
          *num_prompt_tokens = out.num_prompt_tokens;
          finished = true;
        }
      }
    }
    return tail;
  }

  std::string model_dir_;
};

TEST_F(CapiOneBosTest, AChatPromptSubmittedWithoutSpecialTokensHoldsOneBos) {
  px::Engine engine = make_engine(model_dir_);
  const px::Tokenizer tokenizer = px::Tokenizer::open(model_dir_);
  const pvllm_tokenizer_info info = tokenizer.info();
  ASSERT_EQ(info.adds_bos, 1);
  const int32_t bos = info.bos_id;
  const std::string prompt =
      engine.apply_chat_template(R"([{"role": "user", "content": "Hello there"}])");
  ASSERT_EQ(prompt.rfind(info.bos_token, 0), 0u) << prompt;  // the template writes BOS

  const std::vector<int32_t> ids = tokenizer.encode(prompt, /*add_special_tokens=*/false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), bos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bos), 1);

  int64_t num_prompt_tokens = 0;
  const std::vector<int32_t> tail = submitted_tail(engine, prompt, false, &num_prompt_tokens);
  EXPECT_EQ(num_prompt_tokens, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(tail, std::vector<int32_t>(ids.begin() + 1, ids.end()));
  EXPECT_EQ(std::count(tail.begin(), tail.end(), bos), 0);

  // The default adds the tokenizer's BOS in front of the template's.
  const std::vector<int32_t> doubled = submitted_tail(engine, prompt, true, &num_prompt_tokens);
  EXPECT_EQ(num_prompt_tokens, static_cast<int64_t>(ids.size()) + 1);
  ASSERT_FALSE(doubled.empty());
  EXPECT_EQ(doubled.front(), bos);
}

// A caller built against the 0.8 header (a pvllm_request without
// add_special_tokens) keeps getting special tokens added.
TEST_F(CapiTokenizerTest, ARequestFromAnOlderHeaderAddsSpecialTokens) {
  const std::string hf = tiny_hf(dir_ + "/hf");
  px::Engine engine = make_engine(hf);
  pvllm_request request = px::defaults<pvllm_request>();
  EXPECT_EQ(request.add_special_tokens, 1);
  request.prompt_text = "Hello";
  request.add_special_tokens = 0;  // beyond the old struct: not read
  request.struct_size = static_cast<uint32_t>(offsetof(pvllm_request, add_special_tokens));
  pvllm_sampling_params sampling = px::defaults<pvllm_sampling_params>();
  sampling.max_tokens = 1;
  request.sampling = &sampling;
  const uint64_t id = engine.submit(request);
  int64_t num_prompt_tokens = -1;
  while (num_prompt_tokens < 0) {
    engine.step();
    for (const pvllm_output& out : engine.poll()) {
      if (out.request_id == id && out.request_finished) num_prompt_tokens = out.num_prompt_tokens;
    }
  }
  EXPECT_EQ(num_prompt_tokens, static_cast<int64_t>(engine.tokenize("Hello", true).size()));
}

}  // namespace
