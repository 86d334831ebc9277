// Sampler and SamplingParams: every expectation is computed independently of
// the implementation (softmax, nucleus, top-k sets, log-softmax).
#include "core/sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace pvllm {
namespace {

std::vector<float> random_logits(int32_t num_tokens, uint32_t seed, float scale = 3.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> logits(num_tokens);
  for (float& v : logits) v = dist(gen);
  return logits;
}

// softmax(logits / temperature) in long double.
std::vector<double> reference_probs(const std::vector<float>& logits, double temperature) {
  long double max_x = *std::max_element(logits.begin(), logits.end()) / temperature;
  long double sum = 0;
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = static_cast<double>(std::exp(logits[i] / temperature - max_x));
    sum += p[i];
  }
  for (double& v : p) v = static_cast<double>(v / sum);
  return p;
}

// Ids ordered by probability, best first, ties by lower id.
std::vector<int32_t> ranked(const std::vector<double>& p) {
  std::vector<int32_t> ids(p.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  return ids;
}

std::set<int32_t> nucleus(const std::vector<double>& p, double top_p) {
  std::set<int32_t> out;
  double mass = 0;
  for (int32_t id : ranked(p)) {
    out.insert(id);
    mass += p[id];
    if (mass >= top_p) break;
  }
  return out;
}

class SamplerTest : public ::testing::Test {
 protected:
  SampleResult sample(const std::vector<float>& logits, const SamplingParams& params,
                      int32_t step = 0, uint64_t seed = 1234, int32_t sample_index = 0,
                      const std::vector<int32_t>& prompt = {},
                      const std::vector<int32_t>& output = {}) {
    return sample_token(logits, params, prompt, output, seed, sample_index, step);
  }

  // Token counts over `num_draws` consecutive steps of one seeded sequence.
  std::vector<int64_t> histogram(const std::vector<float>& logits, const SamplingParams& params,
                                 int32_t num_draws, uint64_t seed = 99) {
    std::vector<int64_t> counts(logits.size(), 0);
    for (int32_t step = 0; step < num_draws; ++step) {
      const int32_t id = sample(logits, params, step, seed).token_id;
      EXPECT_GE(id, 0);
      EXPECT_LT(id, static_cast<int32_t>(logits.size()));
      if (id >= 0 && id < static_cast<int32_t>(logits.size())) ++counts[id];
    }
    return counts;
  }

  static SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }
};

// ---- greedy ----------------------------------------------------------------

TEST_F(SamplerTest, GreedyPicksArgmax) {
  const std::vector<float> logits = random_logits(1000, 7);
  const auto expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
  for (int32_t step = 0; step < 5; ++step) {
    EXPECT_EQ(sample(logits, greedy(), step, 1000 + step).token_id, expected);
  }
}

TEST_F(SamplerTest, GreedyPicksLowestIdOnTies) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  EXPECT_EQ(sample(logits, greedy()).token_id, 1);
}

// ---- randomness --------------------------------------------------------------

TEST_F(SamplerTest, UniformIsInUnitIntervalAndRepeatable) {
  for (int32_t step = 0; step < 10000; ++step) {
    const float u = sampler_uniform(42, 3, step);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u, sampler_uniform(42, 3, step));
  }
}

TEST_F(SamplerTest, UniformDiffersAcrossSeedsIndicesAndSteps) {
  std::set<float> seen;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    for (int32_t index = 0; index < 10; ++index) {
      for (int32_t step = 0; step < 10; ++step) seen.insert(sampler_uniform(seed, index, step));
    }
  }
  // 1000 draws from 2^24 values: a handful of collisions at most.
  EXPECT_GT(seen.size(), 990u);
}

