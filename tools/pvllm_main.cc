// pvllm: the command-line front end. Subcommands live in their own files;
// this one wires them together and owns --version.
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "core/kv/kv_cache_dtype.h"

namespace pvllm_cli {

void add_dtype_option(CLI::App* cmd, std::string* name, const char* group) {
  CLI::Option* opt =
      cmd->add_option("--dtype", *name,
                      "GPU weights, activations and K/V: auto (bf16, fp16 for fp16 checkpoints), "
                      "bf16, fp16 or fp32 (IEEE, no TF32; the CPU computes in fp32 whatever "
                      "this says)")
          ->check(CLI::IsMember({"auto", "bf16", "fp16", "fp32"}))
          ->capture_default_str();
  if (group != nullptr) opt->group(group);
}

void add_quantize_option(CLI::App* cmd, std::string* scheme, const char* group) {
  CLI::Option* opt = cmd->add_option(
      "--quantize", *scheme,
      "Quantize the weight matrices while loading, as llama-quantize would: q8_0, q4_0, q4_1, "
      "q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs, q4_k_m or q5_k_m (quantized "
      "weights run on the CPU)");
  opt->type_name("SCHEME");
  if (group != nullptr) opt->group(group);
}

void add_speculative_options(CLI::App* cmd, SpeculativeFlags* flags, const char* group) {
  std::vector<CLI::Option*> opts = {
      cmd->add_option("--speculative", flags->method,
                      "Speculative decoding: off, or ngram (prompt lookup: propose what followed "
                      "the latest earlier occurrence of the output's tail; greedy output is the "
                      "same, sampled output keeps its distribution)")
          ->check(CLI::IsMember({"off", "ngram"}))
          ->capture_default_str(),
      cmd->add_option("--speculative-tokens", flags->tokens,
                      "Proposals verified per decode step (1..16)")
          ->capture_default_str(),
      cmd->add_option("--ngram-min", flags->ngram_min, "Shortest tail prompt lookup matches")
          ->capture_default_str(),
      cmd->add_option("--ngram-max", flags->ngram_max, "Longest tail prompt lookup matches")
          ->capture_default_str()};
  if (group != nullptr) {
    for (CLI::Option* opt : opts) opt->group(group);
  }
}

void apply_speculative(const SpeculativeFlags& flags, pvllm_engine_params* params) {
  params->speculative = flags.method.c_str();
  params->speculative_tokens = flags.tokens;
  params->ngram_min = flags.ngram_min;
  params->ngram_max = flags.ngram_max;
}

int32_t dtype_value(const std::string& name) {
  if (name == "bf16") return PVLLM_DTYPE_BF16;
  if (name == "fp16") return PVLLM_DTYPE_FP16;
  if (name == "fp32") return PVLLM_DTYPE_FP32;
  return PVLLM_DTYPE_AUTO;
}

void add_kv_cache_dtype_option(CLI::App* cmd, std::string* name, const char* group) {
  CLI::Option* opt = cmd->add_option("--kv-cache-dtype", *name, kKvCacheDtypeOption)
                         ->check(kv_cache_dtype_validator())
                         ->capture_default_str();
  opt->type_name("DTYPE");
  if (group != nullptr) opt->group(group);
}

int32_t kv_cache_dtype_value(const std::string& name) {
  pvllm::KvCacheDtype dtype = pvllm::KvCacheDtype::kAuto;
  (void)pvllm::parse_kv_cache_dtype(name, &dtype);  // checked by the option
  return static_cast<int32_t>(dtype);
}

std::string kv_cache_dtype_label(const std::string& name) {
  return pvllm::kv_cache_dtype_name(static_cast<pvllm::KvCacheDtype>(kv_cache_dtype_value(name)));
}

CLI::Validator kv_cache_dtype_validator() {
  return CLI::Validator(
      [](std::string& name) {
        pvllm::KvCacheDtype dtype;
        const pvllm::Status status = pvllm::parse_kv_cache_dtype(name, &dtype);
        return status.ok() ? std::string() : status.message();
      },
      "DTYPE");
}

int report_error(const std::string& what, const pvllm::cxx::Error& error) {
  std::fprintf(stderr, "pvllm: %s: %s (%s)\n", what.c_str(), error.what(), error.status_name());
  return 1;
}

}  // namespace pvllm_cli

int main(int argc, char** argv) {
  CLI::App app{
      "pvllm: run Llama-family language models (Llama 2 and 3, Mistral, Qwen2 and 3, "
      "TinyLlama) with a paged KV cache and continuous batching, on the CPU or an NVIDIA "
      "GPU.\n"
      "\n"
      "Devices: --device auto (the default) runs on CUDA when the machine has an NVIDIA GPU "
      "and driver and libpvllm_cuda.so sits beside libpvllm (built when nvcc is found), "
      "else on the CPU; --device cpu, cuda or cuda:N picks one.\n"
      "\n"
      "Models: a Hugging Face folder (config.json, *.safetensors, tokenizer.model or "
      "tokenizer.json), a llama2.c .bin with its tokenizer beside it, a .pvllm file "
      "(pvllm convert), or a folder holding one .bin or .pvllm file. models/stories260K "
      "in the source tree is a real 1 MB model to try.",
      "pvllm"};
  app.set_version_flag("--version",
                       std::string("pvllm ") + pvllm_version() + " (ABI " +
                           std::to_string(pvllm_abi_version()) + ")",
                       "Print the library version and exit");
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  pvllm generate --model models/stories260K --prompt \"Once upon a time\"\n"
      "  pvllm generate --model models/TinyLlama-1.1B --device cuda --prompt \"Hello\"\n"
      "  pvllm inspect models/TinyLlama-1.1B\n"
      "  pvllm convert models/TinyLlama-1.1B tinyllama.pvllm --dtype bf16\n"
      "  pvllm bench --model tiny8k --workload chat --kv-allocator both\n"
      "  pvllm tokenize models/stories260K --text \"Hello world\"\n"
      "  pvllm chat models/TinyLlama-1.1B-Chat --temperature 0.7\n"
      "\n"
      "Run `pvllm <command> --help` for the options of one command.");

  int exit_code = 0;
  pvllm_cli::add_generate_command(app, &exit_code);
  pvllm_cli::add_inspect_command(app, &exit_code);
  pvllm_cli::add_convert_command(app, &exit_code);
  pvllm_cli::add_bench_command(app, &exit_code);
  pvllm_cli::add_tokenize_commands(app, &exit_code);
  pvllm_cli::add_chat_template_command(app, &exit_code);
  pvllm_cli::add_chat_command(app, &exit_code);

  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
