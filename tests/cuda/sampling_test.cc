// Device sampling against the host sampler (core/sampler.h): the same token
// for greedy and for seeded draws with temperature / top-k / top-p / min-p,
// the chosen token inside the filtered set computed independently here, and
// the logprob within 1e-4 of the host's (both are log-softmax in double of
// the same fp32 logits; only summation order differs, ~1e-12).
//
// Random normal logits have well-separated probabilities: a mismatch by
// rounding needs a probability mass within ~1e-9 of a top-p boundary or the
// draw within ~1e-15 of a cumulative boundary, which these seeds do not hit.
#include "kernels/cuda/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/sampler.h"
#include "core/sampling_params.h"
#include "tests/cuda/ops_test_util.h"

namespace pvllm {
namespace {

using cuda_ops_test::DeviceBuffer;

struct RowSpec {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  int32_t sample_index = 0;
  int32_t step = 0;
};

struct DeviceResult {
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
};

DeviceResult sample_on_device(const std::vector<float>& logits, int32_t vocab,
                              const std::vector<RowSpec>& rows) {
  const auto num_rows = static_cast<int32_t>(rows.size());
  std::vector<float> temperature, top_p, min_p;
  std::vector<int32_t> top_k, sample_index, step;
  std::vector<uint64_t> seed;
  for (const RowSpec& r : rows) {
    temperature.push_back(r.temperature);
    top_k.push_back(r.top_k);
    top_p.push_back(r.top_p);
    min_p.push_back(r.min_p);
    seed.push_back(r.seed);
    sample_index.push_back(r.sample_index);
    step.push_back(r.step);
  }
  DeviceBuffer<float> d_logits(logits), d_temp(temperature), d_top_p(top_p), d_min_p(min_p);
  DeviceBuffer<int32_t> d_top_k(top_k), d_index(sample_index), d_step(step);
  DeviceBuffer<uint64_t> d_seed(seed);
  DeviceBuffer<int32_t> d_tokens(rows.size());
  DeviceBuffer<float> d_logprobs(rows.size());
  const size_t ws_bytes = pvllm_cuda_sampling_workspace_bytes(num_rows, vocab);
  DeviceBuffer<char> d_ws(ws_bytes + 1);

  DeviceSamplingParams p;
  p.logits = d_logits.get();
  p.temperature = d_temp.get();
  p.top_k = d_top_k.get();
  p.top_p = d_top_p.get();
  p.min_p = d_min_p.get();
  p.seed = d_seed.get();
  p.sample_index = d_index.get();
  p.step = d_step.get();
  p.token_ids = d_tokens.get();
  p.logprobs = d_logprobs.get();
  p.workspace = d_ws.get();
  p.workspace_bytes = ws_bytes;
  p.num_rows = num_rows;
  p.vocab = vocab;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {d_tokens.download(), d_logprobs.download()};
}

SampleResult sample_on_host(const float* row, int32_t vocab, const RowSpec& r) {
  SamplingParams params;
  params.temperature = r.temperature;
  params.top_k = r.top_k;
  params.top_p = r.top_p;
  params.min_p = r.min_p;
  params.logprobs = 0;
  return sample_token(std::span<const float>(row, vocab), params, {}, {}, r.seed, r.sample_index,
                      r.step);
}

// The tokens a draw may return, straight from the definitions: rank by
// (logit / T desc, id asc); keep the top k; keep the shortest prefix whose
// probability (renormalised over the top k) reaches top_p; drop tokens with
// p < min_p * p_max.
std::set<int32_t> allowed_tokens(const float* row, int32_t vocab, const RowSpec& r) {
  std::vector<double> x(vocab);
  for (int32_t i = 0; i < vocab; ++i) {
    // The float division of the host, so equal-after-rounding logits tie.
    x[i] = std::isnan(row[i]) ? -INFINITY : static_cast<double>(row[i] / r.temperature);
  }
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return x[a] != x[b] ? x[a] > x[b] : a < b; });
  if (r.top_k > 0 && r.top_k < vocab) order.resize(r.top_k);
  const double max_x = x[order[0]];
  double total = 0.0;
  for (int32_t id : order) total += std::exp(x[id] - max_x);
  std::set<int32_t> allowed;
  double cumulative = 0.0;
  for (size_t n = 0; n < order.size(); ++n) {
    const int32_t id = order[n];
    const double w = std::exp(x[id] - max_x);
    // The nucleus holds at least the best token, even for top_p = 0.
    if (r.top_p < 1.0f && n > 0 && cumulative >= r.top_p * total) break;
    cumulative += w;
    if (w >= r.min_p) allowed.insert(id);
  }
  return allowed;
}

