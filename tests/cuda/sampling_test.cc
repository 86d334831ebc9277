// Device sampling against the host sampler (core/sample/sampler.h), through the
// same SamplingPlan the CUDA backend packs its steps with: the same token
// for greedy and for seeded draws with temperature / top-k / top-p / min-p
// and repetition / presence / frequency penalties, the chosen token inside
// the filtered set computed independently here, and logprobs (the chosen
// token's and the top k) within 1e-5 of the host's (both are log-softmax in
// double of the same fp32 logits; only summation order differs, ~1e-12).
//
// Random normal logits have well-separated probabilities: a mismatch by
// rounding needs a probability mass within ~1e-9 of a top-p boundary or the
// draw within ~1e-15 of a cumulative boundary, which these seeds do not hit.
#include "kernels/cuda/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/sample/sampler.h"
#include "core/sample/sampling_params.h"
#include "kernels/cuda/sampling_plan.h"
#include "tests/cuda/cuda_test_util.h"

namespace pvllm {
namespace {

struct RowSpec {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  int32_t sample_index = 0;
  int32_t step = 0;
};

// Sample rows over a logits matrix, owning their params and token lists.
struct Rows {
  std::deque<SamplingParams> params;  // a deque keeps addresses stable
  std::deque<std::vector<int32_t>> tokens;
  std::vector<SampleRow> rows;

