// The tokenizer of a GGUF file's metadata (core/tokenizer/gguf_tokenizer.h)
// against llama.cpp's own tokenizer, never against ids written here:
//   - stories260K-F32.gguf (a "llama" vocabulary) with llama-tokenize's ids
//     for 14 prompts in three flag variants (tests/data/gguf/ref/tokenize.json);
//   - llama.cpp's vocabulary test files, ggml-vocab-llama-spm.gguf and
//     ggml-vocab-gpt-2.gguf with their .inp/.out pairs (tests/data/gguf/vocab);
//   - Llama 3 ("llama-bpe") and Qwen3 ("qwen2") vocabularies made from the
//     npm reference tokenizers by tests/util/gguf_vocab_writer, with
//     llama-tokenize's ids (tests/data/gguf/ref/vocab_*.tokenize.json, from
//     scripts/reference/make_gguf_vocab_refs.sh), and the same ids from
//     JsonTokenizer on the same tokenizer.json;
// and malformed metadata, written with tests/util/gguf_writer.
#include "core/tokenizer/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"
#include "core/tokenizer/json_tokenizer.h"
#include "tests/util/gguf_vocab_writer.h"
#include "tests/util/gguf_writer.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::GgufWriter;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string data_dir() { return env("PVLLM_TEST_DATA"); }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json read_json(const std::string& path) { return json::parse(read_text(path)); }

std::unique_ptr<GgufTokenizer> load_gguf(const std::string& path) {
  std::unique_ptr<Tokenizer> tokenizer;
  const Status st = Tokenizer::load_file(path, &tokenizer);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return nullptr;
  EXPECT_STREQ(tokenizer->kind(), "gguf");
  return std::unique_ptr<GgufTokenizer>(static_cast<GgufTokenizer*>(tokenizer.release()));
}

std::vector<int32_t> tokenize(const GgufTokenizer& tokenizer, const std::string& text,
                              bool add_special, bool parse_special) {
  std::vector<int32_t> ids;
  const Status st = tokenizer.tokenize(text, add_special, parse_special, &ids);
  EXPECT_TRUE(st.ok()) << st.message();
  return ids;
}

// The cases of a ref/*.tokenize.json file, each prompt with its three
// variants, checked against `tokenizer`; the number of mismatches.
int check_llama_tokenize_cases(const GgufTokenizer& tokenizer, const json& ref) {
  int mismatches = 0;
  for (const json& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    const std::vector<int32_t> got_default = tokenize(tokenizer, prompt, true, true);
    const std::vector<int32_t> got_no_bos = tokenize(tokenizer, prompt, false, true);
    const std::vector<int32_t> got_no_special = tokenize(tokenizer, prompt, true, false);
    EXPECT_EQ(got_default, c["default"].get<std::vector<int32_t>>()) << json(prompt).dump();
    EXPECT_EQ(got_no_bos, c["no_bos"].get<std::vector<int32_t>>()) << json(prompt).dump();
    EXPECT_EQ(got_no_special, c["no_parse_special"].get<std::vector<int32_t>>())
        << json(prompt).dump();
    mismatches += (got_default != c["default"].get<std::vector<int32_t>>()) +
                  (got_no_bos != c["no_bos"].get<std::vector<int32_t>>()) +
                  (got_no_special != c["no_parse_special"].get<std::vector<int32_t>>());
  }
  return mismatches;
}

// ---- stories260K: llama-tokenize's ids -------------------------------------

class Stories260KTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
    path_ = data_dir() + "/gguf/stories260K-F32.gguf";
    tokenizer_ = load_gguf(path_);
    ASSERT_NE(tokenizer_, nullptr);
    ref_ = read_json(data_dir() + "/gguf/ref/tokenize.json");
  }
  std::string path_;
  std::unique_ptr<GgufTokenizer> tokenizer_;
  json ref_;
};

TEST_F(Stories260KTest, IdsEqualLlamaTokenizeInEveryVariant) {
  ASSERT_EQ(ref_["cases"].size(), 14u);
  EXPECT_EQ(check_llama_tokenize_cases(*tokenizer_, ref_), 0);
}