std::vector<float> random_logits(int32_t num_rows, int32_t vocab, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> logits(size_t(num_rows) * vocab);
  for (float& v : logits) v = dist(rng);
  return logits;
}

void expect_matches_host(const std::vector<float>& logits, int32_t vocab,
                         const std::vector<RowSpec>& rows, bool check_allowed_set) {
  const DeviceResult dev = sample_on_device(logits, vocab, rows);
  ASSERT_EQ(dev.token_ids.size(), rows.size());
  int num_bad = 0;
  for (size_t r = 0; r < rows.size() && num_bad < 10; ++r) {
    const float* row = logits.data() + r * vocab;
    const SampleResult host = sample_on_host(row, vocab, rows[r]);
    const RowSpec& s = rows[r];
    const std::string what = "row " + std::to_string(r) + " T=" + std::to_string(s.temperature) +
                             " k=" + std::to_string(s.top_k) + " p=" + std::to_string(s.top_p) +
                             " min_p=" + std::to_string(s.min_p) +
                             " seed=" + std::to_string(s.seed);
    if (dev.token_ids[r] != host.token_id) ++num_bad;
    EXPECT_EQ(dev.token_ids[r], host.token_id) << what;
    if (std::isfinite(host.logprob)) {
      EXPECT_NEAR(dev.logprobs[r], host.logprob, 1e-4) << what;
    }
    if (check_allowed_set && s.temperature > 0.0f) {
      EXPECT_TRUE(allowed_tokens(row, vocab, s).count(dev.token_ids[r]))
          << what << ": token " << dev.token_ids[r] << " is outside the filtered set";
    }
  }
}

// ---- validation: no device needed --------------------------------------------

TEST(CudaSamplingValidation, BadSizesAreRejectedBeforeAnyCudaCall) {
  const auto* f = reinterpret_cast<const float*>(uintptr_t{256});
  const auto* i = reinterpret_cast<const int32_t*>(uintptr_t{256});
  DeviceSamplingParams p;
  p.logits = f;
  p.temperature = f;
  p.top_k = i;
  p.top_p = f;
  p.min_p = f;
  p.seed = reinterpret_cast<const uint64_t*>(uintptr_t{256});
  p.sample_index = i;
  p.step = i;
  p.token_ids = reinterpret_cast<int32_t*>(uintptr_t{256});
  p.logprobs = reinterpret_cast<float*>(uintptr_t{256});
  p.num_rows = 2;
  p.vocab = 0;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaErrorInvalidValue);
  p.vocab = (1 << 20) + 1;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaErrorInvalidValue);
  p.vocab = 32000;
  p.num_rows = -1;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaErrorInvalidValue);
  p.num_rows = 2;
  p.top_p = nullptr;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaErrorInvalidValue);
  p.top_p = f;
  p.num_rows = 0;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaSuccess);  // nothing to do, nothing launched
}

// ---- against the host sampler ----------------------------------------------------

TEST(CudaSampling, GreedyMatchesHostArgmaxIncludingTiesAndNonFinite) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const int32_t vocab = 32000;
  const int32_t num_rows = 8;
  std::vector<float> logits = random_logits(num_rows, vocab, 1, 2.0f);
  // Row 1: a tie for the maximum (the lower id must win).
  logits[1 * vocab + 100] = 50.0f;
  logits[1 * vocab + 90] = 50.0f;
  // Row 2: +inf beats everything; NaN is never chosen.
  logits[2 * vocab + 5] = std::numeric_limits<float>::quiet_NaN();
  logits[2 * vocab + 31999] = INFINITY;
  // Row 3: all -inf: token 0.
  for (int32_t i = 0; i < vocab; ++i) logits[3 * vocab + i] = -INFINITY;
  // Row 4: -0 and +0 tie at the top.
  for (int32_t i = 0; i < vocab; ++i) logits[4 * vocab + i] = -1.0f;
  logits[4 * vocab + 7] = -0.0f;
  logits[4 * vocab + 3] = 0.0f;
  std::vector<RowSpec> rows(num_rows);
  for (RowSpec& r : rows) r.temperature = 0.0f;
  expect_matches_host(logits, vocab, rows, false);
}

