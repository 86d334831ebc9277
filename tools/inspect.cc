// `pvllm inspect`: a model's config, its tensor table and what serving it
// would cost in memory — read from the files without loading weights.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "core/chat/chat_template.h"
#include "core/model/model_files.h"
#include "core/model/pvllm_file.h"

namespace pvllm_cli {
namespace {

struct InspectOptions {
  std::string model;
  std::string random_weights;  // a shape name instead of a model
  pvllm_engine_params engine;
  int64_t kv_cache_mb = 0;
  std::string quantize;                 // --quantize: the estimate counts the weights quantized
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype: the estimate counts its blocks
};

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < sizeof(units) / sizeof(units[0])) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return buf;
}

void print_config(const pvllm_model_config& c) {
  std::printf("config\n");
  std::printf("  architecture             %s\n", c.architecture);
  std::printf("  format                   %s\n", c.format);
  std::printf("  hidden_size              %d\n", c.hidden_size);
  std::printf("  intermediate_size        %d\n", c.intermediate_size);
  std::printf("  num_layers               %d\n", c.num_layers);
  std::printf("  num_heads                %d\n", c.num_heads);
  std::printf("  num_kv_heads             %d\n", c.num_kv_heads);
  std::printf("  head_dim                 %d\n", c.head_dim);
  std::printf("  vocab_size               %d\n", c.vocab_size);
  std::printf("  max_position_embeddings  %d\n", c.max_position_embeddings);
  std::printf("  rms_norm_eps             %g\n", static_cast<double>(c.rms_norm_eps));
  std::printf("  rope_theta               %g\n", static_cast<double>(c.rope_theta));
  std::printf("  tie_word_embeddings      %s\n", c.tie_word_embeddings ? "true" : "false");
  std::printf("  bos_token_id             %d\n", c.bos_token_id);
  std::printf("  eos_token_id             %d\n", c.eos_token_id);
  if (!PVLLM_STRUCT_HAS(&c, pvllm_model_config, stop_token_ids)) return;
  std::string stops;
  for (int32_t i = 0; i < c.num_stop_token_ids && i < 16; ++i) {
    stops += (i > 0 ? ", " : "") + std::to_string(c.stop_token_ids[i]);
  }
  if (c.num_stop_token_ids > 16) stops += ", ...";
  std::printf("  stop_token_ids           [%s] (end generation besides eos)\n", stops.c_str());
  static const char* const kRopeTypes[] = {"default", "linear", "llama3", "dynamic"};
  const bool known = c.rope_type >= 0 && c.rope_type < 4;
  std::printf("  rope_type                %s\n", known ? kRopeTypes[c.rope_type] : "unknown");
  if (c.rope_type != PVLLM_ROPE_DEFAULT) {
    std::printf("  rope_factor              %g\n", static_cast<double>(c.rope_factor));
  }
  if (c.rope_type == PVLLM_ROPE_LLAMA3) {
    std::printf("  rope_low_freq_factor     %g\n", static_cast<double>(c.rope_low_freq_factor));
    std::printf("  rope_high_freq_factor    %g\n", static_cast<double>(c.rope_high_freq_factor));
  }
  if (c.rope_type == PVLLM_ROPE_LLAMA3 || c.rope_type == PVLLM_ROPE_DYNAMIC) {
    std::printf("  rope_original_max_pos    %d\n", c.rope_original_max_position_embeddings);
  }
  if (c.sliding_window > 0) {
    std::printf("  sliding_window           %d\n", c.sliding_window);
  } else {
    std::printf("  sliding_window           none (full attention)\n");
  }
  std::printf("  qkv_bias                 %s\n", c.qkv_bias ? "true" : "false");
  std::printf("  o_bias                   %s\n", c.o_bias ? "true" : "false");
  std::printf("  qk_norm                  %s\n", c.qk_norm ? "true" : "false");
}

void print_tensors(const pvllm::cxx::ModelInfo& info) {
  const size_t num_tensors = info.num_tensors();
  std::printf("\ntensors (%zu)\n", num_tensors);
  std::printf("  %-48s %-5s %s\n", "name", "dtype", "shape");
  for (size_t i = 0; i < num_tensors; ++i) {
    const pvllm_tensor_info t = info.tensor(i);
    std::string shape = "[";
    for (int32_t d = 0; d < t.num_dims; ++d) {
      if (d > 0) shape += ", ";
      shape += std::to_string(t.shape[d]);
    }
    shape += "]";
    std::printf("  %-48s %-5s %s\n", t.name, t.dtype, shape.c_str());
  }
}

