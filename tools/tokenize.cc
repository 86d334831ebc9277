// `pvllm tokenize` and `pvllm detokenize`: text to ids and back with the
// tokenizer of a model folder (tokenizer.model or tokenizer.json) or a
// tokenizer file. These two use the core tokenizer library directly: no
// engine (and no weights) is needed to tokenize.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm_cli {
namespace {

struct TokenizeOptions {
  std::string path;
  std::string text;
  bool text_given = false;
  bool json = false;
  bool no_special = false;
};

int fail(const char* command, const pvllm::Status& status) {
  std::fprintf(stderr, "pvllm: %s: %s (%s)\n", command, status.message().c_str(),
               pvllm_status_to_string(static_cast<pvllm_status>(status.code())));
  return 1;
}

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

int run_tokenize(const TokenizeOptions& options) {
  std::unique_ptr<pvllm::Tokenizer> tokenizer;
  pvllm::Status status = pvllm::Tokenizer::load(options.path, &tokenizer);
  if (!status.ok()) return fail("tokenize", status);
  const std::string text = options.text_given ? options.text : read_stdin();
  std::vector<int32_t> ids;
  status = tokenizer->encode(text, !options.no_special, &ids);
  if (!status.ok()) return fail("tokenize", status);
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
// integers.
pvllm::Status parse_ids(const std::string& input, std::vector<int32_t>* ids) {
  const size_t first = input.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (input[first] == '[' || input[first] == '{')) {
    const auto parsed = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* list = &parsed;
    if (parsed.is_object() && parsed.contains("ids")) list = &parsed["ids"];
    if (parsed.is_discarded() || !list->is_array()) {
      return pvllm::InvalidArgument(
          "the input is neither a JSON array of ids nor {\"ids\": [...]}");
    }
    for (const auto& id : *list) {
      if (!id.is_number_integer()) {
        return pvllm::InvalidArgument("the JSON ids hold " + id.dump() + ", not an integer");
      }
      ids->push_back(id.get<int32_t>());
    }
    return pvllm::Status::Ok();
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
    if (used != word.size()) return pvllm::InvalidArgument("\"" + word + "\" is not a token id");
    ids->push_back(static_cast<int32_t>(value));
  }
  return pvllm::Status::Ok();
}

int run_detokenize(const std::string& path) {
  std::unique_ptr<pvllm::Tokenizer> tokenizer;
  pvllm::Status status = pvllm::Tokenizer::load(path, &tokenizer);
  if (!status.ok()) return fail("detokenize", status);
  std::vector<int32_t> ids;
  status = parse_ids(read_stdin(), &ids);
  if (!status.ok()) return fail("detokenize", status);
  std::string text;
  status = tokenizer->decode(ids, &text);
  if (!status.ok()) return fail("detokenize", status);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "Print the token ids of a text (from --text or standard input)");
  tokenize
      ->add_option("path", options->path,
                   "A model folder, or a tokenizer.model / tokenizer.json file or its folder")
      ->required();
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
  detokenize
      ->add_option("path", *path,
                   "A model folder, or a tokenizer.model / tokenizer.json file or its folder")
      ->required();
  detokenize->callback([path, exit_code]() { *exit_code = run_detokenize(*path); });
}

}  // namespace pvllm_cli