TEST_F(Stories260KTest, SpecialTokensAreTheConvertersOnes) {
  EXPECT_EQ(tokenizer_->vocab_size(), 512);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_EQ(tokenizer_->eot_id(), -1);
  EXPECT_TRUE(tokenizer_->adds_bos());
  EXPECT_FALSE(tokenizer_->adds_eos());
  EXPECT_EQ(tokenizer_->token_to_id("<unk>"), 0);
  EXPECT_EQ(tokenizer_->id_to_token(1), "<s>");
  EXPECT_EQ(tokenizer_->token_to_id("no such token"), -1);
  EXPECT_EQ(tokenizer_->num_leading_spaces_stripped(), 1);
}

TEST_F(Stories260KTest, EncodeParsesSpecialTokensAndAddsBos) {
  for (const json& c : ref_["cases"]) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tokenizer_->encode(c["prompt"].get<std::string>(), true, &ids).ok());
    EXPECT_EQ(ids, c["default"].get<std::vector<int32_t>>());
  }
}

TEST_F(Stories260KTest, DecodeGivesTheTextBackWithoutControlTokens) {
  for (const char* text : {"Once upon a time", "  two  spaces  ", "line one\nline two\n\nline four",
                           "café naïve — 日本語 🙂", "\ttab, then a trailing space "}) {
    std::string decoded;
    ASSERT_TRUE(tokenizer_->decode(tokenize(*tokenizer_, text, true, true), &decoded).ok());
    EXPECT_EQ(decoded, text);
  }
  std::string decoded;
  ASSERT_TRUE(tokenizer_->decode({1, 403, 407, 2}, &decoded).ok());
  EXPECT_EQ(decoded, "Once upon");
  EXPECT_EQ(tokenizer_->decode({512}, &decoded).code(), StatusCode::kInvalidArgument);
}

TEST_F(Stories260KTest, IncrementalDetokenizerMatchesDecode) {
  const std::string text = "Lily's cat said: \"Hi!\" 日本語 🙂";
  const std::vector<int32_t> ids = tokenize(*tokenizer_, text, true, true);
  IncrementalDetokenizer detok(tokenizer_.get(), ids[0]);
  std::string streamed;
  for (size_t i = 1; i < ids.size(); ++i) streamed += detok.push(ids[i]);
  streamed += detok.flush();
  EXPECT_EQ(streamed, text);
}

TEST_F(Stories260KTest, InvalidUtf8IsInvalidArgument) {
  std::vector<int32_t> ids;
  EXPECT_EQ(tokenizer_->encode("ab\xFF", true, &ids).code(), StatusCode::kInvalidArgument);
}

TEST_F(Stories260KTest, EverySplitPartLoadsTheSameTokenizer) {
  for (int part = 1; part <= 3; ++part) {
    const std::string path = data_dir() + "/gguf/stories260K-Q4_K_M-split-0000" +
                             std::to_string(part) + "-of-00003.gguf";
    const auto split = load_gguf(path);
    ASSERT_NE(split, nullptr) << path;
    EXPECT_EQ(tokenize(*split, "Once upon a time", true, true),
              tokenize(*tokenizer_, "Once upon a time", true, true));
  }
}