TEST_F(SamplerTest, UniformMeanAndSpreadMatchUniformDistribution) {
  constexpr int kNumDraws = 100000;
  std::vector<int> bins(10, 0);
  double sum = 0;
  for (int32_t step = 0; step < kNumDraws; ++step) {
    const float u = sampler_uniform(5, 0, step);
    sum += u;
    ++bins[static_cast<int>(u * 10)];
  }
  // Mean of U[0,1) has standard deviation 1/sqrt(12 n) ~ 0.0009.
  EXPECT_NEAR(sum / kNumDraws, 0.5, 0.005);
  double chi2 = 0;
  for (int c : bins) chi2 += (c - kNumDraws / 10.0) * (c - kNumDraws / 10.0) / (kNumDraws / 10.0);
  EXPECT_LT(chi2, 40.0);  // 9 degrees of freedom; p ~ 1e-5
}

TEST_F(SamplerTest, SameCounterGivesSameToken) {
  const std::vector<float> logits = random_logits(500, 11, 1.0f);
  SamplingParams params;
  for (int32_t step = 0; step < 50; ++step) {
    const int32_t first = sample(logits, params, step, 77, 2).token_id;
    EXPECT_EQ(sample(logits, params, step, 77, 2).token_id, first);
  }
}

TEST_F(SamplerTest, DifferentSeedsAndIndicesGiveDifferentTokens) {
  // A flat distribution over 500 tokens: two independent streams agree on
  // about 1 draw in 500.
  const std::vector<float> logits(500, 0.0f);
  SamplingParams params;
  int num_same_seed_differs = 0;
  int num_same_index_differs = 0;
  for (int32_t step = 0; step < 200; ++step) {
    const int32_t base = sample(logits, params, step, 1, 0).token_id;
    num_same_seed_differs += base != sample(logits, params, step, 2, 0).token_id;
    num_same_index_differs += base != sample(logits, params, step, 1, 1).token_id;
  }
  EXPECT_GT(num_same_seed_differs, 190);
  EXPECT_GT(num_same_index_differs, 190);
}

TEST_F(SamplerTest, EmpiricalDistributionMatchesTemperedSoftmax) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -2.0f, 0.7f};
  for (float temperature : {0.7f, 1.0f, 1.8f}) {
    SamplingParams params;
    params.temperature = temperature;
    constexpr int32_t kNumDraws = 20000;
    const std::vector<int64_t> counts = histogram(logits, params, kNumDraws);
    const std::vector<double> p = reference_probs(logits, temperature);
    double chi2 = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const double expected = p[i] * kNumDraws;
      chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    // 7 degrees of freedom: P(chi2 > 35) ~ 1e-5.
    EXPECT_LT(chi2, 35.0) << "temperature " << temperature;
  }
}

TEST_F(SamplerTest, MaskedAndNanLogitsAreNeverChosen) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, std::nanf(""), 1.0f, -inf, 0.5f};
  EXPECT_EQ(sample(logits, greedy()).token_id, 2);
  SamplingParams params;
  params.temperature = 5.0f;
  const std::vector<int64_t> counts = histogram(logits, params, 500);
  EXPECT_EQ(counts[0] + counts[1] + counts[3], 0);
  EXPECT_GT(counts[2], 0);
  EXPECT_GT(counts[4], 0);
}

// ---- filters -------------------------------------------------------------

TEST_F(SamplerTest, TopKNeverLeavesTheKBest) {
  const std::vector<float> logits = random_logits(1000, 3, 0.5f);
  const std::vector<int32_t> order = ranked(reference_probs(logits, 1.0));
  const std::set<int32_t> best(order.begin(), order.begin() + 5);
  SamplingParams params;
  params.top_k = 5;
  params.temperature = 2.0f;
  const std::vector<int64_t> counts = histogram(logits, params, 2000);
  std::set<int32_t> drawn;
  for (int32_t id = 0; id < 1000; ++id) {
    if (counts[id] > 0) drawn.insert(id);
  }
  EXPECT_TRUE(std::includes(best.begin(), best.end(), drawn.begin(), drawn.end()));
  EXPECT_EQ(drawn, best);  // at temperature 2 all five are likely enough to appear
}

TEST_F(SamplerTest, TopKBreaksTiesByLowerId) {
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  SamplingParams params;
  params.top_k = 2;
  const std::vector<int64_t> counts = histogram(logits, params, 500);
  EXPECT_EQ(counts[0] + counts[3] + counts[4], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[2], 0);
}

