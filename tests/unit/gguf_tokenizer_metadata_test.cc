// GgufTokenizer on small vocabularies written here with
// tests/util/gguf_writer: what llama.cpp's rules give on them (special and
// user-defined tokens, add_bos / add_eos and their defaults), and every
// kind of malformed metadata refused with the status and key it names.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/tokenizer/gguf_tokenizer.h"
#include "tests/util/gguf_writer.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using testing::GgufWriter;

// A byte-level BPE vocabulary: the letters a-d and the space (Ġ), two
// merges, a control token, a user-defined one and an end-of-turn one.
struct Bpe {
  std::vector<std::string> tokens = {"a",
                                     "b",
                                     "c",
                                     "d",
                                     "\xC4\xA0",
                                     "ab",
                                     "abc",
                                     "\xC4\xA0"
                                     "a",
                                     "<|ctrl|>",
                                     "<user>",
                                     "<|im_end|>"};
  std::vector<int32_t> types = {1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 1};
  std::vector<std::string> merges = {"a b", "ab c", "\xC4\xA0 a"};
};

// A sentencepiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens
// (ids 3 to 258), then ▁ (259), a, b, ▁a, ab (263).
struct Spm {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  Spm() {
    tokens = {"<unk>", "<s>", "</s>"};
    types = {2, 3, 3};
    for (int byte = 0; byte < 256; ++byte) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", byte);
      tokens.push_back(name);
      types.push_back(6);
    }
    for (const char* piece : {"\xE2\x96\x81", "a", "b",
                              "\xE2\x96\x81"
                              "a",
                              "ab"}) {
      tokens.push_back(piece);
      types.push_back(1);
    }
    scores.assign(tokens.size(), 0.0f);
    for (int i = 0; i < 5; ++i) scores[259 + i] = -1.0f - static_cast<float>(i);
  }
};

GgufWriter bpe_writer(const Bpe& v = Bpe(), const std::string& pre = "gpt-2") {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_array("tokenizer.ggml.token_type", gguf::ValueType::kI32, v.types);
  w.add_string_array("tokenizer.ggml.merges", v.merges);
  return w;
}
GgufWriter spm_writer(const Spm& v = Spm()) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_array("tokenizer.ggml.scores", gguf::ValueType::kF32, v.scores);
  w.add_array("tokenizer.ggml.token_type", gguf::ValueType::kI32, v.types);
  return w;
}

class GgufTokenizerMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("pvllm_gguf_tok_"); }
  void TearDown() override { fs::remove_all(dir_); }

  Status load(const GgufWriter& w, std::unique_ptr<Tokenizer>* out) {
    return Tokenizer::load_file(w.write(dir_ + "/vocab.gguf"), out);
  }
  const GgufTokenizer& loaded(const GgufWriter& w) {
    const Status st = load(w, &tokenizer_);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!tokenizer_) throw std::runtime_error("no tokenizer");
    return static_cast<const GgufTokenizer&>(*tokenizer_);
  }
  // Loading `w` fails with `code`, naming `what`.
  void expect_refused(const GgufWriter& w, StatusCode code, const std::string& what) {
    std::unique_ptr<Tokenizer> tokenizer;
    const Status st = load(w, &tokenizer);
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  }
  static std::vector<int32_t> ids(const GgufTokenizer& t, const std::string& text, bool add_special,
                                  bool parse_special) {
    std::vector<int32_t> out;
    const Status st = t.tokenize(text, add_special, parse_special, &out);
    EXPECT_TRUE(st.ok()) << st.message();
    return out;
  }

  std::string dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(GgufTokenizerMetadataTest, BpeMergesByRankAndCutsSpecialTokensOut) {
  const GgufTokenizer& t = loaded(bpe_writer());
  EXPECT_EQ(ids(t, "abc a", false, true), (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(ids(t, "ab<|ctrl|>d", false, true), (std::vector<int32_t>{5, 8, 3}));
  // User-defined tokens are cut out with or without parse_special.
  EXPECT_EQ(ids(t, "a<user>b", false, false), (std::vector<int32_t>{0, 9, 1}));
  EXPECT_EQ(ids(t, "a<user>b", false, true), (std::vector<int32_t>{0, 9, 1}));
  // <|im_end|> is a control token whatever its stored type, and the end of turn.
  EXPECT_EQ(t.eot_id(), 10);
  EXPECT_EQ(ids(t, "a<|im_end|>", false, true), (std::vector<int32_t>{0, 10}));
  std::string text;
  ASSERT_TRUE(t.decode({6, 8, 9, 7, 10}, &text).ok());
  EXPECT_EQ(text, "abc<user> a");
}

TEST_F(GgufTokenizerMetadataTest, BpeDefaultsFollowThePreTokenizer) {
  // gpt-2: no BOS unless asked; BOS and EOS default to id 11 in llama.cpp,
  // which this vocabulary lacks.
  EXPECT_FALSE(loaded(bpe_writer()).adds_bos());
  EXPECT_EQ(loaded(bpe_writer()).bos_id(), -1);
  GgufWriter w = bpe_writer(Bpe(), "llama-bpe");  // Llama 3 adds BOS
  w.add_u32("tokenizer.ggml.bos_token_id", 8);
  EXPECT_TRUE(loaded(w).adds_bos());
  EXPECT_EQ(ids(loaded(w), "ab", true, true), (std::vector<int32_t>{8, 5}));
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_bool("tokenizer.ggml.add_eos_token", true);
  w.add_u32("tokenizer.ggml.eos_token_id", 10);
  EXPECT_EQ(ids(loaded(w), "ab", true, true), (std::vector<int32_t>{5, 10}));
  EXPECT_EQ(ids(loaded(w), "ab", false, true), (std::vector<int32_t>{5}));
}

TEST_F(GgufTokenizerMetadataTest, SpmUsesScoresBytesAndTheSpacePrefix) {
  const GgufTokenizer& t = loaded(spm_writer());
  // "▁a" (score -4) wins over "ab" (-5); A and the newline are byte tokens.
  EXPECT_EQ(ids(t, "ab", true, true), (std::vector<int32_t>{1, 262, 261}));
  EXPECT_EQ(ids(t, "A\n", false, true), (std::vector<int32_t>{259, 3 + 'A', 3 + '\n'}));
  EXPECT_EQ(ids(t, "<s>a", false, true), (std::vector<int32_t>{1, 262}));
  EXPECT_EQ(ids(t, "<s>a", false, false),
            (std::vector<int32_t>{259, 3 + '<', 3 + 's', 3 + '>', 260}));
  std::string text;
  ASSERT_TRUE(t.decode({1, 262, 261, 3 + 'A', 2}, &text).ok());
  EXPECT_EQ(text, "abA");
}

TEST_F(GgufTokenizerMetadataTest, SpmWithoutSpacePrefix) {
  GgufWriter w = spm_writer();
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  const GgufTokenizer& t = loaded(w);
  EXPECT_EQ(ids(t, "ab", false, true), (std::vector<int32_t>{263}));
  EXPECT_EQ(t.num_leading_spaces_stripped(), 0);
}

TEST_F(GgufTokenizerMetadataTest, MissingModelMeansNoTokenizer) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  expect_refused(w, StatusCode::kNotFound, "tokenizer.ggml.model");
  GgufWriter none;
  none.add_string("tokenizer.ggml.model", "none");
  expect_refused(none, StatusCode::kNotFound, "none");
}

TEST_F(GgufTokenizerMetadataTest, OtherModelsAndPreTokenizersAreUnsupported) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "bert");
  w.add_string_array("tokenizer.ggml.tokens", {"a"});
  expect_refused(w, StatusCode::kUnsupported, "\"bert\"");
  expect_refused(bpe_writer(Bpe(), "jina-v2-code"), StatusCode::kUnsupported, "jina-v2-code");
  expect_refused(bpe_writer(Bpe(), "made-up"), StatusCode::kUnsupported, "\"made-up\"");
  Spm partial_bytes;
  partial_bytes.types[100] = 1;
  expect_refused(spm_writer(partial_bytes), StatusCode::kUnsupported, "255 byte tokens");
  GgufWriter phi = spm_writer();
  phi.add_string("general.name", "Phi3");
  expect_refused(phi, StatusCode::kUnsupported, "phi3");
}