// Every combination of filters, many seeds.
std::vector<RowSpec> filter_rows(int32_t count, uint64_t seed_base) {
  const RowSpec kinds[] = {
      {1.0f, 0, 1.0f, 0.0f},     {0.7f, 50, 1.0f, 0.0f},   {1.3f, 0, 0.9f, 0.0f},
      {1.0f, 0, 1.0f, 0.05f},    {0.8f, 100, 0.8f, 0.02f}, {1.0f, 1, 1.0f, 0.0f},
      {1.1f, 2000, 0.95f, 0.0f}, {0.5f, 0, 0.3f, 0.0f},    {2.0f, 40, 0.7f, 0.1f},
      {1.0f, 0, 0.0f, 0.0f},
  };
  std::vector<RowSpec> rows;
  for (int32_t r = 0; r < count; ++r) {
    RowSpec s = kinds[r % (sizeof(kinds) / sizeof(kinds[0]))];
    s.seed = seed_base + 7919u * r;
    s.sample_index = r % 3;
    s.step = r * 13;
    rows.push_back(s);
  }
  return rows;
}

TEST(CudaSampling, SeededDrawsMatchHostSampler) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  for (int32_t vocab : {1, 2, 17, 1000, 32000}) {
    const int32_t num_rows = vocab >= 32000 ? 100 : 200;
    const std::vector<float> logits = random_logits(num_rows, vocab, 100 + vocab, 3.0f);
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    expect_matches_host(logits, vocab, filter_rows(num_rows, 12345), true);
  }
}

TEST(CudaSampling, SeededDrawsMatchHostSamplerOnLargeVocab) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  for (int32_t vocab : {128256, 262144}) {
    const int32_t num_rows = 20;
    const std::vector<float> logits = random_logits(num_rows, vocab, 7 + vocab, 4.0f);
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    expect_matches_host(logits, vocab, filter_rows(num_rows, 999), true);
  }
}

TEST(CudaSampling, TiedLogitsRankByLowerIdAsHost) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  // Logits on a few levels: top-k and top-p boundaries fall inside runs of
  // equal logits, where only the id decides.
  const int32_t vocab = 5000;
  const int32_t num_rows = 120;
  std::vector<float> logits = random_logits(num_rows, vocab, 5, 1.0f);
  for (float& v : logits) v = std::round(v * 2.0f) / 2.0f;
  std::vector<RowSpec> rows = filter_rows(num_rows, 4242);
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r].top_k = static_cast<int32_t>(3 + 37 * r % 700);
    rows[r].top_p = 0.61f + 0.003f * static_cast<float>(r % 100);
  }
  expect_matches_host(logits, vocab, rows, true);
}

TEST(CudaSampling, SameCounterGivesSameTokenAndDifferentStepsVary) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  // A flat distribution over 64 tokens: the draw is decided by u alone.
  const int32_t vocab = 64;
  const int32_t num_rows = 64;
  const std::vector<float> logits(size_t(num_rows) * vocab, 0.0f);
  std::vector<RowSpec> rows(num_rows);
  for (int32_t r = 0; r < num_rows; ++r) {
    rows[r].seed = 77;
    rows[r].step = r / 2;  // rows 2i and 2i+1 share a counter
  }
  const DeviceResult dev = sample_on_device(logits, vocab, rows);
  std::set<int32_t> distinct;
  for (int32_t r = 0; r < num_rows; r += 2) {
    EXPECT_EQ(dev.token_ids[r], dev.token_ids[r + 1]) << "row " << r;
    // With a flat distribution the token is floor(u * 64), u from the host.
    const double u = sampler_uniform(77, 0, r / 2);
    EXPECT_EQ(dev.token_ids[r], static_cast<int32_t>(u * 64)) << "row " << r;
    distinct.insert(dev.token_ids[r]);
  }
  EXPECT_GT(distinct.size(), 10u) << "32 draws over 64 tokens should rarely collide this much";
}

}  // namespace
}  // namespace pvllm