TEST_F(SamplerTest, TopPNeverLeavesTheNucleus) {
  const std::vector<float> logits = random_logits(200, 5, 1.5f);
  for (float top_p : {0.3f, 0.8f}) {
    SamplingParams params;
    params.top_p = top_p;
    const std::set<int32_t> allowed = nucleus(reference_probs(logits, 1.0), top_p);
    const std::vector<int64_t> counts = histogram(logits, params, 3000);
    std::set<int32_t> drawn;
    for (int32_t id = 0; id < 200; ++id) {
      if (counts[id] > 0) drawn.insert(id);
    }
    for (int32_t id : drawn) EXPECT_TRUE(allowed.count(id)) << "token " << id << " top_p " << top_p;
    EXPECT_GT(drawn.size(), 1u);
  }
}

TEST_F(SamplerTest, TopPOnLargeVocabularyKeepsAWideNucleus) {
  // A nucleus of thousands of tokens in a 64k vocabulary.
  const std::vector<float> logits = random_logits(65536, 8, 1.0f);
  SamplingParams params;
  params.top_p = 0.5f;
  const std::set<int32_t> allowed = nucleus(reference_probs(logits, 1.0), 0.5);
  ASSERT_GT(allowed.size(), 1000u);
  std::set<int32_t> drawn;
  for (int32_t step = 0; step < 300; ++step) {
    const int32_t id = sample(logits, params, step).token_id;
    EXPECT_TRUE(allowed.count(id)) << "token " << id;
    drawn.insert(id);
  }
  EXPECT_GT(drawn.size(), 200u);
}

TEST_F(SamplerTest, TinyTopPKeepsOnlyTheBestToken) {
  const std::vector<float> logits = random_logits(300, 9, 1.0f);
  const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  SamplingParams params;
  params.top_p = 1e-6f;
  for (int32_t step = 0; step < 50; ++step) EXPECT_EQ(sample(logits, params, step).token_id, best);
}

TEST_F(SamplerTest, TopKThenTopPActsOnTheTopKDistribution) {
  // probs 0.4, 0.3, 0.2, 0.1. Full-vocabulary masses 0.4, 0.7, 0.9 would need
  // token 2 to reach 0.75; renormalised over the top 3 (0.44, 0.78, 1.0) the
  // first two already do.
  const std::vector<float> logits = {std::log(4.0f), std::log(3.0f), std::log(2.0f),
                                     std::log(1.0f)};
  SamplingParams params;
  params.top_k = 3;
  params.top_p = 0.75f;
  const std::vector<int64_t> counts = histogram(logits, params, 3000);
  EXPECT_EQ(counts[2], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[1], 0);
}

TEST_F(SamplerTest, MinPDropsUnlikelyTokens) {
  const std::vector<float> logits = random_logits(300, 13, 1.0f);
  const std::vector<double> p = reference_probs(logits, 1.0);
  const double max_p = *std::max_element(p.begin(), p.end());
  SamplingParams params;
  params.min_p = 0.2f;
  const std::vector<int64_t> counts = histogram(logits, params, 3000);
  int num_drawn = 0;
  for (int32_t id = 0; id < 300; ++id) {
    if (counts[id] == 0) continue;
    ++num_drawn;
    EXPECT_GE(p[id], 0.2 * max_p) << "token " << id;
  }
  EXPECT_GT(num_drawn, 1);
}

// ---- penalties -------------------------------------------------------------

TEST_F(SamplerTest, RepetitionPenaltyDividesPositiveLogits) {
  const std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  SamplingParams params = greedy();
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {0}).token_id, 0);
  params.repetition_penalty = 1.2f;  // 2.0 / 1.2 = 1.67 < 1.9
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {0}).token_id, 1);
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {}, {0}).token_id, 1);
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {2}).token_id, 0);  // unseen tokens are untouched
}