// One damaged key: `damage` edits the vocabulary's writer.
struct Damage {
  const char* name;
  std::function<GgufWriter()> make;
  const char* key;  // named in the message
};

TEST_F(GgufTokenizerMetadataTest, MalformedMetadataIsCorruptModelNamingTheKey) {
  const std::vector<Damage> damages = {
      {"tokens missing",
       [] {
         GgufWriter w;
         w.add_string("tokenizer.ggml.model", "llama");
         return w;
       },
       "tokenizer.ggml.tokens"},
      {"tokens empty",
       [] {
         GgufWriter w;
         w.add_string("tokenizer.ggml.model", "gpt2");
         w.add_string_array("tokenizer.ggml.tokens", {});
         return w;
       },
       "tokenizer.ggml.tokens"},
      {"tokens not strings",
       [] {
         GgufWriter w;
         w.add_string("tokenizer.ggml.model", "llama");
         w.add_u32("tokenizer.ggml.tokens", 3);
         return w;
       },
       "tokenizer.ggml.tokens"},
      {"token twice",
       [] {
         Spm v;
         v.tokens[261] = "a";
         return spm_writer(v);
       },
       "tokenizer.ggml.tokens"},
      {"scores short",
       [] {
         Spm v;
         v.scores.pop_back();
         return spm_writer(v);
       },
       "tokenizer.ggml.scores"},
      {"types long",
       [] {
         Bpe v;
         v.types.push_back(1);
         return bpe_writer(v);
       },
       "tokenizer.ggml.token_type"},
      {"type out of range",
       [] {
         Bpe v;
         v.types[2] = 9;
         return bpe_writer(v);
       },
       "tokenizer.ggml.token_type"},
      {"byte token not <0xAB>",
       [] {
         Spm v;
         v.types[260] = 6;
         return spm_writer(v);
       },
       "tokenizer.ggml.token_type[260]"},

      {"merges missing",
       [] {
         GgufWriter w = bpe_writer();
         w.kvs.pop_back();
         return w;
       },
       "tokenizer.ggml.merges"},
      {"merge of an unknown token",
       [] {
         Bpe v;
         v.merges.push_back("c d");  // "cd" is no token
         return bpe_writer(v);
       },
       "tokenizer.ggml.merges"},
      {"merge without a space",
       [] {
         Bpe v;
         v.merges[1] = "abc";
         return bpe_writer(v);
       },
       "tokenizer.ggml.merges[1]"},
      {"bos id out of range",
       [] {
         GgufWriter w = spm_writer();
         w.add_u32("tokenizer.ggml.bos_token_id", 264);
         return w;
       },
       "tokenizer.ggml.bos_token_id"},
      {"eos id negative",
       [] {
         GgufWriter w = spm_writer();
         w.add_i32("tokenizer.ggml.eos_token_id", -5);
         return w;
       },
       "tokenizer.ggml.eos_token_id"},
      {"eot id a string",
       [] {
         GgufWriter w = spm_writer();
         w.add_string("tokenizer.ggml.eot_token_id", "2");
         return w;
       },
       "tokenizer.ggml.eot_token_id"},
      {"add_bos without a BOS",
       [] {
         GgufWriter w = bpe_writer();
         w.add_bool("tokenizer.ggml.add_bos_token", true);
         return w;
       },
       "tokenizer.ggml.bos_token_id"},
      {"add_bos not a bool",
       [] {
         GgufWriter w = spm_writer();
         w.add_u32("tokenizer.ggml.add_bos_token", 1);
         return w;
       },
       "tokenizer.ggml.add_bos_token"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    expect_refused(d.make(), StatusCode::kCorruptModel, d.key);
  }
}

TEST_F(GgufTokenizerMetadataTest, NoneIdsLeaveTheDefaults) {
  GgufWriter w = spm_writer();
  w.add_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
  w.add_i32("tokenizer.ggml.eot_token_id", -1);
  const GgufTokenizer& t = loaded(w);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eot_id(), -1);
}

}  // namespace
}  // namespace pvllm
