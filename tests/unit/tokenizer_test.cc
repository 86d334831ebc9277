// Tokenizer and IncrementalDetokenizer: sentencepiece round trips on the
// tiny trained tokenizer and the shared real ones, byte-fallback characters
// split over several tokens, the leading-space rule and error paths.
#include "core/tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/tokenizer/sentencepiece_tokenizer.h"
#include "tests/util/shared_paths.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

constexpr int32_t kNoPrompt = -1;

// tok512 and the Llama 2 tokenizer both put <0x00>..<0xFF> at ids 3..258.
constexpr int32_t kFirstBytePiece = 3;
int32_t byte_piece(unsigned char byte) { return kFirstBytePiece + byte; }

const char* const kReplacement = "\xEF\xBF\xBD";  // U+FFFD

std::unique_ptr<Tokenizer> load_or_die(const std::string& path) {
  std::unique_ptr<Tokenizer> tokenizer;
  const Status status = Tokenizer::load(path, &tokenizer);
  EXPECT_TRUE(status.ok()) << status.message();
  return tokenizer;
}

std::vector<int32_t> encode(const Tokenizer& tokenizer, const std::string& text, bool add_bos) {
  std::vector<int32_t> ids;
  const Status status = tokenizer.encode(text, add_bos, &ids);
  EXPECT_TRUE(status.ok()) << status.message();
  return ids;
}

std::string decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::string text;
  const Status status = tokenizer.decode(ids, &text);
  EXPECT_TRUE(status.ok()) << status.message();
  return text;
}

// A folder for the files the error tests write, removed at exit.
struct ScratchDir {
  ScratchDir()
      : path(std::filesystem::temp_directory_path() /
             ("pvllm_tokenizer_test_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path path;
};

std::string scratch_dir() {
  static const ScratchDir dir;
  return dir.path.string();
}

// Runs `ids` through an IncrementalDetokenizer, checking that every delta is
// whole, valid UTF-8; returns the deltas, the flush() output last.
std::vector<std::string> detokenize(const Tokenizer& tokenizer, int32_t last_prompt_token,
                                    const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detokenizer(&tokenizer, last_prompt_token);
  std::vector<std::string> deltas;
  for (size_t i = 0; i < ids.size(); ++i) {
    deltas.push_back(detokenizer.push(ids[i]));
    EXPECT_TRUE(is_valid_utf8(deltas.back()))
        << "delta after token " << i << " (id " << ids[i] << ") splits a character";
  }
  deltas.push_back(detokenizer.flush());
  EXPECT_TRUE(is_valid_utf8(deltas.back())) << "flush() emitted invalid UTF-8";
  return deltas;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) out += part;
  return out;
}

// Texts with multi-byte characters; for tok512 all the non-ASCII ones are
// byte-fallback pieces, for the tiny tokenizer 日本 and 🎉 are.
const std::vector<std::string>& sample_texts() {
  static const std::vector<std::string> texts = {
      "Once upon a time", "The cat saw a red ball in the park.",
      "Hello 你好 world", "a café, a naïve dog 😀 and 🎉!",
      "日本 is 🎉🎉 fun",   "  two  spaces and a tab\tend ",
  };
  return texts;
}

// ---- the tiny trained tokenizer --------------------------------------------

TEST(TinyTokenizerTest, PathIsStableAndVocabMatchesLoadedModel) {
  const std::string path = testing::tiny_tokenizer_path();
  EXPECT_EQ(path, testing::tiny_tokenizer_path());
  ASSERT_TRUE(std::filesystem::is_regular_file(path)) << path;
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), testing::tiny_tokenizer_vocab_size());
  EXPECT_GT(tokenizer->vocab_size(), 259);  // 256 byte pieces + unk/bos/eos
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
}