TEST_F(SamplerTest, RepetitionPenaltyMultipliesNegativeLogits) {
  const std::vector<float> logits = {-1.0f, -1.1f, -5.0f};
  SamplingParams params = greedy();
  params.repetition_penalty = 1.2f;  // -1.0 * 1.2 = -1.2 < -1.1 (dividing would raise it)
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {0}).token_id, 1);
}

TEST_F(SamplerTest, RepetitionPenaltyAppliesOncePerToken) {
  const std::vector<float> logits = {2.0f, 1.5f};
  SamplingParams params = greedy();
  params.repetition_penalty = 1.2f;  // 2.0 / 1.2 = 1.67 > 1.5 even when seen often
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {0, 0, 0}, {0, 0}).token_id, 0);
}

TEST_F(SamplerTest, PresencePenaltyIsSubtractedOnce) {
  const std::vector<float> logits = {3.0f, 2.5f};
  SamplingParams params = greedy();
  params.presence_penalty = 0.6f;  // 2.4 < 2.5
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {}, {0}).token_id, 1);
  params.presence_penalty = 0.4f;  // 2.6 > 2.5 however often token 0 appeared
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {}, {0, 0, 0}).token_id, 0);
  params.presence_penalty = 0.6f;  // prompt tokens do not count
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {0}, {}).token_id, 0);
}

TEST_F(SamplerTest, FrequencyPenaltyScalesWithCount) {
  const std::vector<float> logits = {3.0f, 2.5f};
  SamplingParams params = greedy();
  params.frequency_penalty = 0.2f;
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {}, {0}).token_id, 0);        // 2.8
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {}, {0, 0, 0}).token_id, 1);  // 2.4
  EXPECT_EQ(sample(logits, params, 0, 1, 0, {0, 0, 0}, {}).token_id, 0);  // prompt ignored
}

TEST_F(SamplerTest, PenaltiesShapeTheRandomDrawToo) {
  // Token 0 dominates until a large presence penalty removes it.
  const std::vector<float> logits = {10.0f, 0.0f, 0.0f};
  SamplingParams params;
  params.presence_penalty = 100.0f;
  const std::vector<int64_t> counts = [&] {
    std::vector<int64_t> c(3, 0);
    for (int32_t step = 0; step < 200; ++step)
      ++c[sample(logits, params, step, 1, 0, {}, {0}).token_id];
    return c;
  }();
  EXPECT_EQ(counts[0], 0);
}

// ---- logprobs ----------------------------------------------------------------

TEST_F(SamplerTest, LogprobsAreLogSoftmaxOfRawLogits) {
  const std::vector<float> logits = random_logits(2000, 17, 2.0f);
  SamplingParams params;
  params.temperature = 0.5f;  // logprobs ignore temperature and penalties
  params.presence_penalty = 1.0f;
  params.logprobs = 5;
  const std::vector<double> p = reference_probs(logits, 1.0);
  const std::vector<int32_t> order = ranked(p);
  for (int32_t step = 0; step < 20; ++step) {
    const SampleResult r = sample(logits, params, step, 3, 0, {}, {order[0]});
    EXPECT_NEAR(r.logprob, std::log(p[r.token_id]), 1e-4);
    ASSERT_EQ(r.top_logprobs.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(r.top_logprobs[i].token_id, order[i]);
      EXPECT_NEAR(r.top_logprobs[i].logprob, std::log(p[order[i]]), 1e-4);
      if (i > 0) {
        EXPECT_GE(r.top_logprobs[i - 1].logprob, r.top_logprobs[i].logprob);
      }
    }
  }
}

TEST_F(SamplerTest, TopLogprobsBreakTiesByLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, 1.0f, 3.0f, 2.0f};
  SamplingParams params = greedy();
  params.logprobs = 4;
  const SampleResult r = sample(logits, params);
  ASSERT_EQ(r.top_logprobs.size(), 4u);
  const std::vector<int32_t> expected = {1, 3, 4, 0};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.top_logprobs[i].token_id, expected[i]);
}