  SampleRow& add(int32_t logits_index, const SamplingParams& p, uint64_t seed, int32_t sample_index,
                 int32_t step, std::vector<int32_t> prompt = {}, std::vector<int32_t> output = {}) {
    params.push_back(p);
    tokens.push_back(std::move(prompt));
    const std::vector<int32_t>& pr = tokens.back();
    tokens.push_back(std::move(output));
    const std::vector<int32_t>& out = tokens.back();
    SampleRow r;
    r.logits_index = logits_index;
    r.params = &params.back();
    r.seed = seed;
    r.sample_index = sample_index;
    r.step = step;
    r.prompt_ids = pr;
    r.output_ids = out;
    rows.push_back(r);
    return rows.back();
  }
  SampleRow& add(int32_t logits_index, const RowSpec& s, int32_t logprobs = 0) {
    SamplingParams p;
    p.temperature = s.temperature;
    p.top_k = s.top_k;
    p.top_p = s.top_p;
    p.min_p = s.min_p;
    p.logprobs = logprobs;
    return add(logits_index, p, s.seed, s.sample_index, s.step);
  }
};

// Packs `rows` with SamplingPlan (logits entry i is device row i), runs the
// kernel and reads the results back as the backend does.
std::vector<SampleResult> sample_on_device(const std::vector<float>& logits, int32_t vocab,
                                           const std::vector<SampleRow>& rows) {
  const auto num_logits = static_cast<int32_t>(logits.size() / vocab);
  EXPECT_TRUE(validate_sample_rows(rows, num_logits).ok());
  std::vector<int32_t> device_row(static_cast<size_t>(num_logits));
  for (int32_t i = 0; i < num_logits; ++i) device_row[i] = i;
  SamplingPlan plan;
  plan.build(rows, device_row, vocab);

  DeviceBuffer d_logits, d_in, d_out, d_ws;
  EXPECT_TRUE(cuda_test::upload(d_logits, logits));
  EXPECT_TRUE(cuda_test::upload(d_in, plan.inputs()));
  EXPECT_TRUE(cuda_test::allocate(d_out, plan.output_bytes()));
  const size_t ws_bytes = pvllm_cuda_sampling_workspace_bytes(plan.num_penalty_slots(), vocab);
  EXPECT_TRUE(cuda_test::allocate(d_ws, ws_bytes + 16));
  DeviceSamplingParams p;
  plan.bind(d_in.get(), d_out.get(), d_logits.as<float>(), d_ws.get(), ws_bytes, &p);
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned char> out;
  EXPECT_TRUE(cuda_test::download(d_out, plan.output_bytes(), &out));
  std::vector<SampleResult> results;
  plan.read_results(rows, out.data(), &results);
  return results;
}

// The tokens a draw may return, straight from the definitions: rank by
// (logit / T desc, id asc); keep the top k; keep the shortest prefix whose
// probability (renormalised over the top k) reaches top_p; drop tokens with
// p < min_p * p_max.
std::set<int32_t> allowed_tokens(const float* row, int32_t vocab, const SamplingParams& r) {
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

// Every row's device result equals the host sampler's on the same logits:
// token, and the logprobs the row asked for.
void expect_matches_host(const std::vector<float>& logits, int32_t vocab,
                         const std::vector<SampleRow>& rows, bool check_allowed_set) {
  const std::vector<SampleResult> dev = sample_on_device(logits, vocab, rows);
  ASSERT_EQ(dev.size(), rows.size());
  int num_bad = 0;
  for (size_t r = 0; r < rows.size() && num_bad < 10; ++r) {
    const SampleRow& row = rows[r];
    const SamplingParams& s = *row.params;
    const SampleResult host = sample_row(logits.data(), vocab, row);
    const std::string what = "row " + std::to_string(r) + " T=" + std::to_string(s.temperature) +
                             " k=" + std::to_string(s.top_k) + " p=" + std::to_string(s.top_p) +
                             " min_p=" + std::to_string(s.min_p) +
                             " rep=" + std::to_string(s.repetition_penalty) +
                             " seed=" + std::to_string(row.seed);
    if (dev[r].token_id != host.token_id) ++num_bad;
    EXPECT_EQ(dev[r].token_id, host.token_id) << what;
    if (s.logprobs >= 0 && std::isfinite(host.logprob)) {
      EXPECT_NEAR(dev[r].logprob, host.logprob, 1e-5) << what;
    }
    ASSERT_EQ(dev[r].top_logprobs.size(), host.top_logprobs.size()) << what;
    for (size_t j = 0; j < host.top_logprobs.size(); ++j) {
      EXPECT_EQ(dev[r].top_logprobs[j].token_id, host.top_logprobs[j].token_id) << what;
      EXPECT_NEAR(dev[r].top_logprobs[j].logprob, host.top_logprobs[j].logprob, 1e-5) << what;
    }
    const bool unpenalized =
        s.repetition_penalty == 1.0f && s.presence_penalty == 0.0f && s.frequency_penalty == 0.0f;
    if (check_allowed_set && unpenalized && s.temperature > 0.0f) {
      const float* logits_row = logits.data() + static_cast<size_t>(row.logits_index) * vocab;
      EXPECT_TRUE(allowed_tokens(logits_row, vocab, s).count(dev[r].token_id))
          << what << ": token " << dev[r].token_id << " is outside the filtered set";
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
  // Penalty and logprob arrays come as a set.
  p.repetition_penalty = f;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaErrorInvalidValue);
  p.repetition_penalty = nullptr;
  p.num_logprobs = i;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaErrorInvalidValue);
  p.num_logprobs = nullptr;
  // Penalized rows need their workspace.
  p.num_penalty_slots = 1;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaErrorInvalidValue);
  p.num_penalty_slots = 0;
  p.num_rows = 0;
  EXPECT_EQ(pvllm_cuda_sample(p, nullptr), cudaSuccess);  // nothing to do, nothing launched
}

TEST(CudaSamplingValidation, WorkspaceHoldsOneRowPerPenaltySlot) {
  EXPECT_EQ(pvllm_cuda_sampling_workspace_bytes(0, 32000), 0u);
  EXPECT_EQ(pvllm_cuda_sampling_workspace_bytes(3, 32000), 3u * 32000u * sizeof(float));
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
  Rows rows;
  for (int32_t r = 0; r < num_rows; ++r) {
    RowSpec s;
    s.temperature = 0.0f;
    rows.add(r, s, /*logprobs=*/3);
  }
  expect_matches_host(logits, vocab, rows.rows, false);
}

// Every combination of filters, many seeds; row r reads logits row r.
Rows filter_rows(int32_t count, uint64_t seed_base, int32_t logprobs = 0) {
  const RowSpec kinds[] = {
      {1.0f, 0, 1.0f, 0.0f},     {0.7f, 50, 1.0f, 0.0f},   {1.3f, 0, 0.9f, 0.0f},
      {1.0f, 0, 1.0f, 0.05f},    {0.8f, 100, 0.8f, 0.02f}, {1.0f, 1, 1.0f, 0.0f},
      {1.1f, 2000, 0.95f, 0.0f}, {0.5f, 0, 0.3f, 0.0f},    {2.0f, 40, 0.7f, 0.1f},
      {1.0f, 0, 0.0f, 0.0f},
  };
  Rows rows;
  for (int32_t r = 0; r < count; ++r) {
    RowSpec s = kinds[r % (sizeof(kinds) / sizeof(kinds[0]))];
    s.seed = seed_base + 7919u * r;
    s.sample_index = r % 3;
    s.step = r * 13;
    rows.add(r, s, logprobs);
  }
  return rows;
}

TEST(CudaSampling, SeededDrawsMatchHostSampler) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  for (int32_t vocab : {1, 2, 17, 1000, 32000}) {
    const int32_t num_rows = vocab >= 32000 ? 100 : 200;
    const std::vector<float> logits = random_logits(num_rows, vocab, 100 + vocab, 3.0f);
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    expect_matches_host(logits, vocab, filter_rows(num_rows, 12345).rows, true);
  }
}

TEST(CudaSampling, SeededDrawsMatchHostSamplerOnLargeVocab) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  for (int32_t vocab : {128256, 262144}) {
    const int32_t num_rows = 20;
    const std::vector<float> logits = random_logits(num_rows, vocab, 7 + vocab, 4.0f);
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    expect_matches_host(logits, vocab, filter_rows(num_rows, 999, 5).rows, true);
  }
}