TEST(TinyTokenizerTest, TokensAndIdsMapBothWays) {
  auto tokenizer = load_or_die(testing::tiny_tokenizer_path());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->token_to_id("<s>"), 1);
  EXPECT_EQ(tokenizer->token_to_id("</s>"), 2);
  EXPECT_EQ(tokenizer->id_to_token(1), "<s>");
  EXPECT_EQ(tokenizer->token_to_id("<0x41>"), byte_piece('A'));
  // An absent piece is -1, not the unknown id PieceToId answers for it.
  EXPECT_EQ(tokenizer->token_to_id("no such piece"), -1);
  EXPECT_EQ(tokenizer->id_to_token(-1), "");
  EXPECT_EQ(tokenizer->id_to_token(tokenizer->vocab_size()), "");
  EXPECT_EQ(tokenizer->token_bytes(tokenizer->vocab_size()), "");
}

TEST(TinyTokenizerTest, EncodeDecodeRoundTrips) {
  auto tokenizer = load_or_die(testing::tiny_tokenizer_path());
  ASSERT_NE(tokenizer, nullptr);
  for (const std::string& text : sample_texts()) {
    const auto ids = encode(*tokenizer, text, /*add_bos=*/true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), tokenizer->bos_id()) << text;
    for (int32_t id : ids) EXPECT_TRUE(tokenizer->is_valid_id(id)) << id;
    EXPECT_EQ(decode(*tokenizer, ids), text);
    EXPECT_EQ(encode(*tokenizer, text, /*add_bos=*/false),
              std::vector<int32_t>(ids.begin() + 1, ids.end()));
  }
}

TEST(TinyTokenizerTest, UnseenCharactersFallBackToBytePieces) {
  auto tokenizer = load_or_die(testing::tiny_tokenizer_path());
  ASSERT_NE(tokenizer, nullptr);
  // "日" is E6 97 A5 and is not in the training corpus.
  const auto ids = encode(*tokenizer, "日", /*add_bos=*/false);
  std::string bytes;
  int num_single_byte_pieces = 0;
  for (int32_t id : ids) {
    bytes += tokenizer->token_bytes(id);
    if (tokenizer->token_bytes(id).size() == 1) ++num_single_byte_pieces;
  }
  EXPECT_EQ(bytes, " 日");  // the dummy-prefix space, then the three bytes
  EXPECT_GE(num_single_byte_pieces, 3);
}

TEST(TinyTokenizerTest, LoadFromBytesMatchesLoadFromFile) {
  const std::string path = testing::tiny_tokenizer_path();
  std::ifstream file(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty());
  std::unique_ptr<Tokenizer> from_bytes;
  const Status status = SentencePieceTokenizer::load_from_bytes(bytes, &from_bytes);
  ASSERT_TRUE(status.ok()) << status.message();
  auto from_file = load_or_die(path);
  ASSERT_NE(from_file, nullptr);
  EXPECT_EQ(from_bytes->vocab_size(), from_file->vocab_size());
  for (const std::string& text : sample_texts()) {
    EXPECT_EQ(encode(*from_bytes, text, true), encode(*from_file, text, true)) << text;
  }
}

// ---- errors ------------------------------------------------------------------

TEST(TokenizerLoadTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = scratch_dir() + "/no_such.model";
  std::unique_ptr<Tokenizer> tokenizer;
  const Status status = Tokenizer::load(path, &tokenizer);
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_EQ(tokenizer, nullptr);
}

TEST(TokenizerLoadTest, GarbageFileIsTokenizerErrorNamingThePath) {
  const std::string path = scratch_dir() + "/garbage.model";
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is not a sentencepiece model \x01\x02\xff";
  }
  std::unique_ptr<Tokenizer> tokenizer;
  const Status status = Tokenizer::load(path, &tokenizer);
  EXPECT_EQ(status.code(), StatusCode::kTokenizerError);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_EQ(tokenizer, nullptr);
}

TEST(TokenizerLoadTest, GarbageBytesAreTokenizerError) {
  std::unique_ptr<Tokenizer> tokenizer;
  const Status status = SentencePieceTokenizer::load_from_bytes("\x0a\xff\xff garbage", &tokenizer);
  EXPECT_EQ(status.code(), StatusCode::kTokenizerError);
  EXPECT_FALSE(status.message().empty());
  EXPECT_EQ(tokenizer, nullptr);
}

