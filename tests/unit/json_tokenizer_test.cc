// The tokenizer.json tokenizer on small files the tests write: BPE merge
// order, ignore_merges, added tokens, byte fallback, the Metaspace and
// byte-level styles, split behaviours, streaming, and the refusals:
// every field value that is not implemented is Unsupported, naming it.
#include "core/tokenizer/json_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/unit/json_tokenizer_files.h"

namespace pvllm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---- building tokenizer.json files -------------------------------------------

// A byte-level BPE tokenizer: the 256 byte characters at ids 0..255, then
// `extra` tokens (built by `merges`), then <bos> (special), <eos>
// (special) and <think> (not special) as added tokens.
json byte_level_file(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                     bool ignore_merges = false) {
  json vocab = json::object();
  // The byte-level alphabet, in byte order.
  int next_char = 256;
  for (int byte = 0; byte < 256; ++byte) {
    const bool self = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                      (byte >= 0xAE && byte <= 0xFF);
    const int cp = self ? byte : next_char++;
    std::string ch;
    if (cp < 0x80) {
      ch.push_back(static_cast<char>(cp));
    } else {
      ch.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      ch.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    vocab[ch] = byte;
  }
  int id = 256;
  for (const std::string& token : extra) vocab[token] = id++;
  json file = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", id}, {"content", "<bos>"}, {"special", true}, {"normalized", false}},
        {{"id", id + 1}, {"content", "<eos>"}, {"special", true}, {"normalized", false}},
        {{"id", id + 2}, {"content", "<think>"}, {"special", false}, {"normalized", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {id}}, {"tokens", {"<bos>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"byte_fallback", false},
        {"ignore_merges", ignore_merges},
        {"vocab", vocab},
        {"merges", merges}}}};
  return file;
}

// A sentencepiece-style BPE tokenizer: "▁" for spaces (Prepend + Replace
// normalizers, as Llama 2 and Mistral ship), byte fallback, <unk>.
json metaspace_file() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    vocab[name] = 3 + byte;
  }
  int id = 259;
  for (const char* token :
       {"▁", "h", "i", "t", "e", "r", "hi", "▁hi", "th", "the", "▁the", "er", "▁ther", "▁there"}) {
    vocab[token] = id++;
  }
  return {{"added_tokens",
           {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
            {{"id", 1}, {"content", "<s>"}, {"special", true}},
            {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
          {"normalizer", testing::dummy_prefix_normalizer()},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder", testing::dummy_prefix_decoder()},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", vocab},
            {"merges", {"h i", "▁ hi", "t h", "th e", "▁ the", "e r", "▁the r", "▁ther e"}}}}};
}

std::unique_ptr<Tokenizer> load_json(const json& file, const std::string& config = "") {
  std::unique_ptr<Tokenizer> tokenizer;
  const Status status = JsonTokenizer::load_from_text(file.dump(), config, &tokenizer);
  EXPECT_TRUE(status.ok()) << status.message();
  return tokenizer;
}

std::vector<int32_t> encode(const Tokenizer& t, const std::string& text, bool add_special) {
  std::vector<int32_t> ids;
  const Status status = t.encode(text, add_special, &ids);
  EXPECT_TRUE(status.ok()) << status.message();
  return ids;
}

std::string decode(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::string text;
  const Status status = t.decode(ids, &text);
  EXPECT_TRUE(status.ok()) << status.message();
  return text;
}

int32_t id_of(const Tokenizer& t, const std::string& token) {
  const int32_t id = t.token_to_id(token);
  EXPECT_GE(id, 0) << token;
  return id;
}

// ---- BPE -----------------------------------------------------------------------

TEST(JsonBpeTest, LowerRankedMergeWinsOverLaterOne) {
  // "abc": with "a b" ranked first the result is ab|c, reversed a|bc.
  auto ab_first = load_json(byte_level_file({"ab", "bc"}, {"a b", "b c"}));
  auto bc_first = load_json(byte_level_file({"ab", "bc"}, {"b c", "a b"}));
  ASSERT_NE(ab_first, nullptr);
  ASSERT_NE(bc_first, nullptr);
  EXPECT_EQ(encode(*ab_first, "abc", false), (std::vector<int32_t>{id_of(*ab_first, "ab"), 'c'}));
  EXPECT_EQ(encode(*bc_first, "abc", false), (std::vector<int32_t>{'a', id_of(*bc_first, "bc")}));
}

TEST(JsonBpeTest, EqualPairsMergeLeftmostFirst) {
  auto t = load_json(byte_level_file({"aa"}, {"a a"}));
  ASSERT_NE(t, nullptr);
  const int32_t aa = id_of(*t, "aa");
  EXPECT_EQ(encode(*t, "aaa", false), (std::vector<int32_t>{aa, 'a'}));
  EXPECT_EQ(encode(*t, "aaaa", false), (std::vector<int32_t>{aa, aa}));
}

