// `pvllm convert SRC OUT.pvllm`: any model pvllm loads (a Hugging Face
// folder, a llama2.c checkpoint, another .pvllm file) into one .pvllm file
// (docs/format.md). Uses the core model library directly.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "core/model/model.h"
#include "core/model/pvllm_writer.h"
#include "core/model/quantize_model.h"

namespace pvllm_cli {
namespace {

struct ConvertCliOptions {
  std::string source;
  std::string output;
  std::string dtype = "keep";
  std::string layout = "packed";
  std::string quantize;
  bool quiet = false;
};

// A bar on a terminal, redrawn in place; a line per tenth otherwise.
class ProgressBar {
 public:
  explicit ProgressBar(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0) {}
  void update(uint64_t done, uint64_t total, const std::string& tensor) {
    if (quiet_ || total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (tty_) {
      const int filled = percent * 30 / 100;
      std::fprintf(stderr, "\rconverting [%-30s] %3d%% %7.1f / %.1f MiB  %-40.40s",
                   std::string(static_cast<size_t>(filled), '#').c_str(), percent,
                   static_cast<double>(done) / (1 << 20), static_cast<double>(total) / (1 << 20),
                   tensor.c_str());
      if (done == total) std::fputc('\n', stderr);
    } else if (percent / 10 > last_tenth_ || done == total) {
      last_tenth_ = percent / 10;
      std::fprintf(stderr, "converting: %d%% (%.1f of %.1f MiB)\n", percent,
                   static_cast<double>(done) / (1 << 20), static_cast<double>(total) / (1 << 20));
    }
  }

 private:
  bool quiet_;
  bool tty_;
  int last_tenth_ = -1;
};

int fail(const std::string& what, const pvllm::Status& st, int code = 1) {
  std::fprintf(stderr, "pvllm: %s: %s (%s)\n", what.c_str(), st.message().c_str(),
               pvllm_status_to_string(static_cast<pvllm_status>(st.code())));
  return code;
}

int run_convert(const ConvertCliOptions& o) {
  pvllm::ConvertOptions options;
  pvllm::Status st = pvllm::parse_dtype_choice(o.dtype, &options.dtype);
  if (!st.ok()) return fail("bad --dtype", st, 2);
  if (o.layout != "packed" && o.layout != "row-major") {
    std::fprintf(stderr, "pvllm: bad --layout \"%s\": expected packed or row-major\n",
                 o.layout.c_str());
    return 2;
  }
  options.packed = o.layout == "packed";
  options.quantize = o.quantize;
  if (!o.quantize.empty() && !pvllm::is_quantize_scheme(o.quantize)) {
    std::fprintf(stderr, "pvllm: bad --quantize \"%s\": expected one of %s\n", o.quantize.c_str(),
                 pvllm::quantize_scheme_names());
    return 2;
  }
  options.writer = std::string("pvllm ") + pvllm_version();
  ProgressBar bar(o.quiet);
  options.progress = [&bar](uint64_t done, uint64_t total, const std::string& tensor) {
    bar.update(done, total, tensor);
  };
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<pvllm::Model> model;
  pvllm::LoadOptions load;
  load.checksums = pvllm::ChecksumMode::kLazy;  // write_pvllm checks them as it reads
  st = pvllm::load_model(o.source, &model, load);
  if (!st.ok()) return fail("cannot load " + o.source, st);
  st = pvllm::write_pvllm(model.get(), o.output, options);
  if (!st.ok()) return fail("cannot write " + o.output, st);
  if (!o.quiet) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "pvllm: wrote %s (%s, %s) in %.2f s\n", o.output.c_str(),
                 o.quantize.empty() ? o.dtype.c_str() : o.quantize.c_str(),
                 o.quantize.empty() ? o.layout.c_str() : "row-major", s);
  }
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ConvertCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "convert",
      "Convert a model (Hugging Face folder, llama2.c .bin or .pvllm) into one .pvllm file: "
      "config, tokenizer, chat template and weights, checksummed, mapped without a copy.");
  sub->footer(
      "Examples:\n"
      "  pvllm convert models/stories260K stories260K.pvllm\n"
      "  pvllm convert models/TinyLlama-1.1B tinyllama.pvllm --dtype bf16\n"
      "  pvllm convert models/TinyLlama-1.1B tinyllama-q4km.pvllm --quantize q4_k_m");
  sub->add_option("source", o->source, "The model to convert")->required();
  sub->add_option("output", o->output, "The .pvllm file to write")->required();
  sub->add_option("--dtype", o->dtype,
                  "Weights' dtype: keep (as in the source), fp32, bf16 or fp16")
      ->capture_default_str();
  sub->add_option("--layout", o->layout,
                  "packed: the projections in the CPU backend's panel layout, served from the "
                  "mapping without a copy (other backends unpack them at load); row-major: as "
                  "checkpoints store them")
      ->capture_default_str();
  sub->add_option("--quantize", o->quantize,
                  std::string("Quantize the weight matrices, as llama-quantize's file types do: ") +
                      pvllm::quantize_scheme_names() +
                      " (the file is then row-major; --dtype applies to what stays unquantized)");
  sub->add_flag("-q,--quiet", o->quiet, "No progress bar");
  sub->callback([o, exit_code] {
    if (!pvllm::is_pvllm_path(o->output)) {
      std::fprintf(stderr, "pvllm: the output's name must end in .pvllm\n");
      *exit_code = 2;
      return;
    }
    *exit_code = run_convert(*o);
  });
}

}  // namespace pvllm_cli