TEST(TokenizerLoadTest, AModelSentencepieceThrowsOnIsTokenizerError) {
  // Found by fuzz/fuzz_tokenizer_model: a well-formed proto whose pieces
  // make sentencepiece's trie builder throw instead of returning a status;
  // the exception ended the process.
  const unsigned char kBytes[] = {0x0a, 0x0e, 0x0a, 0x05, 0x3c, 0x75, 0x6e, 0x6b, 0x3e, 0x15, 0x00,
                                  0x00, 0x00, 0x00, 0x18, 0x02, 0x0a, 0x0c, 0x0a, 0x03, 0x00, 0x00,
                                  0x3e, 0x15, 0x00, 0x00, 0x00, 0x00, 0x58, 0x03, 0x0a, 0x0d, 0x0a,
                                  0x04, 0x3c, 0x2f, 0x73, 0x3e, 0x15, 0x00, 0x00, 0x00, 0x00, 0x38,
                                  0x03, 0x0a, 0x0f, 0x0a, 0x06, 0x36, 0x00, 0xe5, 0xfc, 0xfa, 0x3c,
                                  0x75, 0x6e, 0x6b, 0x3e, 0x15, 0x30, 0x78, 0x30, 0x00};
  std::unique_ptr<Tokenizer> tokenizer;
  const Status status = SentencePieceTokenizer::load_from_bytes(
      std::string(reinterpret_cast<const char*>(kBytes), sizeof(kBytes)), &tokenizer);
  EXPECT_EQ(status.code(), StatusCode::kTokenizerError);
  EXPECT_FALSE(status.message().empty());
  EXPECT_EQ(tokenizer, nullptr);
}

TEST(TokenizerDecodeTest, OutOfVocabularyIdsAreInvalidArgument) {
  auto tokenizer = load_or_die(testing::tiny_tokenizer_path());
  ASSERT_NE(tokenizer, nullptr);
  const int32_t vocab_size = tokenizer->vocab_size();
  EXPECT_TRUE(tokenizer->is_valid_id(vocab_size - 1));
  EXPECT_FALSE(tokenizer->is_valid_id(vocab_size));
  EXPECT_FALSE(tokenizer->is_valid_id(-1));
  for (int32_t bad : {vocab_size, -1, vocab_size + 1000}) {
    std::string text;
    const Status status = tokenizer->decode({tokenizer->bos_id(), 5, bad}, &text);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find(std::to_string(bad)), std::string::npos) << status.message();
  }
  EXPECT_EQ(tokenizer->token_bytes(vocab_size), "");
}

// ---- the shared real tokenizers ----------------------------------------------

TEST(SharedTokenizerTest, Tok512EncodesOnceUponATimeAsDocumented) {
  PVLLM_SHARED_OR_SKIP(path, "models/stories260K/tok512.model");
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 512);
  const auto ids = encode(*tokenizer, "Once upon a time", /*add_bos=*/true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(decode(*tokenizer, ids), "Once upon a time");
}

TEST(SharedTokenizerTest, Llama2EncodesOnceUponATimeAsDocumented) {
  PVLLM_SHARED_OR_SKIP(path, "models/llama2-tokenizer/tokenizer.model");
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 32000);
  const auto ids = encode(*tokenizer, "Once upon a time", /*add_bos=*/false);
  EXPECT_EQ(ids, (std::vector<int32_t>{9038, 2501, 263, 931}));
  EXPECT_EQ(decode(*tokenizer, ids), "Once upon a time");
  for (const std::string& text : sample_texts()) {
    EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, text, true)), text);
  }
}