TEST(JsonBpeTest, IgnoreMergesTakesAWholeWordFromTheVocabulary) {
  // "abc" is in the vocabulary but no merge builds it.
  auto plain = load_json(byte_level_file({"ab", "abc"}, {"a b"}, /*ignore_merges=*/false));
  auto ignoring = load_json(byte_level_file({"ab", "abc"}, {"a b"}, /*ignore_merges=*/true));
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(ignoring, nullptr);
  EXPECT_EQ(encode(*plain, "abc", false), (std::vector<int32_t>{id_of(*plain, "ab"), 'c'}));
  EXPECT_EQ(encode(*ignoring, "abc", false), (std::vector<int32_t>{id_of(*ignoring, "abc")}));
}

TEST(JsonBpeTest, MergesMayBeWrittenAsPairs) {
  json file = byte_level_file({"ab"}, {});
  file["model"]["merges"] = json::array({json::array({"a", "b"})});
  auto t = load_json(file);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(encode(*t, "ab", false), (std::vector<int32_t>{id_of(*t, "ab")}));
}

// ---- the byte-level style ---------------------------------------------------------

TEST(JsonByteLevelTest, SpacesAreByteCharactersAndDecodeKeepsThem) {
  auto t = load_json(byte_level_file({"Ġa"}, {"Ġ a"}));  // "Ġ" is the space byte, id 32
  ASSERT_NE(t, nullptr);
  const auto ids = encode(*t, " a  a", false);
  // GPT-2's pattern: " a", " " (a space before a space), " a".
  EXPECT_EQ(ids, (std::vector<int32_t>{id_of(*t, "Ġa"), ' ', id_of(*t, "Ġa")}));
  EXPECT_EQ(decode(*t, ids), " a  a");  // no leading space is stripped
  EXPECT_EQ(t->num_leading_spaces_stripped(), 0);
  EXPECT_EQ(t->token_bytes(id_of(*t, "Ġa")), " a");
}

TEST(JsonByteLevelTest, AddedTokensAreCutOutAndSpecialOnesSkippedInDecode) {
  auto t = load_json(byte_level_file({}, {}));
  ASSERT_NE(t, nullptr);
  const int32_t bos = id_of(*t, "<bos>"), eos = id_of(*t, "<eos>"), think = id_of(*t, "<think>");
  const auto ids = encode(*t, "x<think>y<eos>", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{bos, 'x', think, 'y', eos}));
  EXPECT_EQ(decode(*t, ids), "x<think>y");
  EXPECT_EQ(encode(*t, "x", false), (std::vector<int32_t>{'x'}));
  EXPECT_EQ(t->bos_id(), bos);  // the template's first special token
  EXPECT_EQ(t->eos_id(), -1);   // no tokenizer_config.json
  EXPECT_EQ(t->vocab_size(), think + 1);
  EXPECT_EQ(t->id_to_token(think), "<think>");
  EXPECT_EQ(t->token_to_id("<nope>"), -1);
}

TEST(JsonByteLevelTest, TokenizerConfigNamesBosAndEos) {
  auto t = load_json(byte_level_file({}, {}),
                     R"({"bos_token": null, "eos_token": {"content": "<eos>"}})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->eos_id(), id_of(*t, "<eos>"));
}

TEST(JsonByteLevelTest, CharacterSplitOverByteTokensStreamsWhole) {
  auto t = load_json(byte_level_file({}, {}));
  ASSERT_NE(t, nullptr);
  const auto ids = encode(*t, "é😀", false);  // C3 A9, F0 9F 98 80: one token per byte
  ASSERT_EQ(ids.size(), 6u);
  IncrementalDetokenizer detokenizer(t.get(), -1);
  std::vector<std::string> deltas;
  for (const int32_t id : ids) deltas.push_back(detokenizer.push(id));
  EXPECT_EQ(deltas, (std::vector<std::string>{"", "é", "", "", "", "😀"}));
  EXPECT_EQ(detokenizer.flush(), "");
}

TEST(JsonByteLevelTest, InvalidUtf8IsInvalidArgumentAndBadIdsAreRefused) {
  auto t = load_json(byte_level_file({}, {}));
  ASSERT_NE(t, nullptr);
  std::vector<int32_t> ids;
  EXPECT_EQ(t->encode("ok\xC3", false, &ids).code(), StatusCode::kInvalidArgument);
  std::string text;
  EXPECT_EQ(t->decode({'a', t->vocab_size()}, &text).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->decode({-1}, &text).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->token_bytes(t->vocab_size()), "");
}

TEST(JsonByteLevelTest, DecodeReplacesAStrayByte) {
  auto t = load_json(byte_level_file({}, {}));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(decode(*t, {'a', 0xE4, 'b'}),
            "a\xEF\xBF\xBD"
            "b");
}

// ---- the Metaspace style ---------------------------------------------------------

TEST(JsonMetaspaceTest, WordsMergeAndDecodeStripsTheDummyPrefix) {
  auto t = load_json(metaspace_file());
  ASSERT_NE(t, nullptr);
  const auto ids = encode(*t, "hi there", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, id_of(*t, "▁hi"), id_of(*t, "▁there")}));
  EXPECT_EQ(decode(*t, ids), "hi there");
  EXPECT_EQ(t->num_leading_spaces_stripped(), 1);
  EXPECT_EQ(t->token_bytes(id_of(*t, "▁there")), " there");
}