TEST_F(SamplerTest, NoLogprobsAreComputedUnlessAsked) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  SamplingParams params = greedy();
  params.logprobs = -1;
  const SampleResult r = sample(logits, params);
  EXPECT_EQ(r.token_id, 2);
  EXPECT_EQ(r.logprob, 0.0f);
  EXPECT_TRUE(r.top_logprobs.empty());
}

TEST_F(SamplerTest, SampleRowReadsItsLogitsRow) {
  const std::vector<float> logits = {5.0f, 0.0f, 0.0f, /* row 1 */ 0.0f, 0.0f, 5.0f};
  SamplingParams params = greedy();
  SampleRow row;
  row.params = &params;
  row.logits_index = 1;
  EXPECT_EQ(sample_row(logits.data(), 3, row).token_id, 2);
  row.logits_index = 0;
  EXPECT_EQ(sample_row(logits.data(), 3, row).token_id, 0);
}

TEST_F(SamplerTest, SampleRowsOutsideTheLogitsOrWithoutParamsAreInvalid) {
  SamplingParams params;
  std::vector<SampleRow> rows(2);
  rows[0].params = &params;
  rows[1].params = &params;
  rows[1].logits_index = 1;
  EXPECT_TRUE(validate_sample_rows(rows, 2).ok());
  EXPECT_EQ(validate_sample_rows(rows, 1).code(), StatusCode::kInvalidArgument);
  rows[1].logits_index = -1;
  EXPECT_EQ(validate_sample_rows(rows, 2).code(), StatusCode::kInvalidArgument);
  rows[1].logits_index = 0;
  rows[0].params = nullptr;
  EXPECT_EQ(validate_sample_rows(rows, 2).code(), StatusCode::kInvalidArgument);
}

TEST_F(SamplerTest, ZeroLogprobsGivesOnlyTheChosenToken) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  SamplingParams params = greedy();
  params.logprobs = 0;
  const SampleResult r = sample(logits, params);
  EXPECT_EQ(r.token_id, 2);
  EXPECT_TRUE(r.top_logprobs.empty());
  const double lse = std::log(1.0 + std::exp(1.0) + std::exp(2.0));
  EXPECT_NEAR(r.logprob, 2.0 - lse, 1e-5);
}

// ---- validate ----------------------------------------------------------------

TEST(SamplingParamsTest, DefaultsAreValid) { EXPECT_TRUE(SamplingParams{}.validate(100).ok()); }

struct BadParamsCase {
  const char* field;
  void (*spoil)(SamplingParams&);
};

class SamplingParamsRejectTest : public ::testing::TestWithParam<BadParamsCase> {};

