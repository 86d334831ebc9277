// llama-perplexity's --kl-divergence measure on pvllm's side: the same
// chunks of the same tokens, each evaluated alone, the same positions
// scored, the same means (examples/perplexity/perplexity.cpp at the commit
// tests/data/gguf/ref/kld.json names; its "chunking" and "measure" say it in
// words). Where llama.cpp keeps the base model's log-softmax in 16 bits and
// skips the tokens whose base log-probability is below -16, this computes
// KL(P_base || P_quant) in double over the whole vocabulary;
// llama_style_kld() is llama.cpp's approximation, for comparison.
// Header-only: used by tests/integration/gguf_kld_test.cc and
// bench/gguf_kld.cc (both also build tests/util/sequence_driver.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/util/sequence_driver.h"

namespace pvllm::testing {

// llama-perplexity's chunks of `tokens` (the text's ids, BOS first): chunk i
// is tokens [i * n_ctx, (i + 1) * n_ctx) with its first token replaced by
// BOS; the tail past the last whole chunk is dropped. Scored: positions
// n_ctx / 2 .. n_ctx - 2 of each chunk, each against the token after it.
struct KldChunking {
  int32_t n_ctx = 0;
  int32_t num_chunks = 0;  // at most tokens.size() / n_ctx

  int32_t first_scored() const { return n_ctx / 2; }
  int32_t num_scored_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
  int64_t num_scored() const { return int64_t{num_chunks} * num_scored_per_chunk(); }
  // The token scored position `p` (0 <= p < num_scored()) predicts.
  int32_t next_token(const std::vector<int32_t>& tokens, int64_t p) const {
    const int64_t chunk = p / num_scored_per_chunk();
    const int64_t j = p % num_scored_per_chunk();
    return tokens[chunk * n_ctx + first_scored() + j + 1];
  }
};

// Runs `model` on the CPU backend over every chunk, a fresh sequence each
// (the K/V pool holds one chunk), the chunk in one forward; *logits gets the
// scored positions' logits, [num_scored, vocab], in chunk order.
inline Status kld_scored_logits(const Model& model, const std::vector<int32_t>& tokens,
                                const KldChunking& chunking, int32_t bos_id, int32_t num_threads,
                                std::vector<float>* logits) {
  const int32_t vocab = model.config.vocab_size;
  const int32_t n_ctx = chunking.n_ctx;
  if (int64_t{chunking.num_chunks} * n_ctx > static_cast<int64_t>(tokens.size())) {
    return InvalidArgument("kld: fewer tokens than chunks");
  }
  BackendOptions options;
  options.block_size = 16;
  options.num_blocks = (n_ctx + options.block_size - 1) / options.block_size;
  options.num_threads = num_threads;
  std::unique_ptr<Backend> backend;
  PVLLM_RETURN_IF_ERROR(create_cpu_backend(model, options, &backend));
  const int32_t first = chunking.first_scored();
  const int32_t per_chunk = chunking.num_scored_per_chunk();
  logits->assign(static_cast<size_t>(chunking.num_scored()) * vocab, 0.0f);
  std::vector<float> all;  // [n_ctx, vocab]
  for (int32_t c = 0; c < chunking.num_chunks; ++c) {
    std::vector<int32_t> ids(tokens.begin() + int64_t{c} * n_ctx,
                             tokens.begin() + int64_t{c + 1} * n_ctx);
    ids[0] = bos_id;
    SequenceDriver driver(backend.get(), vocab);  // blocks 0.. again: the last chunk's are free
    PVLLM_RETURN_IF_ERROR(driver.step(ids, &all));
    std::copy(all.begin() + int64_t{first} * vocab,
              all.begin() + int64_t{first + per_chunk} * vocab,
              logits->begin() + int64_t{c} * per_chunk * vocab);
  }
  return Status::Ok();
}

// log-softmax of `logits` [n] in double.
inline void log_softmax(const float* logits, int32_t n, double* out) {
  double max = logits[0];
  for (int32_t i = 1; i < n; ++i) max = std::max(max, double(logits[i]));
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - max);
  const double lse = max + std::log(sum);
  for (int32_t i = 0; i < n; ++i) out[i] = double(logits[i]) - lse;
}