TEST_F(Stories260KTest, ModelPathLoadsTheTokenizerFromTheFile) {
  std::unique_ptr<Tokenizer> tokenizer;
  const Status st = Tokenizer::load(path_, &tokenizer);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_STREQ(tokenizer->kind(), "gguf");
  std::vector<int32_t> ids;
  ASSERT_TRUE(tokenizer->encode("Once upon a time", true, &ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
}

TEST_F(Stories260KTest, ChatTemplatesReadTheSpecialTokensFromTheFile) {
  chat::ChatTemplates templates;
  const Status st = chat::ChatTemplates::load(path_, &templates);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(templates.empty());  // the converter writes none
  EXPECT_EQ(templates.bos_token(), "<s>");
  EXPECT_EQ(templates.eos_token(), "</s>");
}

// ---- the tiny Qwen files: the prompts' ids in their logits references ----

// gguf_logits_dump tokenizes each prompt as llama.cpp does by default (special
// tokens added, not parsed) and keeps at most 64 ids; pvllm's ids for the
// same text must begin with those. These vocabularies are small byte-level
// BPE ones ("qwen2" pre-tokenizer) with unused [PAD] tokens at the end.
TEST(TinyQwenVocabTest, PromptIdsEqualLlamaCpps) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  for (const char* stem : {"tiny-qwen2-F32", "tiny-qwen3-F32"}) {
    SCOPED_TRACE(stem);
    const auto tokenizer = load_gguf(data_dir() + "/gguf/" + stem + ".gguf");
    ASSERT_NE(tokenizer, nullptr);
    EXPECT_EQ(tokenizer->vocab_size(), 400);
    EXPECT_FALSE(tokenizer->adds_bos());
    const json ref = read_json(data_dir() + "/gguf/ref/" + stem + ".logits.json");
    ASSERT_EQ(ref["prompts"].size(), 4u);
    for (const json& p : ref["prompts"]) {
      const auto want = p["tokens"].get<std::vector<int32_t>>();
      std::vector<int32_t> got = tokenize(*tokenizer, p["prompt"].get<std::string>(), true, false);
      ASSERT_GE(got.size(), want.size()) << p["prompt"];
      got.resize(want.size());
      EXPECT_EQ(got, want) << p["prompt"];
    }
  }
}

// ---- llama.cpp's vocabulary tests --------------------------------------------

// tests/test-tokenizer-0.cpp's format: inputs separated by a marker line,
// one line of ids per input.
std::vector<std::pair<std::string, std::vector<int32_t>>> read_vocab_tests(
    const std::string& base) {
  const std::string inputs = read_text(base + ".inp");
  std::vector<std::string> texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inputs.size();) {
    const size_t next = inputs.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inputs.substr(pos));
      break;
    }
    texts.push_back(inputs.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::pair<std::string, std::vector<int32_t>>> tests;
  std::istringstream outputs(read_text(base + ".out"));
  std::string line;
  for (size_t i = 0; std::getline(outputs, line); ++i) {
    std::vector<int32_t> ids;
    std::istringstream numbers(line);
    for (int32_t id; numbers >> id;) ids.push_back(id);
    tests.emplace_back(i < texts.size() ? texts[i] : std::string(), std::move(ids));
  }
  EXPECT_EQ(tests.size(), texts.size()) << base;
  return tests;
}

class LlamaCppVocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppVocabTest, IdsEqualLlamaCppsExpectedOnes) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  const std::string base = data_dir() + "/gguf/vocab/" + GetParam();
  const auto tokenizer = load_gguf(base);
  ASSERT_NE(tokenizer, nullptr);
  const auto tests = read_vocab_tests(base);
  ASSERT_GE(tests.size(), 30u);
  for (const auto& [text, expected] : tests) {
    // test-tokenizer-0: add_special false, parse_special false.
    EXPECT_EQ(tokenize(*tokenizer, text, false, false), expected) << json(text).dump();
  }
}

TEST_P(LlamaCppVocabTest, DecodeGivesEveryInputBack) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  const std::string base = data_dir() + "/gguf/vocab/" + GetParam();
  const auto tokenizer = load_gguf(base);
  ASSERT_NE(tokenizer, nullptr);
  for (const auto& [text, expected] : read_vocab_tests(base)) {
    std::string decoded;
    ASSERT_TRUE(tokenizer->decode(expected, &decoded).ok());
    // sentencepiece's prefix space goes; a text that began with spaces
    // keeps them (the first one belongs to the prefix).
    EXPECT_EQ(decoded, text) << json(text).dump();
  }
}

