// The tiny test tokenizer: a small sentencepiece BPE model with byte
// fallback, trained once per process on a built-in corpus so tests need no
// downloaded files.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

// Over the 259 byte and special pieces, room for the corpus's characters
// and a few dozen merges; trains without "vocab too large" on this corpus.
constexpr int kTinyVocabSize = 384;

// A few hundred short English sentences built from fixed word lists (so the
// corpus, and hence the model, is the same every run), plus a few lines of
// non-ASCII text.
std::vector<std::string> tiny_corpus() {
  const std::vector<std::string> subjects = {"the cat",  "a little dog", "Lily",
                                             "Tom",      "the old man",  "my friend",
                                             "the bird", "a happy girl"};
  const std::vector<std::string> verbs = {"saw",         "liked",  "found",
                                          "played with", "wanted", "looked at"};
  const std::vector<std::string> objects = {"a red ball",  "the big tree", "some cake",
                                            "a small box", "the blue sky", "her toy"};
  const std::vector<std::string> endings = {" in the park.", " at home.", " every day.",
                                            " and smiled.",  "!",         " once upon a time."};
  std::vector<std::string> lines;
  size_t k = 0;
  for (const auto& s : subjects) {
    for (const auto& v : verbs) {
      for (const auto& o : objects) {
        std::string line = s + " " + v + " " + o + endings[k++ % endings.size()];
        line[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(line[0])));
        lines.push_back(std::move(line));
      }
    }
  }
  lines.push_back("Once upon a time, there was a naïve cat in a café.");
  lines.push_back("The café was warm and the naïve dog was happy.");
  lines.push_back("She said 你好 to her friend and smiled 😀.");
  lines.push_back("He wrote 123 456 789 on the box, then 42.");
  return lines;
}

std::string make_training_dir() { return make_temp_dir("pvllm_tiny_tok_"); }

std::string train_tiny_tokenizer() {
  const std::string dir = make_training_dir();
  const std::string corpus_path = dir + "/corpus.txt";
  {
    std::ofstream corpus(corpus_path);
    for (const auto& line : tiny_corpus()) corpus << line << "\n";
    if (!corpus) throw std::runtime_error("tiny tokenizer: cannot write " + corpus_path);
  }
  const std::unordered_map<std::string, std::string> args = {
      {"input", corpus_path},
      {"model_prefix", dir + "/tokenizer"},
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(kTinyVocabSize)},
      {"byte_fallback", "true"},
      // Every corpus character gets a piece; characters outside the corpus
      // (other CJK, other emoji) become byte-fallback pieces.
      {"character_coverage", "1.0"},
      // Like the Llama 2 tokenizer: text round-trips exactly, whitespace too.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", "1"},
      {"shuffle_input_sentence", "false"},
      {"minloglevel", "2"},
  };
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) {
    throw std::runtime_error("tiny tokenizer: training failed: " + status.ToString());
  }
  return dir + "/tokenizer.model";
}

struct TinyTokenizer {
  std::string path;
  int32_t vocab_size = 0;
  // The training folder goes away with the process.
  ~TinyTokenizer() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(std::filesystem::path(path).parent_path(), ec);
  }
};

const TinyTokenizer& tiny_tokenizer() {
  static std::once_flag once;
  static TinyTokenizer tokenizer;
  std::call_once(once, [] {
    tokenizer.path = train_tiny_tokenizer();
    sentencepiece::SentencePieceProcessor sp;
    const auto status = sp.Load(tokenizer.path);
    if (!status.ok()) {
      throw std::runtime_error("tiny tokenizer: cannot reload " + tokenizer.path + ": " +
                               status.ToString());
    }
    tokenizer.vocab_size = sp.GetPieceSize();
  });
  return tokenizer;
}

}  // namespace

std::string tiny_tokenizer_path() { return tiny_tokenizer().path; }

int32_t tiny_tokenizer_vocab_size() { return tiny_tokenizer().vocab_size; }

}  // namespace pvllm::testing
