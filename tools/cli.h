// Shared declarations of the pvllm command. The command uses only the
// public C ABI (pvllm/pvllm.h), through its C++ header pvllm/pvllm.hpp: it
// is the first client of libpvllm.
#pragma once

#include <CLI/CLI.hpp>
#include <pvllm/pvllm.hpp>
#include <string>
#include <vector>

namespace pvllm_cli {

// Registers the `generate` subcommand. When the command line selects it,
// app.parse() runs it and stores its exit status in *exit_code.
void add_generate_command(CLI::App& app, int* exit_code);

// Registers the `inspect` subcommand, likewise.
void add_inspect_command(CLI::App& app, int* exit_code);
// A GGUF file's parts, metadata, tensor table and type totals (inspect_gguf.cc).
int print_gguf_header(const std::string& path);

// Registers the `convert` subcommand (tools/convert.cc), likewise. It uses
// the core model library directly.
void add_convert_command(CLI::App& app, int* exit_code);

// Registers the `bench` subcommand (tools/bench.cc), likewise.
void add_bench_command(CLI::App& app, int* exit_code);

// Registers the `tokenize` and `detokenize` subcommands (tools/tokenize.cc),
// likewise. They use the core tokenizer library directly.
void add_tokenize_commands(CLI::App& app, int* exit_code);
// Registers `chat-template` (tools/chat_template.cc) and `chat`
// (tools/chat.cc), likewise.
void add_chat_template_command(CLI::App& app, int* exit_code);
void add_chat_command(CLI::App& app, int* exit_code);

// The help of a positional model path: any path `generate` takes.
inline constexpr const char* kModelPathOption =
    "A model: a Hugging Face folder, a llama2.c .bin with its tokenizer beside it, a .pvllm "
    "file, a folder holding one .bin or .pvllm file; or a tokenizer.model / tokenizer.json "
    "file or its folder";

// The help of --device.
inline constexpr const char* kDeviceOption =
    "Device: auto (CUDA when an NVIDIA GPU, its driver and libpvllm_cuda.so are there, else "
    "the CPU), cpu, cuda or cuda:N";

// The text of a file, or of stdin for "-"; false (with a message) when it
// cannot be read.
bool read_text_input(const std::string& file, std::string* out);
// --var key=json options as one JSON object text; false (with a message)
// for a malformed one. The values are checked when the object is parsed.
bool vars_to_json(const std::vector<std::string>& vars, std::string* out);

// --dtype: adds the option (auto, bf16, fp16 or fp32: the GPU's weight,
// activation and K/V type) to `cmd` in `group`, storing the name in *name;
// dtype_value turns a name it accepted into a pvllm_dtype.
void add_dtype_option(CLI::App* cmd, std::string* name, const char* group = nullptr);
int32_t dtype_value(const std::string& name);

// --quantize: adds the option (a scheme of pvllm_engine_params.quantize; the
// library checks the name) to `cmd` in `group`, storing it in *scheme;
// quantize_value is the field's value (NULL for none).
void add_quantize_option(CLI::App* cmd, std::string* scheme, const char* group = nullptr);
inline const char* quantize_value(const std::string& scheme) {
  return scheme.empty() ? nullptr : scheme.c_str();
}

// --speculative, --speculative-tokens, --ngram-min, --ngram-max:
// speculative decoding's engine options (docs/speculative.md), added to
// `cmd` in `group`; apply_speculative writes them into *params (the
// library checks the values).
struct SpeculativeFlags {
  std::string method = "off";  // off or ngram
  int32_t tokens = 4;
  int32_t ngram_min = 1;
  int32_t ngram_max = 4;
};
void add_speculative_options(CLI::App* cmd, SpeculativeFlags* flags, const char* group = nullptr);
void apply_speculative(const SpeculativeFlags& flags, pvllm_engine_params* params);

// --kv-cache-dtype: adds the option (what the KV cache stores: auto, f32,
// f16, bf16, int8 or fp8_e4m3, case-insensitive, with the aliases fp32, fp16
// and fp8 of core/kv/kv_cache_dtype.h) to `cmd` in `group`, storing the name
// in *name; an unknown name is a usage error listing the names. Whether the
// device serves it is the engine's to say. kv_cache_dtype_value turns a name
// it accepted into a pvllm_kv_cache_dtype; kv_cache_dtype_label is its
// canonical name ("f16" for "FP16").
void add_kv_cache_dtype_option(CLI::App* cmd, std::string* name, const char* group = nullptr);
int32_t kv_cache_dtype_value(const std::string& name);
// The check of one name, for options that take a list.
CLI::Validator kv_cache_dtype_validator();
std::string kv_cache_dtype_label(const std::string& name);
// The help of --kv-cache-dtype.
inline constexpr const char* kKvCacheDtypeOption =
    "What the KV cache stores: auto (f32 on the CPU, --dtype on CUDA), f32, f16, bf16, int8 "
    "(one fp16 scale per token and kv head) or fp8_e4m3 (CUDA only)";

// Load progress on stderr (tools/progress.cc): on a terminal one line that
// redraws itself; otherwise one line per stage. `state` must outlive the
// engine's creation.
struct LoadProgress {
  bool tty = false;
  std::string last_stage;
};
void show_load_progress(pvllm_engine_params* params, LoadProgress* state);

// Prints "pvllm: <what>: <message> (<status name>)" to stderr and returns
// the exit status for a failure (1).
int report_error(const std::string& what, const pvllm::cxx::Error& error);

}  // namespace pvllm_cli