TEST(CudaSampling, TiedLogitsRankByLowerIdAsHost) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  // Logits on a few levels: top-k and top-p boundaries fall inside runs of
  // equal logits, where only the id decides; so do the top-k logprobs.
  const int32_t vocab = 5000;
  const int32_t num_rows = 120;
  std::vector<float> logits = random_logits(num_rows, vocab, 5, 1.0f);
  for (float& v : logits) v = std::round(v * 2.0f) / 2.0f;
  Rows rows = filter_rows(num_rows, 4242, 7);
  for (size_t r = 0; r < rows.rows.size(); ++r) {
    SamplingParams& p = rows.params[r];
    p.top_k = static_cast<int32_t>(3 + 37 * r % 700);
    p.top_p = 0.61f + 0.003f * static_cast<float>(r % 100);
  }
  expect_matches_host(logits, vocab, rows.rows, true);
}

TEST(CudaSampling, SameCounterGivesSameTokenAndDifferentStepsVary) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  // A flat distribution over 64 tokens: the draw is decided by u alone.
  const int32_t vocab = 64;
  const int32_t num_rows = 64;
  const std::vector<float> logits(size_t(num_rows) * vocab, 0.0f);
  Rows rows;
  for (int32_t r = 0; r < num_rows; ++r) {
    RowSpec s;
    s.seed = 77;
    s.step = r / 2;  // rows 2i and 2i+1 share a counter
    rows.add(r, s, -1);
  }
  const std::vector<SampleResult> dev = sample_on_device(logits, vocab, rows.rows);
  std::set<int32_t> distinct;
  for (int32_t r = 0; r < num_rows; r += 2) {
    EXPECT_EQ(dev[r].token_id, dev[r + 1].token_id) << "row " << r;
    // With a flat distribution the token is floor(u * 64), u from the host.
    const double u = sampler_uniform(77, 0, r / 2);
    EXPECT_EQ(dev[r].token_id, static_cast<int32_t>(u * 64)) << "row " << r;
    distinct.insert(dev[r].token_id);
  }
  EXPECT_GT(distinct.size(), 10u) << "32 draws over 64 tokens should rarely collide this much";
}

TEST(CudaSampling, PenaltiesMatchHostSampler) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const int32_t vocab = 1000;
  const int32_t num_logits = 6;
  std::vector<float> logits = random_logits(num_logits, vocab, 31, 2.0f);
  // Row 0's best token is 10, a close second 11: a repetition penalty on 10
  // must hand the greedy pick to 11.
  logits[10] = 9.0f;
  logits[11] = 8.9f;
  // Row 1: negative logits seen in the prompt are pushed further down.
  for (int32_t i = 0; i < vocab; ++i) logits[vocab + i] = -std::abs(logits[vocab + i]) - 1.0f;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  auto random_ids = [&](int32_t n) {
    std::vector<int32_t> v;
    for (int32_t i = 0; i < n; ++i) v.push_back(id(rng));
    return v;
  };
  Rows rows;
  SamplingParams rep;
  rep.temperature = 0.0f;
  rep.repetition_penalty = 1.3f;
  rep.logprobs = 2;  // logprobs stay those of the raw logits
  rows.add(0, rep, 1, 0, 0, {10, 3, 3, 999}, {});
  rows.add(1, rep, 1, 0, 2, random_ids(50), random_ids(7));
  SamplingParams additive;
  additive.temperature = 0.0f;
  additive.presence_penalty = 0.7f;
  additive.frequency_penalty = 0.45f;
  // Token 10 three times in the output: 9.0 - (0.7 + 3 * 0.45) < 8.9.
  rows.add(0, additive, 2, 0, 5, {11, 11}, {10, 10, 4, 10, 4});
  // Out-of-range ids are ignored, as on the host.
  rows.add(2, additive, 2, 0, 4, {-5, vocab + 3}, {vocab, -1, 7, 7});
  // Every penalty at once, drawn with filters, n-style rows sharing logits.
  for (int32_t k = 0; k < 12; ++k) {
    SamplingParams all;
    all.temperature = 0.6f + 0.1f * static_cast<float>(k % 4);
    all.top_k = k % 3 == 0 ? 0 : 30 * k;
    all.top_p = k % 2 == 0 ? 1.0f : 0.9f;
    all.min_p = k % 5 == 0 ? 0.02f : 0.0f;
    all.repetition_penalty = k % 4 == 1 ? 1.0f : 1.1f + 0.05f * static_cast<float>(k);
    all.presence_penalty = k % 3 == 2 ? 0.0f : -0.2f + 0.1f * static_cast<float>(k);
    all.frequency_penalty = 0.05f * static_cast<float>(k % 6);
    all.logprobs = k % 2 == 0 ? -1 : k;
    rows.add(3 + k % 3, all, 1000 + k, k % 4, 10 + k, random_ids(200), random_ids(40 + k));
  }
  // Penalties that act on nothing (no output yet, no repetition penalty).
  SamplingParams idle;
  idle.presence_penalty = 1.0f;
  idle.frequency_penalty = 1.0f;
  rows.add(5, idle, 9, 1, 0, random_ids(30), {});
  expect_matches_host(logits, vocab, rows.rows, true);

  const std::vector<SampleResult> dev = sample_on_device(logits, vocab, rows.rows);
  EXPECT_EQ(dev[0].token_id, 11) << "the repetition penalty must move the greedy pick";
  EXPECT_EQ(dev[2].token_id, 11) << "presence and frequency must move the greedy pick";
  ASSERT_EQ(dev[0].top_logprobs.size(), 2u);
  EXPECT_EQ(dev[0].top_logprobs[0].token_id, 10) << "top logprobs rank the raw logits";
}