// The tokenizer a .pvllm file carries for a GGUF source: the tokenizer.*
// keys written to metadata bytes (gguf_writer.h) and read back give the
// same ids as the file, on every one of llama.cpp's inputs.
TEST_P(LlamaCppVocabTest, TokenizerMetadataCopyGivesTheSameIds) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  const std::string base = data_dir() + "/gguf/vocab/" + GetParam();
  const auto from_file = load_gguf(base);
  ASSERT_NE(from_file, nullptr);
  gguf::File file;
  ASSERT_TRUE(gguf::open(base, &file).ok());
  const std::string bytes = gguf::write_metadata(file.metadata(), gguf::is_tokenizer_key);
  EXPECT_LT(bytes.size(), fs::file_size(base));
  gguf::Metadata copy;
  const Status parsed = gguf::parse_metadata(bytes, "copy", &copy);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  size_t kept = 0;
  for (const gguf::KeyValue& kv : file.metadata().entries()) {
    if (!gguf::is_tokenizer_key(kv.key)) {
      EXPECT_EQ(copy.find(kv.key), nullptr) << kv.key;
      continue;
    }
    ++kept;
    ASSERT_NE(copy.find(kv.key), nullptr) << kv.key;
    EXPECT_EQ(copy.find(kv.key)->type, kv.value.type) << kv.key;
  }
  EXPECT_EQ(copy.entries().size(), kept);
  EmbeddedTokenizer embedded;
  embedded.kind = EmbeddedTokenizer::Kind::kGguf;
  embedded.data = bytes;
  std::unique_ptr<Tokenizer> loaded;
  const Status st = Tokenizer::load_embedded(embedded, &loaded);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_STREQ(loaded->kind(), "gguf");
  const auto& from_copy = static_cast<const GgufTokenizer&>(*loaded);
  EXPECT_EQ(from_copy.vocab_size(), from_file->vocab_size());
  for (const auto& [text, expected] : read_vocab_tests(base)) {
    EXPECT_EQ(tokenize(from_copy, text, false, false), expected) << json(text).dump();
    EXPECT_EQ(tokenize(from_copy, text, true, true), tokenize(*from_file, text, true, true))
        << json(text).dump();
  }
  // Damaged copies are statuses: cut short, or with a tensor count.
  embedded.data = std::string_view(bytes).substr(0, bytes.size() / 2);
  EXPECT_EQ(Tokenizer::load_embedded(embedded, &loaded).code(), StatusCode::kCorruptModel);
  std::string with_tensor = bytes;
  with_tensor[8] = 1;
  EXPECT_FALSE(gguf::parse_metadata(with_tensor, "copy", &copy).ok());
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, LlamaCppVocabTest,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"));

// ---- Llama 3 and Qwen3 vocabularies made from the npm reference tokenizers --

struct ReferenceVocab {
  const char* package;  // under $PVLLM_REFERENCE_TOKENIZERS
  const char* pre;
  const char* ref;  // under tests/data/gguf/ref
  // tokenizer.json composes the text to NFC first (Qwen); a GGUF file has
  // no key for it and llama.cpp does not.
  bool nfc_normalizer;
};

void PrintTo(const ReferenceVocab& v, std::ostream* os) { *os << v.package; }

class ReferenceVocabTest : public ::testing::TestWithParam<ReferenceVocab> {
 protected:
  void SetUp() override {
    if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
    const std::string packages = env("PVLLM_REFERENCE_TOKENIZERS");
    if (packages.empty()) {
      GTEST_SKIP() << "PVLLM_REFERENCE_TOKENIZERS is not set (bash scripts/reference/install.sh)";
    }
    folder_ = packages + "/" + GetParam().package + "/models";
    GgufWriter writer;
    const Status made = testing::make_hf_vocab_gguf(folder_, GetParam().pre, &writer);
    ASSERT_TRUE(made.ok()) << made.message();
    const std::string dir = testing::make_temp_dir("pvllm_gguf_vocab_");
    path_ = writer.write(dir + "/vocab.gguf");
    tokenizer_ = load_gguf(path_);
    ASSERT_NE(tokenizer_, nullptr);
    const std::string ref = data_dir() + "/gguf/ref/" + GetParam().ref;
    ASSERT_TRUE(fs::exists(ref)) << ref
                                 << " is missing (scripts/reference/make_gguf_vocab_refs.sh)";
    ref_ = read_json(ref);
  }
  void TearDown() override {
    if (!path_.empty()) fs::remove_all(fs::path(path_).parent_path());
  }
  std::string folder_, path_;
  std::unique_ptr<GgufTokenizer> tokenizer_;
  json ref_;
};