TEST_P(SamplingParamsRejectTest, RejectsAndNamesTheField) {
  SamplingParams params;
  GetParam().spoil(params);
  const Status s = params.validate(100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(GetParam().field), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(
    EachField, SamplingParamsRejectTest,
    ::testing::Values(
        BadParamsCase{"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
        BadParamsCase{"temperature", [](SamplingParams& p) { p.temperature = NAN; }},
        BadParamsCase{"temperature", [](SamplingParams& p) { p.temperature = INFINITY; }},
        BadParamsCase{"top_k", [](SamplingParams& p) { p.top_k = -1; }},
        BadParamsCase{"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
        BadParamsCase{"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
        BadParamsCase{"top_p", [](SamplingParams& p) { p.top_p = NAN; }},
        BadParamsCase{"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
        BadParamsCase{"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
        BadParamsCase{"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
        BadParamsCase{"repetition_penalty",
                      [](SamplingParams& p) { p.repetition_penalty = -1.0f; }},
        BadParamsCase{"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }},
        BadParamsCase{"stop_token_ids",
                      [](SamplingParams& p) {
                        p.stop_token_ids = {5, 100};
                      }},
        BadParamsCase{"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {-1}; }},
        BadParamsCase{"stop",
                      [](SamplingParams& p) {
                        p.stop = {"ok", ""};
                      }},
        BadParamsCase{"logprobs", [](SamplingParams& p) { p.logprobs = -2; }},
        BadParamsCase{"logprobs", [](SamplingParams& p) { p.logprobs = 21; }},
        BadParamsCase{"n", [](SamplingParams& p) { p.n = 0; }},
        BadParamsCase{"repetition_penalty",
                      [](SamplingParams& p) { p.repetition_penalty = INFINITY; }},
        BadParamsCase{"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = NAN; }},
        BadParamsCase{"presence_penalty", [](SamplingParams& p) { p.presence_penalty = INFINITY; }},
        BadParamsCase{"presence_penalty", [](SamplingParams& p) { p.presence_penalty = NAN; }},
        BadParamsCase{"frequency_penalty",
                      [](SamplingParams& p) { p.frequency_penalty = -INFINITY; }},
        BadParamsCase{"prompt_logprobs", [](SamplingParams& p) { p.prompt_logprobs = 21; }},
        // Beam search fields are checked whether or not beam search is on.
        BadParamsCase{"beam_width", [](SamplingParams& p) { p.beam_width = -1; }},
        BadParamsCase{"beam_width", [](SamplingParams& p) { p.beam_width = 11; }},
        BadParamsCase{"length_penalty", [](SamplingParams& p) { p.length_penalty = INFINITY; }},
        BadParamsCase{"early_stopping",
                      [](SamplingParams& p) { p.early_stopping = static_cast<EarlyStopping>(-1); }},
        BadParamsCase{"early_stopping", [](SamplingParams& p) {
                        p.early_stopping = static_cast<EarlyStopping>(3);
                      }}));

TEST(SamplingParamsTest, AcceptsBoundaryValues) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.max_tokens = 1;
  p.stop_token_ids = {0, 99};
  p.stop = {"x"};
  p.logprobs = 20;
  EXPECT_TRUE(p.validate(100).ok());
  p.logprobs = -1;
  EXPECT_TRUE(p.validate(100).ok());
}

// Beam search ranks tokens by the raw distribution: everything that would
// shape or randomize it is refused with a message naming the field and
// beam search, each setting alone on otherwise valid beam params.
TEST(SamplingParamsTest, BeamSearchRefusesWhatWouldShapeTheDistribution) {
  SamplingParams beams;
  beams.temperature = 0.0f;
  beams.beam_width = 3;
  beams.n = 3;
  ASSERT_TRUE(beams.validate(100).ok());
  const std::vector<BadParamsCase> cases = {
      {"n", [](SamplingParams& p) { p.n = 4; }},
      {"temperature", [](SamplingParams& p) { p.temperature = 0.5f; }},
      {"top_k", [](SamplingParams& p) { p.top_k = 1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.5f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 0.05f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 1.2f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 0.5f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -0.5f; }},
      {"stop", [](SamplingParams& p) { p.stop = {"."}; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = 1; }},
  };
  for (const BadParamsCase& c : cases) {
    SamplingParams p = beams;
    c.spoil(p);
    const Status s = p.validate(100);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(s.message().rfind(std::string("sampling params: ") + c.field + " ", 0), 0u)
        << s.message();
    EXPECT_NE(s.message().find("beam"), std::string::npos) << s.message();
    // The same setting without beam search is valid.
    p.beam_width = 0;
    EXPECT_TRUE(p.validate(100).ok()) << c.field;
  }
}

TEST(SamplingParamsTest, AcceptsBeamSearchBoundaryValues) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.beam_width = SamplingParams::kMaxBeamWidth;
  p.n = SamplingParams::kMaxBeamWidth;
  p.logprobs = 0;
  p.length_penalty = -2.0f;
  p.early_stopping = EarlyStopping::kNever;
  p.stop_token_ids = {0, 99};
  EXPECT_TRUE(p.validate(100).ok());
  p.beam_width = 1;
  p.n = 1;
  p.logprobs = -1;
  p.length_penalty = 0.0f;
  p.early_stopping = EarlyStopping::kTrue;
  EXPECT_TRUE(p.validate(100).ok());
}

}  // namespace
}  // namespace pvllm