TEST(JsonMetaspaceTest, UnknownCharactersFallBackToBytes) {
  auto t = load_json(metaspace_file());
  ASSERT_NE(t, nullptr);
  // "é" is not in the vocabulary: its bytes C3 A9 become <0xC3> <0xA9>.
  const auto ids = encode(*t, "hé", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{id_of(*t, "▁"), id_of(*t, "h"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(decode(*t, ids), "hé");
}

TEST(JsonMetaspaceTest, WithoutByteFallbackUnknownsFuseIntoOneUnk) {
  json file = metaspace_file();
  file["model"]["byte_fallback"] = false;
  auto t = load_json(file);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(encode(*t, "hxyz", false), (std::vector<int32_t>{id_of(*t, "▁"), id_of(*t, "h"), 0}));
}

TEST(JsonMetaspaceTest, StreamingAfterBosStripsLikeDecode) {
  auto t = load_json(metaspace_file());
  ASSERT_NE(t, nullptr);
  const auto ids = encode(*t, "hi there", false);
  IncrementalDetokenizer after_bos(t.get(), t->bos_id());
  std::string streamed;
  for (const int32_t id : ids) streamed += after_bos.push(id);
  EXPECT_EQ(streamed + after_bos.flush(), decode(*t, ids));
  IncrementalDetokenizer after_text(t.get(), id_of(*t, "▁hi"));
  EXPECT_EQ(after_text.push(ids[0]), " hi");
}

TEST(JsonMetaspaceTest, PrependSchemeFirstOnlyPrefixesTheStartOfTheText) {
  json file = metaspace_file();
  file["normalizer"] = nullptr;
  for (const char* scheme : {"first", "always"}) {
    file["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", scheme}, {"split", true}};
    auto t = load_json(file);
    ASSERT_NE(t, nullptr);
    const int32_t hi = id_of(*t, "hi"), space_hi = id_of(*t, "▁hi");
    const auto ids = encode(*t, "hi</s>hi", false);
    EXPECT_EQ(ids,
              (std::vector<int32_t>{space_hi, 2, std::string(scheme) == "first" ? hi : space_hi}))
        << scheme;
  }
}

// ---- pre-tokenizer behaviours ----------------------------------------------------

std::vector<std::string> pre_tokenize(const json& config, const std::string& text) {
  std::unique_ptr<PreTokenizer> pre;
  const Status status = parse_pre_tokenizer(config, "pre_tokenizer", &pre);
  EXPECT_TRUE(status.ok()) << status.message();
  std::vector<std::string> pieces = {text};
  if (pre) {
    EXPECT_TRUE(pre->apply(&pieces, true).ok());
  }
  return pieces;
}

TEST(JsonPreTokenizerTest, SplitBehavioursPlaceTheDelimiterAsDocumented) {
  // The examples of the Split pre-tokenizer's documentation.
  auto split = [](const char* behavior) {
    return pre_tokenize({{"type", "Split"},
                         {"pattern", {{"String", "-"}}},
                         {"behavior", behavior},
                         {"invert", false}},
                        "the-final--countdown");
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Removed"), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split("Isolated"), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithPrevious"), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithNext"), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split("Contiguous"), (V{"the", "-", "final", "--", "countdown"}));
}

TEST(JsonPreTokenizerTest, RegexLookAheadKeepsTheLastSpaceForTheNextWord) {
  const json split = {{"type", "Split"},
                      {"pattern", {{"Regex", R"( ?\p{L}+|\s+(?!\S)|\s+)"}}},
                      {"behavior", "Isolated"}};
  EXPECT_EQ(pre_tokenize(split, "a   b  "), (std::vector<std::string>{"a", "  ", " b", "  "}));
}

TEST(JsonPreTokenizerTest, DigitsSplitAlone) {
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "ab12c"),
            (std::vector<std::string>{"ab", "1", "2", "c"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "ab12c"),
            (std::vector<std::string>{"ab", "12", "c"}));
}

// ---- refusals ------------------------------------------------------------------

struct Refusal {
  const char* name;
  std::function<void(json*)> edit;
  const char* field;  // the message must name it
};

TEST(JsonTokenizerRefusalTest, UnimplementedFieldsAreUnsupportedNamingTheField) {
  const std::vector<Refusal> refusals = {
      {"model type", [](json* f) { (*f)["model"]["type"] = "WordPiece"; }, "model.type"},
      {"dropout", [](json* f) { (*f)["model"]["dropout"] = 0.1; }, "model.dropout"},
      {"word prefix", [](json* f) { (*f)["model"]["continuing_subword_prefix"] = "##"; },
       "model.continuing_subword_prefix"},
      {"word suffix", [](json* f) { (*f)["model"]["end_of_word_suffix"] = "</w>"; },
       "model.end_of_word_suffix"},
      {"pre-tokenizer",
       [](json* f) {
         (*f)["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "pre_tokenizer.type"},
      {"split behavior",
       [](json* f) {
         (*f)["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers",
              {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Sideways"}}}}};
       },
       "pre_tokenizer.pretokenizers[0].behavior"},
      {"split invert",
       [](json* f) {
         (*f)["pre_tokenizer"] = {{"type", "Split"},
                                  {"pattern", {{"String", "-"}}},
                                  {"behavior", "Isolated"},
                                  {"invert", true}};
       },
       "pre_tokenizer.invert"},
      {"metaspace scheme",
       [](json* f) {
         (*f)["pre_tokenizer"] = {
             {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "sometimes"}};
       },
       "pre_tokenizer.prepend_scheme"},
      {"normalizer",
       [](json* f) {
         (*f)["normalizer"] = {{"type", "Lowercase"}};
       },
       "normalizer.type"},
      {"regex replace",
       [](json* f) {
         (*f)["normalizer"] = {
             {"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}};
       },
       "normalizer.pattern"},
      {"decoder",
       [](json* f) {
         (*f)["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder.type"},
      {"no decoder", [](json* f) { (*f)["decoder"] = nullptr; }, "decoder"},
      {"strip end",
       [](json* f) {
         (*f)["decoder"] = {{"type", "Sequence"},
                            {"decoders",
                             {{{"type", "Fuse"}},
                              {{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 1}}}}};
       },
       "decoder.decoders[1].stop"},
      {"post-processor",
       [](json* f) {
         (*f)["post_processor"] = {{"type", "BertPairs"}};
       },
       "post_processor.type"},
      {"lstrip", [](json* f) { (*f)["added_tokens"][0]["lstrip"] = true; },
       "added_tokens[0].lstrip"},
      {"single word", [](json* f) { (*f)["added_tokens"][2]["single_word"] = true; },
       "added_tokens[2].single_word"},
      {"truncation",
       [](json* f) {
         (*f)["truncation"] = {{"max_length", 8}};
       },
       "truncation"},
  };
  for (const Refusal& refusal : refusals) {
    json file = byte_level_file({}, {});
    refusal.edit(&file);
    std::unique_ptr<Tokenizer> t;
    const Status status = JsonTokenizer::load_from_text(file.dump(), "", &t);
    EXPECT_EQ(status.code(), StatusCode::kUnsupported) << refusal.name << ": " << status.message();
    EXPECT_NE(status.message().find(refusal.field), std::string::npos)
        << refusal.name << ": " << status.message();
    EXPECT_EQ(t, nullptr) << refusal.name;
  }
}

struct ComponentCase {
  const char* name;
  json decoder;         // replaces the metaspace file's decoder, unless null
  json post_processor;  // replaces its post_processor, unless null
  StatusCode code;      // kOk: the file loads
  const char* field;    // what the message names
};

TEST(JsonTokenizerRefusalTest, DecodersAndPostProcessorsAreCheckedPartByPart) {
  const json seq_tok = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const json bos_tok = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  const json bos_table = {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}};
  auto sequence = [](json decoders) { return json{{"type", "Sequence"}, {"decoders", decoders}}; };
  auto strip = [](json content, json start, json stop) {
    return json{{"type", "Strip"}, {"content", content}, {"start", start}, {"stop", stop}};
  };
  auto replace = [](json pattern, json content) {
    return json{{"type", "Replace"}, {"pattern", pattern}, {"content", content}};
  };
  auto templ = [](json single, json special) {
    return json{{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", special}};
  };
  const json fuse = {{"type", "Fuse"}};
  const ComponentCase cases[] = {
      {"decoder not an object", 5, nullptr, StatusCode::kTokenizerError, "decoder"},
      {"decoder type not text",
       {{"type", 5}},
       nullptr,
       StatusCode::kTokenizerError,
       "decoder.type"},
      {"decoders not a list", sequence(5), nullptr, StatusCode::kTokenizerError,
       "decoder.decoders"},
      {"after strip", sequence({fuse, strip(" ", 1, 0), fuse}), nullptr, StatusCode::kUnsupported,
       "after Strip"},
      {"byte fallback after fuse", sequence({fuse, {{"type", "ByteFallback"}}}), nullptr,
       StatusCode::kUnsupported, "after Fuse"},
      {"regex replace", replace({{"Regex", "a+"}}, "b"), nullptr, StatusCode::kUnsupported,
       "decoder.pattern"},
      {"empty replace", replace({{"String", ""}}, "b"), nullptr, StatusCode::kUnsupported,
       "decoder.pattern"},
      {"long replace after fuse", sequence({fuse, replace({{"String", "ab"}}, "x")}), nullptr,
       StatusCode::kUnsupported, "after Fuse"},
      {"replace without content",
       {{"type", "Replace"}, {"pattern", {{"String", "a"}}}},
       nullptr,
       StatusCode::kTokenizerError,
       "decoder.content"},
      {"empty metaspace",
       {{"type", "Metaspace"}, {"replacement", ""}},
       nullptr,
       StatusCode::kTokenizerError,
       "decoder.replacement"},
      {"metaspace",
       {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}},
       nullptr,
       StatusCode::kOk,
       ""},
      {"metaspace never",
       {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}},
       nullptr,
       StatusCode::kOk,
       ""},
      {"metaspace replacement type",
       {{"type", "Metaspace"}, {"replacement", 5}},
       nullptr,
       StatusCode::kTokenizerError,
       "decoder.replacement"},
      {"metaspace prefix flag",
       {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", "x"}},
       nullptr,
       StatusCode::kTokenizerError,
       "decoder.add_prefix_space"},
      {"replace pattern type", replace(5, "b"), nullptr, StatusCode::kTokenizerError,
       "decoder.pattern"},
      {"strip to the end", sequence({fuse, strip(" ", 1, 1)}), nullptr, StatusCode::kUnsupported,
       "decoder.decoders[1].stop"},
      {"strip backwards", sequence({fuse, strip(" ", -1, 0)}), nullptr, StatusCode::kUnsupported,
       "decoder.decoders[1].start"},
      {"strip before fuse", sequence({strip(" ", 1, 0)}), nullptr, StatusCode::kUnsupported,
       "before Fuse"},
      {"strip other text", sequence({fuse, strip("x", 1, 0)}), nullptr, StatusCode::kUnsupported,
       "decoder.decoders[1].content"},
      {"strip too far", sequence({fuse, strip(" ", 100, 0)}), nullptr, StatusCode::kUnsupported,
       "decoder.decoders[1].start"},
      {"strip start not a number", sequence({fuse, strip(" ", "a", 0)}), nullptr,
       StatusCode::kTokenizerError, "decoder.decoders[1].start"},
      {"post-processor not an object", nullptr, 5, StatusCode::kTokenizerError, "post_processor"},
      {"special token not in the table", nullptr, templ({bos_tok, seq_tok}, json::object()),
       StatusCode::kTokenizerError, "<s>"},
      {"special ids not integers", nullptr,
       templ({bos_tok, seq_tok}, {{"<s>", {{"id", "<s>"}, {"ids", {"x"}}, {"tokens", {"<s>"}}}}}),
       StatusCode::kTokenizerError, "ids"},
      {"special tokens not a table", nullptr, templ({bos_tok, seq_tok}, 5),
       StatusCode::kTokenizerError, "<s>"},
      {"special ids not a list", nullptr,
       templ({bos_tok, seq_tok}, {{"<s>", {{"id", "<s>"}, {"ids", 5}, {"tokens", {"<s>"}}}}}),
       StatusCode::kTokenizerError, "ids"},
      {"sequence id not text", nullptr,
       templ({bos_tok, {{"Sequence", {{"id", 5}, {"type_id", 0}}}}}, bos_table),
       StatusCode::kTokenizerError, "Sequence.id"},
      {"special token id not text", nullptr,
       templ({{{"SpecialToken", {{"id", 5}, {"type_id", 0}}}}, seq_tok}, bos_table),
       StatusCode::kTokenizerError, "SpecialToken.id"},
      {"post-processor type not text",
       nullptr,
       {{"type", 5}},
       StatusCode::kTokenizerError,
       "post_processor.type"},
      {"roberta cls of one",
       nullptr,
       {{"type", "RobertaProcessing"}, {"cls", {"<s>"}}, {"sep", {"</s>", 2}}},
       StatusCode::kTokenizerError,
       "post_processor.cls"},
      {"processor in a sequence",
       nullptr,
       {{"type", "Sequence"}, {"processors", {5}}},
       StatusCode::kTokenizerError,
       "post_processor.processors[0]"},
      {"single not a list", nullptr, templ(5, bos_table), StatusCode::kTokenizerError,
       "post_processor.single"},
      {"sequence B", nullptr,
       templ({bos_tok, {{"Sequence", {{"id", "B"}, {"type_id", 0}}}}}, bos_table),
       StatusCode::kUnsupported, "Sequence"},
      {"two sequences", nullptr, templ({seq_tok, seq_tok}, bos_table), StatusCode::kUnsupported,
       "Sequence"},
      {"unknown piece", nullptr, templ({seq_tok, {{"Other", 1}}}, bos_table),
       StatusCode::kUnsupported, "post_processor.single"},
      {"no sequence", nullptr, templ({bos_tok}, bos_table), StatusCode::kTokenizerError,
       "has no Sequence A"},
      {"roberta",
       nullptr,
       {{"type", "RobertaProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"</s>", 2}}},
       StatusCode::kOk,
       ""},
      {"bert without sep",
       nullptr,
       {{"type", "BertProcessing"}, {"cls", {"<s>", 1}}},
       StatusCode::kTokenizerError,
       "post_processor.sep"},
      {"processors not a list",
       nullptr,
       {{"type", "Sequence"}, {"processors", 5}},
       StatusCode::kTokenizerError,
       "post_processor.processors"},
      {"processors",
       nullptr,
       {{"type", "Sequence"},
        {"processors",
         {{{"type", "ByteLevel"}, {"trim_offsets", false}}, templ({bos_tok, seq_tok}, bos_table)}}},
       StatusCode::kOk,
       ""},
  };
  for (const ComponentCase& c : cases) {
    SCOPED_TRACE(c.name);
    json file = metaspace_file();
    if (!c.decoder.is_null()) file["decoder"] = c.decoder;
    if (!c.post_processor.is_null()) file["post_processor"] = c.post_processor;
    std::unique_ptr<Tokenizer> t;
    const Status status = JsonTokenizer::load_from_text(file.dump(), "", &t);
    EXPECT_EQ(status.code(), c.code) << status.message();
    EXPECT_NE(status.message().find(c.field), std::string::npos) << status.message();
    EXPECT_EQ(t != nullptr, c.code == StatusCode::kOk);
  }
}

struct FieldCase {
  const char* name;
  std::function<void(json*)> edit;  // of the metaspace file
  StatusCode code;                  // kOk: the file loads
  const char* field;                // what the message names
};

TEST(JsonTokenizerRefusalTest, EachMalformedFieldIsNamed) {
  const auto set = [](const char* pointer, json value) {
    return [p = json::json_pointer(pointer), value](json* f) { (*f)[p] = value; };
  };
  const json split = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}};
  const auto pre = [](json config) {
    return [config](json* f) { (*f)["pre_tokenizer"] = config; };
  };
  const auto norm = [](json config) { return [config](json* f) { (*f)["normalizer"] = config; }; };
  const auto with = [](json base, const char* key, json value) {
    base[key] = value;
    return base;
  };
  const json metaspace = {{"type", "Metaspace"}, {"replacement", "▁"}};
  const StatusCode bad = StatusCode::kTokenizerError;
  const FieldCase cases[] = {
      {"model", set("/model", 5), bad, "model"},
      {"model type", set("/model/type", 5), bad, "model.type"},
      {"byte_fallback", set("/model/byte_fallback", "x"), bad, "model.byte_fallback"},
      {"ignore_merges", set("/model/ignore_merges", 1), bad, "model.ignore_merges"},
      {"fuse_unk", set("/model/fuse_unk", "x"), bad, "model.fuse_unk"},
      {"vocab", set("/model/vocab", json::array()), bad, "model.vocab"},
      {"vocab id", set("/model/vocab/h", -1), bad, "model.vocab[\"h\"]"},
      // A small file with a huge id made the id table gigabytes long
      // (fuzz_tokenizer_json ran out of memory).
      {"vocab id far past the vocab", set("/model/vocab/h", 900000000), bad, "model.vocab[\"h\"]"},
      {"unk_token type", set("/model/unk_token", 5), bad, "model.unk_token"},
      {"unk_token unknown", set("/model/unk_token", "<nope>"), bad, "model.unk_token"},
      {"merges", set("/model/merges", 5), bad, "model.merges"},
      {"merge of three", set("/model/merges", {"h i x"}), bad, "model.merges[0]"},
      {"merge of numbers", set("/model/merges", {{1, 2}}), bad, "model.merges[0]"},
      {"pre-tokenizer", pre(5), bad, "pre_tokenizer"},
      {"pre-tokenizer type", pre({{"type", 5}}), bad, "pre_tokenizer.type"},
      {"split behavior", pre(with(split, "behavior", 5)), bad, "pre_tokenizer.behavior"},
      {"split pattern", pre(with(split, "pattern", 5)), bad, "pre_tokenizer.pattern"},
      {"split pattern kind", pre(with(split, "pattern", {{"Glob", "*"}})), StatusCode::kUnsupported,
       "pre_tokenizer.pattern"},
      {"split regex", pre(with(split, "pattern", {{"Regex", "("}})), StatusCode::kUnsupported,
       "does not compile"},
      {"byte-level prefix", pre({{"type", "ByteLevel"}, {"add_prefix_space", "x"}}), bad,
       "pre_tokenizer.add_prefix_space"},
      {"byte-level regex", pre({{"type", "ByteLevel"}, {"use_regex", "x"}}), bad,
       "pre_tokenizer.use_regex"},
      {"metaspace replacement", pre(with(metaspace, "replacement", "")), bad,
       "pre_tokenizer.replacement"},
      {"metaspace scheme type", pre(with(metaspace, "prepend_scheme", 5)), bad,
       "pre_tokenizer.prepend_scheme"},
      {"metaspace never", pre(with(metaspace, "prepend_scheme", "never")), StatusCode::kOk, ""},
      {"metaspace without scheme", pre(with(metaspace, "add_prefix_space", false)), StatusCode::kOk,
       ""},
      {"metaspace split", pre(with(metaspace, "split", "x")), bad, "pre_tokenizer.split"},
      {"digits", pre({{"type", "Digits"}, {"individual_digits", "x"}}), bad,
       "pre_tokenizer.individual_digits"},
      {"digits alone", pre({{"type", "Digits"}, {"individual_digits", true}}), StatusCode::kOk, ""},
      {"pre-tokenizers", pre({{"type", "Sequence"}, {"pretokenizers", 5}}), bad,
       "pre_tokenizer.pretokenizers"},
      {"pre-tokenizer in a sequence", pre({{"type", "Sequence"}, {"pretokenizers", {5}}}), bad,
       "pre_tokenizer.pretokenizers[0]"},
      {"normalizer", norm(5), bad, "normalizer"},
      {"normalizer type", norm({{"type", 5}}), bad, "normalizer.type"},
      {"normalizers", norm({{"type", "Sequence"}, {"normalizers", 5}}), bad,
       "normalizer.normalizers"},
      {"normalizer in a sequence", norm({{"type", "Sequence"}, {"normalizers", {{{"type", 5}}}}}),
       bad, "normalizer.normalizers[0].type"},
      {"replace content", norm({{"type", "Replace"}, {"pattern", {{"String", "a"}}}}), bad,
       "normalizer.content"},
      {"replace pattern", norm({{"type", "Replace"}, {"pattern", 5}, {"content", "b"}}), bad,
       "normalizer.pattern"},
      {"prepend", norm({{"type", "Prepend"}, {"prepend", 5}}), bad, "normalizer.prepend"},
      {"forms",
       norm({{"type", "Sequence"},
             {"normalizers",
              {{{"type", "NFD"}}, {{"type", "NFKC"}}, {{"type", "NFKD"}}, {{"type", "NFC"}}}}}),
       StatusCode::kOk, ""},
      {"added tokens", set("/added_tokens", 5), bad, "added_tokens"},
      {"added token", set("/added_tokens/0", 5), bad, "added_tokens[0]"},
      {"added token id", set("/added_tokens/0/id", -1), bad, "added_tokens[0].id"},
      {"added token id far past the vocab", set("/added_tokens/0/id", 900000000), bad,
       "added_tokens[0].id"},
      {"added token content", set("/added_tokens/0/content", ""), bad, "added_tokens[0].content"},
      {"added token special", set("/added_tokens/0/special", "x"), bad, "added_tokens[0].special"},
      {"added token rstrip", set("/added_tokens/0/rstrip", true), StatusCode::kUnsupported,
       "added_tokens[0].rstrip"},
  };
  for (const FieldCase& c : cases) {
    SCOPED_TRACE(c.name);
    json file = metaspace_file();
    c.edit(&file);
    std::unique_ptr<Tokenizer> t;
    const Status status = JsonTokenizer::load_from_text(file.dump(), "", &t);
    EXPECT_EQ(status.code(), c.code) << status.message();
    EXPECT_NE(status.message().find(c.field), std::string::npos) << status.message();
    EXPECT_EQ(t != nullptr, c.code == StatusCode::kOk);
  }
}

TEST(JsonTokenizerRefusalTest, NormalizedAddedTokensNeedNoNormalizer) {
  json file = metaspace_file();
  file["added_tokens"][1]["normalized"] = true;
  std::unique_ptr<Tokenizer> t;
  const Status status = JsonTokenizer::load_from_text(file.dump(), "", &t);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("added_tokens[1].normalized"), std::string::npos)
      << status.message();
  json plain = byte_level_file({}, {});
  plain["added_tokens"][1]["normalized"] = true;  // no normalizer: the same match
  EXPECT_NE(load_json(plain), nullptr);
}

TEST(JsonTokenizerRefusalTest, MalformedFilesAreTokenizerErrors) {
  std::unique_ptr<Tokenizer> t;
  EXPECT_EQ(JsonTokenizer::load_from_text("{not json", "", &t).code(), StatusCode::kTokenizerError);
  json file = byte_level_file({}, {"a zz"});  // "zz" is not in the vocabulary
  const Status status = JsonTokenizer::load_from_text(file.dump(), "", &t);
  EXPECT_EQ(status.code(), StatusCode::kTokenizerError);
  EXPECT_NE(status.message().find("model.merges[0]"), std::string::npos) << status.message();
  json no_vocab = byte_level_file({}, {});
  no_vocab["model"].erase("vocab");
  EXPECT_EQ(JsonTokenizer::load_from_text(no_vocab.dump(), "", &t).code(),
            StatusCode::kTokenizerError);
  EXPECT_EQ(t, nullptr);
}

// ---- loading from a folder ----------------------------------------------------------

TEST(JsonTokenizerLoadTest, FolderWithTokenizerJsonAndConfigLoads) {
  const fs::path dir = fs::temp_directory_path() / ("pvllm_json_tok_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << byte_level_file({}, {}).dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<eos>"})";
  std::unique_ptr<Tokenizer> t;
  const Status status = Tokenizer::load(dir.string(), &t);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(t->eos_id(), t->token_to_id("<eos>"));
  std::unique_ptr<Tokenizer> by_file;
  EXPECT_TRUE(Tokenizer::load((dir / "tokenizer.json").string(), &by_file).ok());
  fs::remove_all(dir);
  std::unique_ptr<Tokenizer> none;
  EXPECT_EQ(Tokenizer::load(dir.string(), &none).code(), StatusCode::kNotFound);
}

TEST(JsonTokenizerLoadTest, UnreadableFilesAreNamed) {
  const fs::path dir =
      fs::temp_directory_path() / ("pvllm_json_tok_bad_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::unique_ptr<Tokenizer> t;
  std::ofstream(dir / "tokenizer.json") << byte_level_file({}, {}).dump();
  std::ofstream(dir / "tokenizer_config.json") << "[1]";
  Status st = JsonTokenizer::load_file((dir / "tokenizer.json").string(), &t);
  EXPECT_EQ(st.code(), StatusCode::kTokenizerError);
  EXPECT_NE(st.message().find("tokenizer_config.json is not a JSON object"), std::string::npos)
      << st.message();
  // Token names as {"content": ...}; anything else names no token.
  std::ofstream(dir / "tokenizer_config.json", std::ios::trunc)
      << R"({"bos_token": {"content": "<bos>"}, "eos_token": 5})";
  ASSERT_TRUE(JsonTokenizer::load_file((dir / "tokenizer.json").string(), &t).ok());
  EXPECT_EQ(t->bos_id(), t->token_to_id("<bos>"));
  std::ofstream(dir / "tokenizer.json", std::ios::trunc) << "[1]";
  st = JsonTokenizer::load_file((dir / "tokenizer.json").string(), &t);
  EXPECT_EQ(st.code(), StatusCode::kTokenizerError);
  EXPECT_NE(st.message().find((dir / "tokenizer.json").string() +
                              ": tokenizer.json is not a JSON object"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(JsonTokenizer::load_file(dir.string(), &t).code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(JsonTokenizerRefusalTest, APostProcessorAddingAnUnknownIdIsRefused) {
  json prefix = metaspace_file();
  prefix["post_processor"]["special_tokens"]["<s>"]["ids"] = {99999};
  json suffix = metaspace_file();
  suffix["post_processor"] = {
      {"type", "RobertaProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"x", 99999}}};
  for (const json& file : {prefix, suffix}) {
    std::unique_ptr<Tokenizer> t;
    const Status st = JsonTokenizer::load_from_text(file.dump(), "", &t);
    EXPECT_EQ(st.code(), StatusCode::kTokenizerError);
    EXPECT_NE(st.message().find("adds unknown id 99999"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace pvllm
