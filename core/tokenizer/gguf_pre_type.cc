// The tokenizer.ggml.pre values llama.cpp knows, with its split patterns.
#include "core/tokenizer/gguf_pre_type.h"

#include <nlohmann/json.hpp>

namespace pvllm {
namespace {

// llama.cpp's patterns (src/llama-vocab.cpp at the commit the references
// name). GPT-2's lacks the tokenizers library's final "\s+": the text it
// would match is left between matches, which is a piece of its own too.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3's, with the case-insensitive contractions spelled out.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's: Llama 3's with single digits.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Entry {
  std::vector<const char*> names;
  GgufPreType type;
};

const std::vector<Entry>& pre_types() {
  static const std::vector<Entry> table = {
      {{"", "default"},
       {{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, false, false}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {{kLlama3}, true, true}},
      {{"dbrx", "smaug-bpe"}, {{kLlama3}, false, false}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {{kQwen2}, false, false}},
      {{"gpt-2", "phi-2", "roberta-bpe", "jina-es", "jina-de", "jina-v1-en", "gigachat", "mpt",
        "olmo", "jais"},
       {{kGpt2}, false, false}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {{R"(\p{N})", kGpt2}, false, false}},
  };
  return table;
}

}  // namespace

Status find_gguf_pre_type(const std::string& pre, GgufPreType* out) {
  for (const Entry& entry : pre_types()) {
    for (const char* name : entry.names) {
      if (pre == name) {
        *out = entry.type;
        return Status::Ok();
      }
    }
  }
  return Unsupported("tokenizer.ggml.pre = \"" + pre +
                     "\" is not a pre-tokenizer this build implements (it knows default, "
                     "gpt-2, llama-bpe, qwen2, starcoder, dbrx and their aliases)");
}

Status make_gguf_pre_tokenizer(const GgufPreType& type, std::unique_ptr<PreTokenizer>* out) {
  nlohmann::json steps = nlohmann::json::array();
  for (const std::string& pattern : type.patterns) {
    steps.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", pattern}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
  }
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  const nlohmann::json config = {{"type", "Sequence"}, {"pretokenizers", steps}};
  return parse_pre_tokenizer(config, "tokenizer.ggml.pre", out);
}

}  // namespace pvllm
