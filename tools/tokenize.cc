// `pvllm tokenize` and `pvllm detokenize`: text to ids and back with the
// tokenizer of any model path `generate` takes, or of a tokenizer file,
// through pvllm_tokenizer (no engine, no weights).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"

namespace pvllm_cli {
namespace {

struct TokenizeOptions {
  std::string path;
  std::string text;
  bool text_given = false;
  bool json = false;
  bool no_special = false;
};

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

int run_tokenize(const TokenizeOptions& options) {
  std::vector<int32_t> ids;
  try {
    const auto tokenizer = pvllm::cxx::Tokenizer::open(options.path);
    const std::string text = options.text_given ? options.text : read_stdin();
    ids = tokenizer.encode(text, !options.no_special);
  } catch (const pvllm::cxx::Error& e) {
    return report_error("tokenize", e);
  }
  if (options.json) {
    std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i > 0 ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

// Ids as a JSON array, a JSON object {"ids": [...]}, or whitespace-separated
// integers; false with a message on stderr for anything else.
bool parse_ids(const std::string& input, std::vector<int32_t>* ids) {
  const size_t first = input.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (input[first] == '[' || input[first] == '{')) {
    const auto parsed = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* list = &parsed;
    if (parsed.is_object() && parsed.contains("ids")) list = &parsed["ids"];
    if (parsed.is_discarded() || !list->is_array()) {
      std::fprintf(stderr,
                   "pvllm: detokenize: the input is neither a JSON array of ids nor "
                   "{\"ids\": [...]}\n");
      return false;
    }
    for (const auto& id : *list) {
      if (!id.is_number_integer()) {
        std::fprintf(stderr, "pvllm: detokenize: the JSON ids hold %s, not an integer\n",
                     id.dump().c_str());
        return false;
      }
      ids->push_back(id.get<int32_t>());
    }
    return true;
  }
  std::istringstream words(input);
  for (std::string word; words >> word;) {
    size_t used = 0;
    long value = 0;
    try {
      value = std::stol(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) {
      std::fprintf(stderr, "pvllm: detokenize: \"%s\" is not a token id\n", word.c_str());
      return false;
    }
    ids->push_back(static_cast<int32_t>(value));
  }
  return true;
}

int run_detokenize(const std::string& path) {
  std::string text;
  try {
    const auto tokenizer = pvllm::cxx::Tokenizer::open(path);
    std::vector<int32_t> ids;
    if (!parse_ids(read_stdin(), &ids)) return 1;
    text = tokenizer.decode(ids);
  } catch (const pvllm::cxx::Error& e) {
    return report_error("detokenize", e);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "Print the token ids of a text (from --text or standard input)");
  tokenize->footer(
      "Example:\n"
      "  pvllm tokenize models/stories260K --text \"Hello world\"");
  tokenize->add_option("path", options->path, kModelPathOption)->required();
  tokenize->add_option("--text", options->text, "The text (default: standard input)");
  tokenize->add_flag("--json", options->json, "Print {\"ids\": [...]} instead of plain ids");
  tokenize->add_flag("--no-special", options->no_special,
                     "Add no special tokens (no BOS); those written in the text still count");
  tokenize->callback([options, tokenize, exit_code]() {
    options->text_given = tokenize->count("--text") > 0;
    *exit_code = run_tokenize(*options);
  });

  auto path = std::make_shared<std::string>();
  CLI::App* detokenize = app.add_subcommand(
      "detokenize",
      "Print the text of token ids read from standard input (a JSON array, {\"ids\": [...]} or "
      "space-separated); special tokens are left out");
  detokenize->footer(
      "Example:\n"
      "  echo 1 403 407 | pvllm detokenize models/stories260K");
  detokenize->add_option("path", *path, kModelPathOption)->required();
  detokenize->callback([path, exit_code]() { *exit_code = run_detokenize(*path); });
}

}  // namespace pvllm_cli