// [mean, standard error] as llama-perplexity reports them: the error is
// sqrt((E[x^2] - E[x]^2) / (count - 1)), 0 for 10 values or fewer.
struct MeanError {
  double mean = 0;
  double error = 0;
};
inline MeanError mean_error(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double f = sum / count;
  const double var = sum2 / count - f * f;
  return {f, var > 0 && count > 10 ? std::sqrt(var / (count - 1)) : 0.0};
}

// Sums over scored positions, as llama-perplexity keeps them.
struct KldStats {
  double sum_kld = 0;
  double sum_kld2 = 0;
  double sum_nll = 0;  // of the next token under the quantized model
  double sum_nll2 = 0;
  int64_t num_same_top = 0;
  int64_t count = 0;

  // One position: base and quantized logits [vocab], the token that follows.
  // Returns the position's KL(P_base || P_quant).
  double add(const float* base, const float* quant, int32_t vocab, int32_t next) {
    lp_.resize(vocab);
    lq_.resize(vocab);
    log_softmax(base, vocab, lp_.data());
    log_softmax(quant, vocab, lq_.data());
    double kld = 0;
    for (int32_t i = 0; i < vocab; ++i) kld += std::exp(lp_[i]) * (lp_[i] - lq_[i]);
    sum_kld += kld;
    sum_kld2 += kld * kld;
    const double nll = -lq_[next];
    sum_nll += nll;
    sum_nll2 += nll * nll;
    num_same_top += argmax(base, vocab) == argmax(quant, vocab);
    ++count;
    return kld;
  }

  MeanError kld() const { return mean_error(sum_kld, sum_kld2, count); }
  // The fraction of positions whose top tokens agree; error sqrt(p(1-p)/(n-1)).
  MeanError same_top() const {
    const double p = count > 0 ? double(num_same_top) / count : 0.0;
    return {p, count > 1 ? std::sqrt(p * (1 - p) / (count - 1)) : 0.0};
  }
  // exp(mean NLL), error ppl times the NLL's.
  MeanError ppl() const {
    const MeanError nll = mean_error(sum_nll, sum_nll2, count);
    const double ppl = std::exp(nll.mean);
    return {ppl, ppl * nll.error};
  }

 private:
  std::vector<double> lp_, lq_;
};

// One position's KLD as llama-perplexity computes it: the base row's
// log-softmax rounded to 16 bits between max - 16 and max (in float), only
// base log-probabilities above -16 summed, the quantized row's log-softmax
// in float with a double sum of exponentials.
inline double llama_style_kld(const float* base, const float* quant, int32_t vocab) {
  auto max_lse = [vocab](const float* row, float* max, float* min) {
    *max = row[0];
    *min = row[0];
    for (int32_t i = 1; i < vocab; ++i) {
      *max = std::max(*max, row[i]);
      *min = std::min(*min, row[i]);
    }
    double sum = 0;
    for (int32_t i = 0; i < vocab; ++i) sum += std::exp(row[i] - *max);
    return static_cast<float>(std::log(sum));
  };
  float bmax, bmin, qmax, qmin;
  const float blse = max_lse(base, &bmax, &bmin);
  bmin = std::max(bmin, bmax - 16);
  const float min_log_prob = bmin - bmax - blse;
  const float scale = (bmax - bmin) / 65535.f;
  const float qlse = max_lse(quant, &qmax, &qmin) + qmax;
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    const float q16 =
        scale != 0 && base[i] > bmin ? std::nearbyint((base[i] - bmin) * (1 / scale)) : 0;
    const float lp = scale * q16 + min_log_prob;
    if (lp > -16.f) sum += std::exp(lp) * (lp - quant[i] + qlse);
  }
  return sum;
}

}  // namespace pvllm::testing