const char* tokenizer_kind_name(pvllm::EmbeddedTokenizer::Kind kind) {
  switch (kind) {
    case pvllm::EmbeddedTokenizer::Kind::kSentencePiece:
      return "sentencepiece tokenizer.model";
    case pvllm::EmbeddedTokenizer::Kind::kJson:
      return "tokenizer.json";
    case pvllm::EmbeddedTokenizer::Kind::kGguf:
      return "GGUF tokenizer metadata";
    case pvllm::EmbeddedTokenizer::Kind::kNone:
      break;
  }
  return "none";
}

// A .pvllm file's own header: version, provenance, what it carries and its
// tensor table with layouts, extents and checksums (docs/format.md).
int print_pvllm_header(const std::string& path) {
  pvllm::pvllm_format::FileHeader h;
  const pvllm::Status st = pvllm::pvllm_format::read_header(path, &h);
  if (!st.ok()) {
    std::fprintf(stderr, "pvllm: cannot read the .pvllm header: %s (%s)\n", st.message().c_str(),
                 pvllm_status_to_string(static_cast<pvllm_status>(st.code())));
    return 1;
  }
  std::printf("\npvllm file\n");
  std::printf("  format version           %u.%u\n", h.major_version, h.minor_version);
  std::printf("  file size                %s\n", human_bytes(h.file_size).c_str());
  std::printf("  header                   %" PRIu64 " bytes, data from offset %" PRIu64 "\n",
              h.header_size, h.data_offset);
  std::printf("  written by               %s\n", h.writer.c_str());
  std::printf("  source                   %s (%s)\n", h.source.c_str(),
              h.source_format == pvllm::ModelFormat::kLlama2c ? "llama2.c"
              : h.source_format == pvllm::ModelFormat::kGguf  ? "GGUF"
                                                              : "Hugging Face");
  std::printf("  tokenizer                %s, %zu bytes\n", tokenizer_kind_name(h.tokenizer.kind),
              h.tokenizer.data.size());
  std::printf("  tokenizer_config.json    %s\n",
              h.tokenizer.config_json.empty()
                  ? "none"
                  : (std::to_string(h.tokenizer.config_json.size()) + " bytes").c_str());
  pvllm::chat::ChatTemplates templates;
  std::string names;
  if (pvllm::chat::ChatTemplates::from_texts(path, h.tokenizer.config_json,
                                             h.tokenizer.chat_template_jinja, &templates)
          .ok()) {
    for (const std::string& n : templates.names()) names += (names.empty() ? "" : ", ") + n;
    if (!templates.bos_token().empty() || !templates.eos_token().empty()) {
      std::printf("  special tokens           bos \"%s\", eos \"%s\"\n",
                  templates.bos_token().c_str(), templates.eos_token().c_str());
    }
  }
  std::printf("  chat templates           %s\n", names.empty() ? "none" : names.c_str());
  std::printf("\ntensor table (%zu; checksums XXH3-64, checked when loaded)\n", h.tensors.size());
  std::printf("  %-48s %-5s %-9s %-14s %12s %12s  %s\n", "name", "dtype", "layout", "shape",
              "offset", "bytes", "checksum");
  for (const auto& t : h.tensors) {
    std::string shape = "[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      shape += (d > 0 ? "," : "") + std::to_string(t.shape[d]);
    }
    shape += "]";
    std::printf("  %-48s %-5s %-9s %-14s %12" PRIu64 " %12" PRIu64 "  %016" PRIx64 "\n",
                t.name.c_str(), pvllm::dtype_name(t.dtype),
                t.layout == pvllm::Layout::kPanels16 ? "panels16" : "row-major", shape.c_str(),
                t.offset, t.size, t.checksum);
  }
  return 0;
}

// A GGUF model path: the file (or a folder holding one GGUF model).
bool is_gguf_model(const std::string& path) {
  pvllm::ModelFiles files;
  return !path.empty() && pvllm::resolve_model_files(path, &files).ok() &&
         files.kind == pvllm::ModelFiles::Kind::kGguf;
}

std::string gguf_file_of(const std::string& path) {
  pvllm::ModelFiles files;
  return pvllm::resolve_model_files(path, &files).ok() ? files.weights : path;
}

