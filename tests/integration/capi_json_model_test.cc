// A model folder that ships only tokenizer.json and tokenizer_config.json
// (Qwen3's, from the pinned reference packages) served end to end through
// libpvllm: text encodes and decodes as the reference tokenizer did
// (tests/data/tokenizer_goldens/qwen3.json), the chat template renders as
// the reference renderer did (tests/data/chat_goldens/qwen3.json), and the
// text streamed while generating from that prompt is exactly what
// pvllm_detokenize makes of the generated ids.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pvllm/pvllm.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/tiny_model.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return Json::parse(buf.str());
}

class CapiJsonModelTest : public ::testing::Test {
 protected:
  // One folder for the suite: a tiny Qwen3 with Qwen3's vocabulary size.
  static void SetUpTestSuite() {
    const char* refs = std::getenv("PVLLM_REFERENCE_TOKENIZERS");
    const char* data = std::getenv("PVLLM_TEST_DATA");
    if (refs == nullptr || data == nullptr) return;
    const fs::path package = fs::path(refs) / "tokenizer-qwen3" / "models";
    if (!fs::exists(package / "tokenizer.json")) return;
    pvllm::testing::TinyModelSpec spec = pvllm::testing::tiny_arch_spec("qwen3");
    spec.vocab_size = 151936;  // Qwen3's embedding rows (more than the tokenizer's ids)
    model_dir_ = new std::string(pvllm::testing::make_temp_dir("capi_json_model"));
    pvllm::testing::write_tiny_hf_model(*model_dir_, spec);
    fs::remove(fs::path(*model_dir_) / "tokenizer.model");
    fs::copy_file(package / "tokenizer.json", fs::path(*model_dir_) / "tokenizer.json");
    fs::copy_file(package / "tokenizer_config.json",
                  fs::path(*model_dir_) / "tokenizer_config.json");
    data_ = new fs::path(data);
  }
  static void TearDownTestSuite() {
    if (model_dir_ != nullptr) fs::remove_all(*model_dir_);
    delete model_dir_;
    delete data_;
    model_dir_ = nullptr;
    data_ = nullptr;
  }
  void SetUp() override {
    if (model_dir_ == nullptr) {
      GTEST_SKIP() << "needs PVLLM_REFERENCE_TOKENIZERS (bash scripts/reference/install.sh) "
                      "with tokenizer-qwen3, and PVLLM_TEST_DATA (run through ctest)";
    }
  }
  static pvllm::cxx::Engine make_engine() {
    pvllm_engine_params params = pvllm::cxx::defaults<pvllm_engine_params>();
    params.model_path = model_dir_->c_str();
    params.device = "cpu";
    params.num_threads = 2;
    params.max_model_len = 256;
    return pvllm::cxx::Engine(params);
  }
  static std::string* model_dir_;
  static fs::path* data_;
};

std::string* CapiJsonModelTest::model_dir_ = nullptr;
fs::path* CapiJsonModelTest::data_ = nullptr;

TEST_F(CapiJsonModelTest, TokenizesAndDecodesAsTheReference) {
  pvllm::cxx::Engine engine = make_engine();
  const Json golden = read_json(*data_ / "tokenizer_goldens" / "qwen3.json");
  ASSERT_GE(golden["cases"].size(), 20u);
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"].get<std::string>();
    SCOPED_TRACE(text);
    EXPECT_EQ(engine.tokenize(text, true), c["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(engine.tokenize(text, false), c["ids_no_special"].get<std::vector<int32_t>>());
    EXPECT_EQ(engine.detokenize(c["ids"].get<std::vector<int32_t>>()),
              c["decoded"].get<std::string>());
  }
}

TEST_F(CapiJsonModelTest, TextThatIsNotUtf8IsRefusedByTokenize) {
  pvllm::cxx::Engine engine = make_engine();
  try {
    engine.tokenize("ok\xC3", false);
    ADD_FAILURE() << "tokenize took invalid UTF-8";
  } catch (const pvllm::cxx::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_INVALID_ARGUMENT) << e.what();
  }
}

TEST_F(CapiJsonModelTest, ChatPromptRendersAsTheReferenceAndStreamsWhatDecodes) {
  pvllm::cxx::Engine engine = make_engine();
  const Json golden = read_json(*data_ / "chat_goldens" / "qwen3.json");
  const Json* chosen = nullptr;
  for (const auto& c : golden["cases"]) {
    if (c["add_generation_prompt"] == true && c["extra"].empty()) {
      chosen = &c;
      break;
    }
  }
  ASSERT_NE(chosen, nullptr) << "no plain generation-prompt case in the golden";
  pvllm_chat_template_params params = pvllm::cxx::defaults<pvllm_chat_template_params>();
  const std::string messages = (*chosen)["messages"].dump();
  params.messages_json = messages.c_str();
  const std::string prompt = engine.apply_chat_template(params);
  ASSERT_EQ(prompt, (*chosen)["expected"].get<std::string>());

  // The template's special tokens are single ids, not their spelling.
  const std::vector<int32_t> ids = engine.tokenize(prompt, false);
  const std::vector<int32_t> im_start = engine.tokenize("<|im_start|>", false);
  ASSERT_EQ(im_start.size(), 1u);
  EXPECT_EQ(ids.front(), im_start.front());

  // Random weights over 151k ids: seeded sampling reaches byte-level pieces
  // of multi-byte characters, which the stream must hold back until whole.
  pvllm_sampling_params sampling = pvllm::cxx::defaults<pvllm_sampling_params>();
  sampling.temperature = 1.0f;
  sampling.has_seed = 1;
  sampling.seed = 7;
  sampling.max_tokens = 96;
  sampling.ignore_eos = 1;
  pvllm_request request = pvllm::cxx::defaults<pvllm_request>();
  request.prompt_token_ids = ids.data();
  request.num_prompt_token_ids = ids.size();
  request.sampling = &sampling;
  const uint64_t id = engine.submit(request);
  std::vector<int32_t> generated;
  std::string streamed;
  bool finished = false;
  for (int guard = 0; guard < 1000 && !finished; ++guard) {
    engine.step();
    for (const pvllm_output& out : engine.poll()) {
      ASSERT_EQ(out.request_id, id);
      generated.insert(generated.end(), out.token_ids, out.token_ids + out.num_token_ids);
      streamed.append(out.text, out.text_len);
      finished = finished || out.request_finished != 0;
    }
  }
  ASSERT_TRUE(finished);
  ASSERT_EQ(generated.size(), 96u);
  EXPECT_EQ(streamed, engine.detokenize(generated));
}

}  // namespace
