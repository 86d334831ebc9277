// gguf_logits_dump: llama.cpp's logits for a GGUF model, as reference data
// for the GGUF fixtures.
//
// For each prompt (one a line of PROMPTS_FILE, with "\n" standing for a
// newline) it tokenizes the text as llama.cpp does by default (llama_tokenize
// with add_special = true, so BOS first; parse_special = false), keeps at most
// 64 tokens, evaluates them in one llama_decode on a fresh context (CPU, one
// thread, n_ctx 128, logits for every position), and writes for every
// position the 10 largest logits (ties: smaller id first) and the logsumexp of
// the whole row, so that log-probabilities follow. It then generates 16 tokens
// greedily (argmax, ties: smaller id) after the prompt and writes their ids.
//
// Output: one JSON object on stdout. Floats are printed with %.9g.
// Usage: gguf_logits_dump MODEL.gguf PROMPTS_FILE [display-name]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

constexpr int kMaxPositions = 64;
constexpr int kTopK = 10;
constexpr int kGreedy = 16;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

int argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

void quiet(ggml_log_level, const char*, void*) {}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPTS_FILE [display-name]\n", argv[0]);
    return 2;
  }
  const std::string shown = argc == 4 ? argv[3] : argv[1];
  std::vector<std::string> prompts;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      std::string text;
      for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
          text += '\n';
          ++i;
        } else {
          text += line[i];
        }
      }
      prompts.push_back(text);
    }
  }
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "%s: cannot load\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::printf(
      "{\"file\": %s, \"n_vocab\": %d, \"max_positions\": %d, \"top_k\": %d, \"greedy_tokens\": "
      "%d, \"prompts\": [",
      json_string(shown).c_str(), n_vocab, kMaxPositions, kTopK, kGreedy);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::string& text = prompts[p];
    std::vector<llama_token> toks(text.size() + 8);
    int n = llama_tokenize(vocab, text.c_str(), int(text.size()), toks.data(), int(toks.size()),
                           true, false);
    if (n < 0) {
      std::fprintf(stderr, "tokenize failed\n");
      return 1;
    }
    toks.resize(size_t(std::min(n, kMaxPositions)));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = 128;
    cp.n_ubatch = 128;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.no_perf = true;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) {
      std::fprintf(stderr, "context failed\n");
      return 1;
    }
    llama_batch batch = llama_batch_init(int(toks.size()), 0, 1);
    for (size_t i = 0; i < toks.size(); ++i) {
      batch.token[i] = toks[i];
      batch.pos[i] = llama_pos(i);
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    batch.n_tokens = int(toks.size());
    if (llama_decode(ctx, batch) != 0) {
      std::fprintf(stderr, "decode failed\n");
      return 1;
    }
    std::printf("%s\n {\"prompt\": %s, \"tokens\": [", p ? "," : "", json_string(text).c_str());
    for (size_t i = 0; i < toks.size(); ++i) std::printf("%s%d", i ? ", " : "", toks[i]);
    std::printf("], \"positions\": [");
    std::vector<int> order(static_cast<size_t>(n_vocab));
    int next = 0;
    for (size_t i = 0; i < toks.size(); ++i) {
      const float* row = llama_get_logits_ith(ctx, int(i));
      double mx = row[0];
      for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, double(row[v]));
      double sum = 0;
      for (int v = 0; v < n_vocab; ++v) sum += std::exp(double(row[v]) - mx);
      for (int v = 0; v < n_vocab; ++v) order[size_t(v)] = v;
      std::partial_sort(order.begin(), order.begin() + kTopK, order.end(), [row](int a, int b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      std::printf("%s\n  {\"logsumexp\": %s, \"top\": [", i ? "," : "",
                  fmt(mx + std::log(sum)).c_str());
      for (int k = 0; k < kTopK; ++k)
        std::printf("%s[%d, %s]", k ? ", " : "", order[size_t(k)],
                    fmt(double(row[order[size_t(k)]])).c_str());
      std::printf("]}");
      next = order[0];
    }
    llama_batch_free(batch);
    // Greedy continuation, one token at a time (positions follow the cache).
    std::printf("],\n  \"greedy\": [");
    for (int g = 0; g < kGreedy; ++g) {
      std::printf("%s%d", g ? ", " : "", next);
      llama_token t = next;
      llama_batch one = llama_batch_get_one(&t, 1);
      if (llama_decode(ctx, one) != 0) {
        std::fprintf(stderr, "decode failed\n");
        return 1;
      }
      next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    }
    std::printf("]}");
    llama_free(ctx);
  }
  std::printf("\n]}\n");
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
