// Encoding throughput of the tokenizer.json tokenizer on English text, one
// thread (run by hand):
//
//   tokenizer_bench [FOLDER] [--mb N]
//
// FOLDER holds the reference tokenizer packages (default
// $PVLLM_REFERENCE_TOKENIZERS, see scripts/reference/install.sh). The text
// is N MB (default 4) of English-like prose: words drawn with Zipf
// frequencies from a list of 20000 (real English words then made-up ones),
// sentences, commas, numbers and paragraphs, so the word cache sees the
// repeats and the misses real text has. Prints MB/s for the Llama 3 and
// Qwen3 tokenizers: a first pass from an empty cache, then a second pass.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace {

const char* const kCommonWords[] = {
    "the",    "of",      "and",      "to",        "a",      "in",     "is",      "you",
    "that",   "it",      "he",       "was",       "for",    "on",     "are",     "as",
    "with",   "his",     "they",     "I",         "at",     "be",     "this",    "have",
    "from",   "or",      "one",      "had",       "by",     "word",   "but",     "not",
    "what",   "all",     "were",     "we",        "when",   "your",   "can",     "said",
    "there",  "use",     "an",       "each",      "which",  "she",    "do",      "how",
    "their",  "if",      "will",     "up",        "other",  "about",  "out",     "many",
    "then",   "them",    "these",    "so",        "some",   "her",    "would",   "make",
    "like",   "him",     "into",     "time",      "has",    "look",   "two",     "more",
    "write",  "go",      "see",      "number",    "no",     "way",    "could",   "people",
    "my",     "than",    "first",    "water",     "been",   "call",   "who",     "oil",
    "its",    "now",     "find",     "long",      "down",   "day",    "did",     "get",
    "come",   "made",    "may",      "part",      "over",   "new",    "sound",   "take",
    "only",   "little",  "work",     "know",      "place",  "year",   "live",    "me",
    "back",   "give",    "most",     "very",      "after",  "thing",  "our",     "just",
    "name",   "good",    "sentence", "man",       "think",  "say",    "great",   "where",
    "help",   "through", "much",     "before",    "line",   "right",  "too",     "mean",
    "old",    "any",     "same",     "tell",      "boy",    "follow", "came",    "want",
    "show",   "also",    "around",   "form",      "three",  "small",  "set",     "put",
    "end",    "does",    "another",  "well",      "large",  "must",   "big",     "even",
    "such",   "because", "turn",     "here",      "why",    "ask",    "went",    "men",
    "read",   "need",    "land",     "different", "home",   "us",     "move",    "try",
    "kind",   "hand",    "picture",  "again",     "change", "off",    "play",    "spell",
    "air",    "away",    "animal",   "house",     "point",  "page",   "letter",  "mother",
    "answer", "found",   "study",    "still",     "learn",  "should", "America", "world"};

// A made-up lower-case word of 2..11 letters.
std::string made_up_word(std::mt19937& rng) {
  static const char* const kSyllables[] = {"ka", "ti", "ro", "ne", "sa", "lu", "mi", "po",
                                           "re", "an", "st", "th", "er", "in", "ou", "ch"};
  std::uniform_int_distribution<int> count(1, 5), pick(0, 15);
  std::string word;
  for (int i = count(rng); i > 0; --i) word += kSyllables[pick(rng)];
  return word;
}

std::string english_like_text(size_t num_bytes) {
  std::mt19937 rng(2024);
  std::vector<std::string> words(std::begin(kCommonWords), std::end(kCommonWords));
  while (words.size() < 20000) words.push_back(made_up_word(rng));
  // Zipf weights 1/rank.
  std::vector<double> weights(words.size());
  for (size_t i = 0; i < words.size(); ++i) weights[i] = 1.0 / static_cast<double>(i + 1);
  std::discrete_distribution<size_t> pick_word(weights.begin(), weights.end());
  std::uniform_int_distribution<int> sentence_length(5, 25), percent(0, 99);
  std::string text;
  text.reserve(num_bytes + 256);
  while (text.size() < num_bytes) {
    const int length = sentence_length(rng);
    for (int i = 0; i < length; ++i) {
      std::string word = words[pick_word(rng)];
      if (i == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      if (percent(rng) < 3) word = std::to_string(rng() % 100000);
      text += word;
      if (i + 1 < length) text += percent(rng) < 8 ? ", " : " ";
    }
    text += percent(rng) < 85 ? ". " : (percent(rng) < 50 ? "?\n\n" : ".\n\n");
  }
  return text;
}

double encode_mb_per_s(const pvllm::Tokenizer& tokenizer, const std::string& text,
                       size_t* num_tokens) {
  // Paragraph-sized calls, as prompts arrive.
  const size_t chunk = 4096;
  std::vector<int32_t> ids;
  *num_tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.size(), pos + chunk);
    while (end < text.size() && text[end] != ' ') ++end;  // whole words
    const pvllm::Status status =
        tokenizer.encode(std::string_view(text).substr(pos, end - pos), false, &ids);
    if (!status.ok()) {
      std::fprintf(stderr, "tokenizer_bench: encode failed: %s\n", status.message().c_str());
      std::exit(1);
    }
    *num_tokens += ids.size();
    pos = end;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(text.size()) / 1e6 / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::string folder = std::getenv("PVLLM_REFERENCE_TOKENIZERS") != nullptr
                           ? std::getenv("PVLLM_REFERENCE_TOKENIZERS")
                           : "";
  double megabytes = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mb" && i + 1 < argc) {
      megabytes = std::atof(argv[++i]);
    } else {
      folder = arg;
    }
  }
  if (folder.empty() || megabytes <= 0) {
    std::fprintf(stderr,
                 "usage: tokenizer_bench [FOLDER] [--mb N]  (FOLDER defaults to "
                 "$PVLLM_REFERENCE_TOKENIZERS)\n");
    return 2;
  }
  const std::string text = english_like_text(static_cast<size_t>(megabytes * 1e6));
  std::printf("%.1f MB of English-like text, one thread\n", text.size() / 1e6);
  for (const char* name : {"llama3", "qwen3"}) {
    std::unique_ptr<pvllm::Tokenizer> tokenizer;
    const std::string path = folder + "/tokenizer-" + name + "/models";
    const auto load_start = std::chrono::steady_clock::now();
    const pvllm::Status status = pvllm::Tokenizer::load(path, &tokenizer);
    if (!status.ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", status.message().c_str());
      return 1;
    }
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    size_t num_tokens = 0;
    const double cold = encode_mb_per_s(*tokenizer, text, &num_tokens);
    const double warm = encode_mb_per_s(*tokenizer, text, &num_tokens);
    std::printf(
        "%-7s load %.2f s  encode %6.2f MB/s (empty cache)  %6.2f MB/s (warm)  "
        "%.2f bytes/token\n",
        name, load_s, cold, warm, static_cast<double>(text.size()) / num_tokens);
  }
  return 0;
}