void print_estimate(const InspectOptions& o) {
  pvllm_engine_params params = o.engine;
  params.model_path = o.model.empty() ? nullptr : o.model.c_str();
  params.random_weights = o.random_weights.empty() ? nullptr : o.random_weights.c_str();
  params.kv_cache_bytes = o.kv_cache_mb * (int64_t{1} << 20);
  params.quantize = quantize_value(o.quantize);
  params.kv_cache_dtype = kv_cache_dtype_value(o.kv_cache_dtype);
  const pvllm_memory_estimate e = pvllm::cxx::estimate_memory(params);
  std::printf("\nmemory (block size %d, KV budget %s)\n", params.block_size,
              human_bytes(static_cast<uint64_t>(params.kv_cache_bytes)).c_str());
  std::printf("  weights                  %s (%" PRIu64 " bytes)%s\n",
              human_bytes(e.weight_bytes).c_str(), e.weight_bytes,
              o.quantize.empty() ? "" : (" quantized by " + o.quantize).c_str());
  std::printf("  KV cache dtype           %s\n", kv_cache_dtype_label(o.kv_cache_dtype).c_str());
  std::printf("  KV per block             %s (%" PRIu64 " bytes)\n",
              human_bytes(e.kv_bytes_per_block).c_str(), e.kv_bytes_per_block);
  std::printf("  KV blocks                %d\n", e.num_blocks);
  std::printf("  KV total                 %s\n", human_bytes(e.kv_bytes_total).c_str());
  std::printf("  tokens in cache          %" PRId64 "\n", e.max_tokens_in_cache);
  std::printf("  activations (CPU)        %s\n", human_bytes(e.activation_bytes).c_str());
  std::printf("  CPU kernels              %s (PVLLM_CPU_ISA forces x86-64-v2, avx2 or avx512)\n",
              pvllm_cpu_isa());
}

int run_inspect(const InspectOptions& o) {
  if (o.model.empty() == o.random_weights.empty()) {
    std::fprintf(stderr, "pvllm: give a model path or --random-weights SHAPE (one of them)\n");
    return 2;
  }
  const char* what = "cannot inspect the model";  // the step that may throw
  try {
    const pvllm::cxx::ModelInfo info =
        o.random_weights.empty() ? pvllm::cxx::ModelInfo::inspect(o.model)
                                 : pvllm::cxx::ModelInfo::inspect_random(o.random_weights);
    what = "cannot read the config";
    print_config(info.config());
    what = "cannot read a tensor";
    if (pvllm::is_pvllm_path(o.model)) {
      if (const int rc = print_pvllm_header(o.model); rc != 0) return rc;
    } else if (is_gguf_model(o.model)) {
      if (const int rc = print_gguf_header(gguf_file_of(o.model)); rc != 0) return rc;
    } else {
      print_tensors(info);
    }
    what = "cannot estimate memory";
    print_estimate(o);
  } catch (const pvllm::cxx::Error& e) {
    return report_error(what, e);
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<InspectOptions>();
  o->engine = pvllm::cxx::defaults<pvllm_engine_params>();
  o->kv_cache_mb = o->engine.kv_cache_bytes >> 20;

  CLI::App* sub = app.add_subcommand(
      "inspect",
      "Print a model's config, its tensor table (name, dtype, shape) and the memory serving it "
      "needs, without loading the weights; for a .pvllm or GGUF file, its header too.");
  sub->footer(
      "Examples:\n"
      "  pvllm inspect models/stories260K\n"
      "  pvllm inspect stories260K.pvllm\n"
      "  pvllm inspect Llama-3.2-1B-Instruct-Q4_K_M.gguf\n"
      "  pvllm inspect TinyLlama-1.1B --kv-cache-mb 1024 --block-size 32\n"
      "  pvllm inspect TinyLlama-1.1B --quantize q4_k_m\n"
      "  pvllm inspect TinyLlama-1.1B --kv-cache-dtype int8   # the blocks an int8 cache buys\n"
      "  pvllm inspect --random-weights llama-3-8b");
  sub->add_option("model", o->model,
                  "A Hugging Face folder, a llama2.c .bin (with tokenizer.model beside it), a "
                  ".pvllm file or a GGUF file (their headers, tokenizer and tensor table too)");
  sub->add_option("--random-weights", o->random_weights,
                  "Instead of a model, a random-weights shape (tiny, tinyllama-1.1b, "
                  "llama-2-7b, llama-3-8b), as bf16");
  sub->add_option("--block-size", o->engine.block_size,
                  "Tokens per KV-cache block, for the memory estimate")
      ->capture_default_str();
  sub->add_option("--kv-cache-mb", o->kv_cache_mb, "KV-cache budget in MiB, for the estimate")
      ->check(CLI::Range(int64_t{1}, INT64_MAX >> 20))
      ->capture_default_str();
  add_quantize_option(sub, &o->quantize);
  add_kv_cache_dtype_option(sub, &o->kv_cache_dtype);
  sub->callback([o, exit_code] { *exit_code = run_inspect(*o); });
}

}  // namespace pvllm_cli