TEST(CudaSampling, StructuredOutputMasksMatchHostSampler) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const int32_t vocab = 1000;
  const size_t words = (vocab + 63) / 64;
  std::vector<float> logits = random_logits(4, vocab, 77, 2.0f);
  logits[5] = 20.0f;  // row 0's best token, refused by every mask below
  std::mt19937 rng(9);
  auto mask_of = [&](int keep_one_in) {
    std::vector<uint64_t> m(words, 0);
    for (int32_t id = 0; id < vocab; ++id) {
      if (id != 5 && rng() % keep_one_in == 0) m[id >> 6] |= uint64_t{1} << (id & 63);
    }
    return m;
  };
  std::deque<std::vector<uint64_t>> masks;
  Rows rows;
  for (int32_t k = 0; k < 16; ++k) {
    masks.push_back(mask_of(1 + k % 7));
    SamplingParams p;
    p.temperature = k % 4 == 0 ? 0.0f : 0.5f + 0.1f * static_cast<float>(k);
    p.top_k = k % 3 == 1 ? 20 : 0;
    p.top_p = k % 5 == 2 ? 0.8f : 1.0f;
    p.repetition_penalty = k % 6 == 3 ? 1.2f : 1.0f;
    p.logprobs = k % 2;
    SampleRow& r = rows.add(k % 4, p, 100 + k, 0, k, {1, 2, 3, 5}, {7, 7});
    r.allowed = masks.back();
  }
  // A mask that allows one token, one that allows nothing (-1, as the
  // host), and an unmasked row in the same batch.
  masks.emplace_back(words, 0);
  masks.back()[999 >> 6] |= uint64_t{1} << (999 & 63);
  rows.add(0, SamplingParams{}, 1, 0, 0).allowed = masks.back();
  masks.emplace_back(words, 0);
  rows.add(1, SamplingParams{}, 1, 0, 0).allowed = masks.back();
  rows.add(0, SamplingParams{}, 1, 0, 0);
  expect_matches_host(logits, vocab, rows.rows, false);
  const std::vector<SampleResult> dev = sample_on_device(logits, vocab, rows.rows);
  for (size_t r = 0; r < 16; ++r) {
    EXPECT_TRUE(token_allowed(rows.rows[r].allowed, dev[r].token_id)) << r;
  }
  EXPECT_EQ(dev[16].token_id, 999);
  EXPECT_EQ(dev[17].token_id, -1);
  EXPECT_EQ(dev[18].token_id, 5) << "the unmasked row keeps its best token";
}

TEST(CudaSampling, LogprobsOfEveryCountMatchHost) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  for (int32_t vocab : {5, 17, 32000}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int32_t num_logits = 4;
    const std::vector<float> logits = random_logits(num_logits, vocab, 3 + vocab, 2.5f);
    Rows rows;
    int32_t r = 0;
    for (int32_t k : {-1, 0, 1, 5, 20, 0, 20, -1}) {
      RowSpec s;
      s.temperature = r % 2 == 0 ? 0.0f : 0.9f;
      s.seed = 50 + r;
      rows.add(r % num_logits, s, k);
      ++r;
    }
    expect_matches_host(logits, vocab, rows.rows, false);
    const std::vector<SampleResult> dev = sample_on_device(logits, vocab, rows.rows);
    EXPECT_TRUE(dev[0].top_logprobs.empty());
    EXPECT_EQ(dev[4].top_logprobs.size(), static_cast<size_t>(std::min(20, vocab)));
  }
}

}  // namespace
}  // namespace pvllm
