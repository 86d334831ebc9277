// The quality of each quantized stories260K GGUF file against its F32 source,
// as pvllm runs them, beside llama.cpp's `llama-perplexity --kl-divergence`
// on the same files and text (tests/data/gguf/ref/kld.json, made by
// scripts/reference/make_gguf_kld_ref.sh): mean KL divergence, top-token
// agreement and perplexity over llama-perplexity's chunks of
// tests/data/gguf/kld_text.txt (tests/util/kld_eval.h). pvllm's KLD is
// exact (double, whole vocabulary); the "llama-style" column is the same
// logits through llama.cpp's 16-bit approximation of the base.
//
// Usage: gguf_kld [GGUF_DIR] [--chunks N] [--threads N]
//   GGUF_DIR defaults to tests/data/gguf (run from the repository root).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/util/kld_eval.h"

namespace {

using nlohmann::json;
using pvllm::Model;
using pvllm::Status;
using pvllm::Tokenizer;
namespace pt = pvllm::testing;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool check(const Status& s, const std::string& what) {
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", what.c_str(), s.message().c_str());
  return s.ok();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "tests/data/gguf";
  int32_t max_chunks = -1;
  int32_t threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--chunks") == 0 && i + 1 < argc) {
      max_chunks = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (argv[i][0] != '-') {
      dir = argv[i];
    } else {
      std::fprintf(stderr, "usage: gguf_kld [GGUF_DIR] [--chunks N] [--threads N]\n");
      return 2;
    }
  }
  const std::string ref_text = read_text(dir + "/ref/kld.json");
  if (ref_text.empty()) {
    std::fprintf(stderr, "cannot read %s/ref/kld.json\n", dir.c_str());
    return 1;
  }
  const json ref = json::parse(ref_text);
  const std::string base_file = dir + "/" + ref["base_file"].get<std::string>();

  // The text as llama-perplexity reads it: one trailing newline dropped.
  std::string text = read_text(dir + "/" + ref["text"].get<std::string>());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::unique_ptr<Tokenizer> tokenizer;
  if (!check(Tokenizer::load_file(base_file, &tokenizer), base_file)) return 1;
  std::vector<int32_t> tokens;
  if (!check(tokenizer->encode(text, /*add_special=*/true, &tokens), "encode")) return 1;
  const bool same_ids = tokens == ref["tokens"].get<std::vector<int32_t>>();
  pt::KldChunking chunking;
  chunking.n_ctx = ref["n_ctx"].get<int32_t>();
  chunking.num_chunks = static_cast<int32_t>(tokens.size()) / chunking.n_ctx;
  const bool all_chunks = max_chunks < 0 || max_chunks >= chunking.num_chunks;
  if (!all_chunks) chunking.num_chunks = max_chunks;
  std::printf("%s: %zu tokens (llama.cpp: %d, ids %s), %d chunks of %d, %lld positions scored%s\n",
              ref["text"].get<std::string>().c_str(), tokens.size(), ref["n_tokens"].get<int>(),
              same_ids ? "identical" : "DIFFERENT", chunking.num_chunks, chunking.n_ctx,
              static_cast<long long>(chunking.num_scored()),
              all_chunks ? "" : " (llama.cpp's figures are over all chunks)");

  std::unique_ptr<Model> base_model;
  if (!check(pvllm::load_model(base_file, &base_model), base_file)) return 1;
  const int32_t vocab = base_model->config.vocab_size;
  const int32_t bos = tokenizer->bos_id();
  std::vector<float> base;
  auto t0 = std::chrono::steady_clock::now();
  if (!check(pt::kld_scored_logits(*base_model, tokens, chunking, bos, threads, &base), "F32")) {
    return 1;
  }
  {
    pt::KldStats self;
    for (int64_t p = 0; p < chunking.num_scored(); ++p) {
      const float* row = base.data() + p * vocab;
      self.add(row, row, vocab, chunking.next_token(tokens, p));
    }
    std::printf("F32: PPL %.4f (llama.cpp %.4f), %.2f s\n\n", self.ppl().mean,
                ref["base_ppl"][0].get<double>(), seconds_since(t0));
  }

  std::printf("%-28s %11s %11s %6s %11s %8s %8s %8s %8s %6s\n", "file", "KLD llama", "KLD pvllm",
              "ratio", "llama-style", "top llama", "top pvllm", "PPL llama", "PPL pvllm", "s");
  for (const json& f : ref["files"]) {
    const std::string name = f["file"].get<std::string>();
    std::unique_ptr<Model> model;
    if (!check(pvllm::load_model(dir + "/" + name, &model), name)) return 1;
    std::vector<float> quant;
    t0 = std::chrono::steady_clock::now();
    if (!check(pt::kld_scored_logits(*model, tokens, chunking, bos, threads, &quant), name))
      return 1;
    pt::KldStats stats;
    double llama_style = 0;
    for (int64_t p = 0; p < chunking.num_scored(); ++p) {
      const float* b = base.data() + p * vocab;
      const float* q = quant.data() + p * vocab;
      stats.add(b, q, vocab, chunking.next_token(tokens, p));
      llama_style += pt::llama_style_kld(b, q, vocab);
    }
    llama_style /= double(chunking.num_scored());
    const double theirs = f["mean_kld"][0].get<double>();
    std::printf("%-28s %11.6f %11.6f %6.3f %11.6f %7.3f%% %7.3f%% %8.4f %8.4f %6.2f\n",
                name.substr(0, name.size() - 5).c_str(), theirs, stats.kld().mean,
                theirs > 0 ? stats.kld().mean / theirs : 0.0, llama_style,
                100 * f["same_top_p"][0].get<double>(), 100 * stats.same_top().mean,
                f["ppl"][0].get<double>(), stats.ppl().mean, seconds_since(t0));
  }
  return same_ids ? 0 : 1;
}
