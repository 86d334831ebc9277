// The workloads of `pvllm bench`; see bench_workloads.h.
#include "bench_workloads.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

namespace pvllm_cli {
namespace {

// Token ids from 3 up (0..2 are unk/bos/eos in the usual vocabularies).
std::vector<int32_t> random_tokens(std::mt19937_64* rng, int32_t len, int32_t vocab_size) {
  std::uniform_int_distribution<int32_t> id(3, std::max(3, vocab_size - 1));
  std::vector<int32_t> t(static_cast<size_t>(len));
  for (int32_t& x : t) x = id(*rng);
  return t;
}

// A log-normal length with the given mean and shape, clamped to [lo, hi].
int32_t lognormal_len(std::mt19937_64* rng, double mean, double sigma, int32_t lo, int32_t hi) {
  const double mu = std::log(mean) - sigma * sigma / 2.0;
  std::lognormal_distribution<double> d(mu, sigma);
  const double v = std::round(d(*rng));
  return static_cast<int32_t>(std::clamp<double>(v, lo, hi));
}

// Poisson arrivals: exponential gaps of mean 1/rate steps, from `start`.
void poisson_arrivals(std::mt19937_64* rng, double rate, int64_t start, size_t first,
                      std::vector<BenchRequest>* reqs) {
  std::exponential_distribution<double> gap(rate);
  double t = static_cast<double>(start);
  for (size_t i = first; i < reqs->size(); ++i) {
    (*reqs)[i].arrival_step = static_cast<int64_t>(std::floor(t));
    t += gap(*rng);
  }
}

}  // namespace

double nano_length_scale(int32_t context) { return std::min(1.0, context / 2048.0); }

const std::vector<std::string>& workload_names() {
  static const std::vector<std::string> names{"chat", "nano", "shared-prefix", "parallel", "fixed"};
  return names;
}

bool make_workload(const WorkloadOptions& o, std::vector<BenchRequest>* out, std::string* error) {
  std::mt19937_64 rng(o.seed);
  const int32_t ctx = o.context;
  if (ctx < 32) {
    *error = "the model's context (" + std::to_string(ctx) + ") is too short to benchmark";
    return false;
  }
  auto count = [&](int32_t dflt) { return o.num_requests > 0 ? o.num_requests : dflt; };
  const int32_t n = o.n > 0 ? o.n : (o.name == "parallel" ? 4 : 1);
  out->clear();

  if (o.name == "chat") {
    // Prompt mean ~200 tokens with a long tail (sigma 1: ~1 in 1000 above
    // 4k when the context allows); outputs mean ~128.
    const int32_t max_prompt = std::min(4096, ctx - 16);
    for (int32_t i = 0; i < count(300); ++i) {
      BenchRequest r;
      const int32_t prompt_len = lognormal_len(&rng, 200.0, 1.0, 4, max_prompt);
      r.max_tokens = lognormal_len(&rng, 128.0, 0.8, 1, std::min(2048, ctx - prompt_len));
      r.prompt = random_tokens(&rng, prompt_len, o.vocab_size);
      r.n = n;
      out->push_back(std::move(r));
    }
    poisson_arrivals(&rng, o.rate > 0 ? o.rate : 2.0, 0, 0, out);
  } else if (o.name == "nano") {
    // nano-vllm's bench.py: 256 sequences, prompt and output uniform in
    // [100, 1024] (seed 0, EOS ignored), exactly, whenever prompt + output
    // fit the context (>= 2048); scaled down only for shorter contexts, and
    // describe_workload says so.
    const double scale = nano_length_scale(ctx);
    const int32_t lo = std::max(1, static_cast<int32_t>(100 * scale));
    const int32_t hi = std::max(lo, static_cast<int32_t>(1024 * scale));
    std::uniform_int_distribution<int32_t> len(lo, hi);
    for (int32_t i = 0; i < count(256); ++i) {
      BenchRequest r;
      const int32_t prompt_len = len(rng);
      r.max_tokens = std::min(len(rng), ctx - prompt_len);
      r.prompt = random_tokens(&rng, prompt_len, o.vocab_size);
      r.n = n;
      out->push_back(std::move(r));
    }
  } else if (o.name == "shared-prefix") {
    // One long system prompt, then a different short question each; the
    // first request arrives alone so that its prefix is computed once.
    const int32_t sys_len = std::min(o.system_prompt_len, ctx / 2);
    const std::vector<int32_t> system = random_tokens(&rng, sys_len, o.vocab_size);
    std::uniform_int_distribution<int32_t> question(16, 64);
    const int32_t output = std::max(1, std::min(32, ctx - sys_len - 64));
    for (int32_t i = 0; i < count(64); ++i) {
      BenchRequest r;
      r.prompt = system;
      const std::vector<int32_t> q = random_tokens(&rng, question(rng), o.vocab_size);
      r.prompt.insert(r.prompt.end(), q.begin(), q.end());
      r.max_tokens = output;
      r.n = n;
      out->push_back(std::move(r));
    }
    poisson_arrivals(&rng, o.rate > 0 ? o.rate : 1.0, 1, 1, out);
  } else if (o.name == "parallel") {
    // Parallel sampling: every request draws n samples of one prompt.
    const int32_t prompt_len = std::min(512, ctx / 2);
    const int32_t output = std::min(128, ctx / 4);
    for (int32_t i = 0; i < count(16); ++i) {
      BenchRequest r;
      r.prompt = random_tokens(&rng, prompt_len, o.vocab_size);
      r.max_tokens = output;
      r.n = n;
      out->push_back(std::move(r));
    }
  } else if (o.name == "fixed") {
    if (o.input_len < 1 || o.output_len < 1) {
      *error = "--input-len and --output-len must be >= 1";
      return false;
    }
    const int32_t input = std::min(o.input_len, ctx - 1);
    const int32_t output = std::min(o.output_len, ctx - input);
    for (int32_t i = 0; i < count(64); ++i) {
      BenchRequest r;
      r.prompt = random_tokens(&rng, input, o.vocab_size);
      r.max_tokens = output;
      r.n = n;
      out->push_back(std::move(r));
    }
  } else {
    *error = "unknown workload \"" + o.name + "\"";
    return false;
  }
  return true;
}

std::string describe_workload(const WorkloadOptions& o, const std::vector<BenchRequest>& reqs) {
  int64_t num_prompt = 0, num_output = 0, max_prompt = 0;
  for (const BenchRequest& r : reqs) {
    num_prompt += static_cast<int64_t>(r.prompt.size());
    num_output += int64_t{r.max_tokens} * r.n;
    max_prompt = std::max<int64_t>(max_prompt, static_cast<int64_t>(r.prompt.size()));
  }
  const double k = reqs.empty() ? 1.0 : static_cast<double>(reqs.size());
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%s: %zu requests, n = %d, prompt mean %.0f (max %lld), output mean %.0f "
                "per request, last arrival at step %lld, seed %llu",
                o.name.c_str(), reqs.size(), reqs.empty() ? 0 : reqs[0].n, num_prompt / k,
                static_cast<long long>(max_prompt), num_output / k,
                static_cast<long long>(reqs.empty() ? 0 : reqs.back().arrival_step),
                static_cast<unsigned long long>(o.seed));
  std::string text = buf;
  if (o.name == "nano" && nano_length_scale(o.context) < 1.0) {
    std::snprintf(buf, sizeof(buf),
                  "; lengths SCALED by %.3f from nano-vllm's [100, 1024] to fit context %d",
                  nano_length_scale(o.context), o.context);
    text += buf;
  }
  return text;
}

}  // namespace pvllm_cli