// A chat template writes "<s>" and "</s>" as text: they are BOS and EOS, as
// Hugging Face's Llama tokenizers read them, and the text around them is
// encoded as Meta's reference code does (BOS id, then sentencepiece's
// encoding with its dummy-prefix space).
TEST(SharedTokenizerTest, Llama2ReadsControlTokensWrittenInTheText) {
  PVLLM_SHARED_OR_SKIP(path, "models/llama2-tokenizer/tokenizer.model");
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  const auto chat = encode(*tokenizer, "<s>[INST] Hi [/INST]", /*add_bos=*/false);
  EXPECT_EQ(chat, encode(*tokenizer, "[INST] Hi [/INST]", /*add_bos=*/true));
  EXPECT_EQ(chat.front(), 1);
  EXPECT_EQ(std::count(chat.begin(), chat.end(), 1), 1);
  auto two_turns = encode(*tokenizer, "a</s><s>b", /*add_bos=*/false);
  auto expected = encode(*tokenizer, "a", false);
  expected.push_back(2);
  expected.push_back(1);
  const auto b = encode(*tokenizer, "b", false);
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(two_turns, expected);
  EXPECT_EQ(encode(*tokenizer, "<unk>", false), (std::vector<int32_t>{0}));
  // A text without them encodes as before.
  EXPECT_EQ(encode(*tokenizer, "Once upon a time", false),
            (std::vector<int32_t>{9038, 2501, 263, 931}));
}

TEST(SharedTokenizerTest, Tok512TokenBytesMapSpaceBytesAndControls) {
  PVLLM_SHARED_OR_SKIP(path, "models/stories260K/tok512.model");
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->token_bytes(403), " Once");  // "▁Once"
  EXPECT_EQ(tokenizer->token_bytes(byte_piece(0xE4)), "\xE4");
  EXPECT_EQ(tokenizer->token_bytes(byte_piece(0x00)), std::string(1, '\0'));
  EXPECT_EQ(tokenizer->token_bytes(tokenizer->bos_id()), "");
  EXPECT_EQ(tokenizer->token_bytes(tokenizer->eos_id()), "");
  EXPECT_EQ(tokenizer->token_bytes(0), "");  // <unk>
}

// ---- incremental detokenization ---------------------------------------------

// The deltas of a generation that starts right after BOS read exactly as
// sentencepiece decodes the whole, on every tokenizer we have.
void expect_deltas_match_decode(const Tokenizer& tokenizer) {
  for (const std::string& text : sample_texts()) {
    const auto ids = encode(tokenizer, text, /*add_bos=*/false);
    const auto deltas = detokenize(tokenizer, tokenizer.bos_id(), ids);
    EXPECT_EQ(join(deltas), decode(tokenizer, ids)) << text;
    EXPECT_EQ(join(detokenize(tokenizer, kNoPrompt, ids)), decode(tokenizer, ids)) << text;
  }
}

TEST(IncrementalDetokenizerTest, DeltasConcatenateToDecodeOnTinyTokenizer) {
  auto tokenizer = load_or_die(testing::tiny_tokenizer_path());
  ASSERT_NE(tokenizer, nullptr);
  expect_deltas_match_decode(*tokenizer);
}

TEST(IncrementalDetokenizerTest, DeltasConcatenateToDecodeOnTok512) {
  PVLLM_SHARED_OR_SKIP(path, "models/stories260K/tok512.model");
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  expect_deltas_match_decode(*tokenizer);
}

TEST(IncrementalDetokenizerTest, DeltasConcatenateToDecodeOnLlama2) {
  PVLLM_SHARED_OR_SKIP(path, "models/llama2-tokenizer/tokenizer.model");
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  expect_deltas_match_decode(*tokenizer);
}

// Pushes `ids` and returns the non-empty deltas, counting the empty ones.
std::vector<std::string> visible_deltas(const std::vector<std::string>& deltas,
                                        int* num_empty_pushes) {
  std::vector<std::string> visible;
  *num_empty_pushes = 0;
  for (size_t i = 0; i + 1 < deltas.size(); ++i) {  // the last one is flush()
    if (deltas[i].empty()) {
      ++*num_empty_pushes;
    } else {
      visible.push_back(deltas[i]);
    }
  }
  return visible;
}

