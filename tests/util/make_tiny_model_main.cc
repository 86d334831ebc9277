// pvllm_make_tiny_model DIR [options]: writes a tiny random-weight Hugging
// Face model (and its tokenizer) into DIR, for demos and benchmarks on
// machines without a real checkpoint. The defaults make the demo model;
// the memory benchmarks use a long context, e.g.
//   pvllm_make_tiny_model DIR --max-position 8192 --hidden 64 --layers 2
// --arch NAME writes one of the named architecture variants instead
// (tests/util/tiny_model.h: llama2, llama3, mistral, qwen2, qwen3, ...), and
// --arch all writes every one into DIR/NAME: the folders the transformers
// reference (scripts/hf_reference/arch_goldens.py) reads.
// --tokenizer DIR serves a real tokenizer.json (with the
// tokenizer_config.json beside it) instead of the tiny sentencepiece one:
// the vocabulary is then that tokenizer's (scripts/structured_check.sh).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/util/pvllm_file_edit.h"
#include "tests/util/tiny_model.h"

namespace {

// The id of special token `field` ("bos_token", "eos_token") of
// tokenizer_config.json, looked up in tokenizer.json; null when absent.
nlohmann::json special_id(const nlohmann::json& tok, const nlohmann::json& config,
                          const char* field) {
  if (!config.contains(field) || config[field].is_null()) return nullptr;
  const nlohmann::json& v = config[field];
  const std::string name = v.is_string() ? v.get<std::string>() : v.value("content", "");
  for (const auto& added : tok.value("added_tokens", nlohmann::json::array())) {
    if (added.value("content", "") == name) return added.at("id");
  }
  const nlohmann::json& vocab = tok.at("model").at("vocab");
  return vocab.contains(name) ? vocab[name] : nlohmann::json(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes a tiny random-weight Hugging Face model into DIR.", "pvllm_make_tiny_model"};
  std::string dir;
  std::string arch;
  pvllm::testing::TinyModelSpec spec;
  spec.hidden_size = 64;
  spec.num_layers = 2;
  spec.max_position_embeddings = 512;
  app.add_option("dir", dir, "Output folder (created)")->required();
  std::string arch_help = "A named architecture variant instead of the options below, or all:";
  for (const std::string& name : pvllm::testing::tiny_arch_names()) arch_help += " " + name;
  app.add_option("--arch", arch, arch_help);
  app.add_option("--max-position", spec.max_position_embeddings,
                 "max_position_embeddings (the context)")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  app.add_option("--hidden", spec.hidden_size, "hidden_size (a multiple of --heads)")
      ->capture_default_str()
      ->check(CLI::Range(8, 8192));
  app.add_option("--intermediate", spec.intermediate_size, "intermediate_size")
      ->capture_default_str()
      ->check(CLI::Range(8, 32768));
  app.add_option("--layers", spec.num_layers, "num_hidden_layers")
      ->capture_default_str()
      ->check(CLI::Range(1, 128));
  app.add_option("--heads", spec.num_heads, "num_attention_heads")
      ->capture_default_str()
      ->check(CLI::Range(1, 128));
  app.add_option("--kv-heads", spec.num_kv_heads, "num_key_value_heads (divides --heads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 128));
  app.add_option("--seed", spec.seed, "Weight seed")->capture_default_str();
  std::string tokenizer;
  app.add_option("--tokenizer", tokenizer,
                 "A folder with tokenizer.json (and tokenizer_config.json) to serve instead of "
                 "the tiny tokenizer; the vocabulary becomes its size");
  std::string pvllm_file;
  app.add_option("--pvllm", pvllm_file,
                 "Also convert the folder into this .pvllm file (packed, dtypes kept)");
  CLI11_PARSE(app, argc, argv);
  namespace fs = std::filesystem;
  if (!tokenizer.empty()) {
    std::ifstream in(fs::path(tokenizer) / "tokenizer.json");
    if (!in) {
      std::fprintf(stderr, "pvllm_make_tiny_model: no tokenizer.json in %s\n", tokenizer.c_str());
      return 2;
    }
    // One past the largest id of the model's vocabulary and added tokens.
    const nlohmann::json tok = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!tok.is_object() || !tok.contains("model") || !tok["model"].contains("vocab") ||
        !tok["model"]["vocab"].is_object()) {
      std::fprintf(stderr, "pvllm_make_tiny_model: %s/tokenizer.json has no model.vocab object\n",
                   tokenizer.c_str());
      return 2;
    }
    int64_t size = 0;
    for (const auto& [piece, id] : tok["model"]["vocab"].items()) {
      if (id.is_number_integer()) size = std::max<int64_t>(size, id.get<int64_t>() + 1);
    }
    for (const auto& added : tok.value("added_tokens", nlohmann::json::array())) {
      if (added.is_object() && added.contains("id") && added["id"].is_number_integer()) {
        size = std::max<int64_t>(size, added["id"].get<int64_t>() + 1);
      }
    }
    if (size <= 0 || size > (int64_t{1} << 22)) {
      std::fprintf(stderr, "pvllm_make_tiny_model: %s/tokenizer.json: vocabulary size %lld\n",
                   tokenizer.c_str(), static_cast<long long>(size));
      return 2;
    }
    spec.vocab_size = static_cast<int32_t>(size);
  }
  if (!arch.empty()) {
    const auto& names = pvllm::testing::tiny_arch_names();
    if (arch != "all" && std::find(names.begin(), names.end(), arch) == names.end()) {
      std::fprintf(stderr, "pvllm_make_tiny_model: unknown --arch %s\n", arch.c_str());
      return 2;
    }
    for (const std::string& name : names) {
      if (arch != "all" && name != arch) continue;
      const std::string out = arch == "all" ? (fs::path(dir) / name).string() : dir;
      fs::create_directories(out);
      std::printf(
          "%s\n",
          pvllm::testing::write_tiny_hf_model(out, pvllm::testing::tiny_arch_spec(name)).c_str());
    }
    return 0;
  }
  if (spec.hidden_size % spec.num_heads != 0 || spec.num_heads % spec.num_kv_heads != 0) {
    std::fprintf(stderr,
                 "pvllm_make_tiny_model: --hidden must be a multiple of --heads, "
                 "and --heads a multiple of --kv-heads\n");
    return 2;
  }
  fs::create_directories(dir);
  std::printf("%s\n", pvllm::testing::write_tiny_hf_model(dir, spec).c_str());
  if (!tokenizer.empty()) {
    fs::remove(fs::path(dir) / "tokenizer.model");
    std::ifstream tok_in(fs::path(tokenizer) / "tokenizer.json");
    std::ifstream config_in(fs::path(tokenizer) / "tokenizer_config.json");
    const nlohmann::json tok = nlohmann::json::parse(tok_in, nullptr, false);
    nlohmann::json config =
        config_in ? nlohmann::json::parse(config_in, nullptr, false) : nlohmann::json::object();
    if (!config.is_object()) config = nlohmann::json::object();  // no BOS/EOS names then
    pvllm::testing::edit_hf_config(dir, {{"bos_token_id", special_id(tok, config, "bos_token")},
                                         {"eos_token_id", special_id(tok, config, "eos_token")}});
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      if (fs::exists(fs::path(tokenizer) / name)) {
        fs::copy_file(fs::path(tokenizer) / name, fs::path(dir) / name,
                      fs::copy_options::overwrite_existing);
      }
    }
  }
  if (!pvllm_file.empty()) {
    try {
      pvllm::testing::convert_model(dir, pvllm_file);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pvllm_make_tiny_model: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