TEST_P(ReferenceVocabTest, TheWrittenFileIsTheOneTheReferenceWasMadeFrom) {
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(path_)), ref_["gguf_bytes"].get<int64_t>());
}

TEST_P(ReferenceVocabTest, IdsEqualLlamaTokenizeInEveryVariant) {
  ASSERT_GE(ref_["cases"].size(), 20u);
  EXPECT_EQ(check_llama_tokenize_cases(*tokenizer_, ref_), 0);
}

// The same ids as JsonTokenizer on the tokenizer.json the file was written
// from (special tokens parsed, none added: Llama 3's tokenizer.json adds no
// BOS, llama.cpp's "llama-bpe" does).
TEST_P(ReferenceVocabTest, IdsEqualTheTokenizerJsonOnes) {
  std::unique_ptr<Tokenizer> json_tokenizer;
  const Status st = JsonTokenizer::load_file(folder_ + "/tokenizer.json", &json_tokenizer);
  ASSERT_TRUE(st.ok()) << st.message();
  for (const json& c : ref_["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    std::vector<int32_t> expected;
    ASSERT_TRUE(json_tokenizer->encode(prompt, /*add_special=*/false, &expected).ok());
    // The one prompt written decomposed ("A" + U+0301): NFC makes it "Á".
    const bool decomposed = prompt.find("A\xCC\x81") != std::string::npos;
    if (GetParam().nfc_normalizer && decomposed) {
      EXPECT_NE(tokenize(*tokenizer_, prompt, false, true), expected) << json(prompt).dump();
    } else {
      EXPECT_EQ(tokenize(*tokenizer_, prompt, false, true), expected) << json(prompt).dump();
    }
  }
}

// The chat templates travel in the same metadata copy and render the same.
TEST_P(ReferenceVocabTest, ChatTemplatesTravelInTheMetadataCopy) {
  chat::ChatTemplates from_file, from_copy;
  ASSERT_TRUE(chat::ChatTemplates::load(path_, &from_file).ok());
  gguf::File file;
  ASSERT_TRUE(gguf::open(path_, &file).ok());
  const std::string bytes = gguf::write_metadata(file.metadata(), gguf::is_tokenizer_key);
  gguf::Metadata copy;
  ASSERT_TRUE(gguf::parse_metadata(bytes, "copy", &copy).ok());
  const Status st = chat::ChatTemplates::from_gguf_metadata(copy, "copy", &from_copy);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(from_copy.names(), from_file.names());
  chat::ChatRequest request;
  request.messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  std::string a, b;
  ASSERT_TRUE(from_file.apply(request, &a).ok());
  ASSERT_TRUE(from_copy.apply(request, &b).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(from_copy.bos_token(), from_file.bos_token());
}

TEST_P(ReferenceVocabTest, ChatTemplateComesFromTheFile) {
  chat::ChatTemplates templates;
  const Status st = chat::ChatTemplates::load(path_, &templates);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(templates.names(), std::vector<std::string>{"default"});
  chat::ChatRequest request;
  request.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
  std::string prompt;
  ASSERT_TRUE(templates.apply(request, &prompt).ok());
  EXPECT_NE(prompt.find("Hi"), std::string::npos) << prompt;
  const std::vector<int32_t> ids = tokenize(*tokenizer_, prompt, false, true);
  EXPECT_NE(std::find(ids.begin(), ids.end(), tokenizer_->eot_id()), ids.end()) << prompt;
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, ReferenceVocabTest,
                         ::testing::Values(ReferenceVocab{"tokenizer-llama3", "llama-bpe",
                                                          "vocab_llama3.tokenize.json", false},
                                           ReferenceVocab{"tokenizer-qwen3", "qwen2",
                                                          "vocab_qwen3.tokenize.json", true}),
                         [](const ::testing::TestParamInfo<ReferenceVocab>& info) {
                           return std::string(info.param.pre == std::string("qwen2") ? "Qwen3"
                                                                                     : "Llama3");
                         });

}  // namespace
}  // namespace pvllm