TEST(IncrementalDetokenizerTest, Tok512CharacterSplitOverBytePiecesIsHeldUntilComplete) {
  PVLLM_SHARED_OR_SKIP(path, "models/stories260K/tok512.model");
  auto tokenizer = load_or_die(path);
  ASSERT_NE(tokenizer, nullptr);
  // tok512 has no CJK or emoji pieces, so these are byte-fallback tokens.
  const auto deltas =
      detokenize(*tokenizer, tokenizer->bos_id(), encode(*tokenizer, "你好 😀", false));
  int num_empty_pushes = 0;
  EXPECT_EQ(visible_deltas(deltas, &num_empty_pushes),
            (std::vector<std::string>{"你", "好", " ", "😀"}));
  EXPECT_GE(num_empty_pushes, 2 + 2 + 3);  // the leading bytes of each character
  EXPECT_EQ(deltas.back(), "");            // nothing left to flush
}

// Byte-level behaviour on the tiny tokenizer, which needs no shared files.
class TinyDetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = load_or_die(testing::tiny_tokenizer_path());
    ASSERT_NE(tokenizer_, nullptr);
    ASSERT_EQ(tokenizer_->token_bytes(byte_piece(0xE4)), "\xE4");  // byte pieces at 3..258
  }
  // The id of a word piece "▁<word>", which must be a single token.
  int32_t word(const std::string& text) {
    const auto ids = encode(*tokenizer_, text, false);
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.empty() ? -1 : ids.front();
  }
  IncrementalDetokenizer after_bos() { return IncrementalDetokenizer(tokenizer_.get(), bos()); }
  int32_t bos() const { return tokenizer_->bos_id(); }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(TinyDetokenizerTest, CharacterSplitOverBytePiecesIsHeldUntilComplete) {
  // Neither character is in the tiny corpus, so both are byte pieces.
  const auto deltas = detokenize(*tokenizer_, bos(), encode(*tokenizer_, "日本 🎉", false));
  int num_empty_pushes = 0;
  EXPECT_EQ(visible_deltas(deltas, &num_empty_pushes),
            (std::vector<std::string>{"日", "本", " ", "🎉"}));
  EXPECT_GE(num_empty_pushes, 2 + 2 + 3);
  EXPECT_EQ(deltas.back(), "");
}

TEST_F(TinyDetokenizerTest, ExplicitBytePiecesEmitCharacterOnLastByte) {
  IncrementalDetokenizer detokenizer = after_bos();
  EXPECT_EQ(detokenizer.push(byte_piece(0xE4)), "");
  EXPECT_EQ(detokenizer.push(byte_piece(0xBD)), "");
  EXPECT_EQ(detokenizer.push(byte_piece(0xA0)), "你");
  EXPECT_EQ(detokenizer.flush(), "");
}

TEST_F(TinyDetokenizerTest, IncompleteTrailingCharacterIsFlushedAsReplacement) {
  const std::vector<int32_t> ids = {word("the"), byte_piece(0xE4), byte_piece(0xBD)};  // 2/3 of 你
  IncrementalDetokenizer detokenizer = after_bos();
  EXPECT_EQ(detokenizer.push(ids[0]), "the");
  EXPECT_EQ(detokenizer.push(ids[1]), "");
  EXPECT_EQ(detokenizer.push(ids[2]), "");
  const std::string flushed = detokenizer.flush();
  EXPECT_NE(flushed.find(kReplacement), std::string::npos);
  EXPECT_TRUE(is_valid_utf8(flushed));
  // sentencepiece replaces each stray byte; the stream agrees with it.
  EXPECT_EQ("the" + flushed, decode(*tokenizer_, ids));
  EXPECT_EQ(detokenizer.flush(), "");  // flushing twice emits nothing more
}

TEST_F(TinyDetokenizerTest, InvalidByteIsReplacedWithoutStallingTheStream) {
  IncrementalDetokenizer detokenizer(tokenizer_.get(), word("and"));
  // 0xE4 promised a 3-byte character; " the" breaks it, so it is emitted as
  // U+FFFD right away instead of being held forever.
  EXPECT_EQ(detokenizer.push(byte_piece(0xE4)), "");
  EXPECT_EQ(detokenizer.push(word("the")), std::string(kReplacement) + " the");
  EXPECT_EQ(detokenizer.push(byte_piece(0xFF)), kReplacement);  // never valid
  EXPECT_EQ(detokenizer.flush(), "");
}

TEST_F(TinyDetokenizerTest, LeadingSpaceDroppedAfterBosAndKeptAfterText) {
  const auto prompt = encode(*tokenizer_, "Once upon a time", /*add_bos=*/true);
  const auto generated = encode(*tokenizer_, "the cat saw a dog", /*add_bos=*/false);
  ASSERT_EQ(tokenizer_->token_bytes(generated.front()).front(), ' ');

  EXPECT_EQ(join(detokenize(*tokenizer_, bos(), generated)), "the cat saw a dog");
  EXPECT_EQ(join(detokenize(*tokenizer_, kNoPrompt, generated)), "the cat saw a dog");

  // After a prompt ending in text, the deltas are exactly what decoding the
  // whole sequence adds to the prompt's own text.
  const std::string streamed = join(detokenize(*tokenizer_, prompt.back(), generated));
  EXPECT_EQ(streamed, " the cat saw a dog");
  std::vector<int32_t> whole = prompt;
  whole.insert(whole.end(), generated.begin(), generated.end());
  EXPECT_EQ(decode(*tokenizer_, prompt) + streamed, decode(*tokenizer_, whole));
}

TEST_F(TinyDetokenizerTest, ControlTokensEmitNothingAndKeepTheSpaceRule) {
  IncrementalDetokenizer detokenizer = after_bos();
  EXPECT_EQ(detokenizer.push(tokenizer_->eos_id()), "");
  EXPECT_EQ(detokenizer.push(word("the")), "the");  // still the first visible piece
  EXPECT_EQ(detokenizer.push(bos()), "");
  EXPECT_EQ(detokenizer.push(word("and")), " and");
}

// Random token streams, stray bytes included, still give valid UTF-8 at every
// step and agree with sentencepiece's decode of the whole.
TEST_F(TinyDetokenizerTest, RandomStreamsAgreeWithDecode) {
  std::mt19937 rng(7);
  // Skip <unk> (sentencepiece shows it as " ⁇ ", the stream as nothing) and
  // <0x20> (sentencepiece never strips a byte piece's space).
  std::uniform_int_distribution<int32_t> pick(1, tokenizer_->vocab_size() - 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> ids;
    while (ids.size() < 12) {
      const int32_t id = pick(rng);
      if (id != byte_piece(' ')) ids.push_back(id);
    }
    EXPECT_EQ(join(detokenize(*tokenizer_, bos(), ids)), decode(*tokenizer_, ids))
        << "trial " << trial;
  }
}

// ---- utf8_complete_prefix ----------------------------------------------------

TEST(Utf8CompletePrefixTest, StopsBeforeIncompleteOrInvalidSequences) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a你"), 4u);
  EXPECT_EQ(utf8_complete_prefix("a\xE4\xBD"), 1u);         // 2 of 3 bytes
  EXPECT_EQ(utf8_complete_prefix("ok\xF0\x9F\x98"), 2u);    // 3 of 4 bytes
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98\x80"), 4u);  // 😀
  EXPECT_EQ(utf8_complete_prefix("x\xC0\xAF"), 1u);
  EXPECT_EQ(utf8_complete_prefix("x\xE0\x80\xAF"), 1u);      // overlong '/'
  EXPECT_EQ(utf8_complete_prefix("x\xED\xA0\x80"), 1u);      // a surrogate
  EXPECT_EQ(utf8_complete_prefix("x\xF4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(utf8_complete_prefix("x\xBF"), 1u);              // stray continuation
}

}  // namespace
}  // namespace pvllm
