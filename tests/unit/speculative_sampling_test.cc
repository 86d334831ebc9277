// Speculative sampling (core/sample/speculative.h): the token emitted at
// every position has the target's distribution p whatever the proposer's q.
// Checked by drawing: chains of k = 1-4 positions on vocabularies of 8-16
// tokens with random p and q, a million seeded chains in all; at each
// position a chi-square test of the emitted tokens against p (p-value above
// 1e-3) and the acceptances against sum(min(p, q)) within 4 sigma. Then the
// sure cases: q = p always accepted, a masked token never emitted, greedy
// accepting exactly the argmax; and sample_distribution against
// sample_token's own draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/sample/sampler.h"
#include "core/sample/speculative.h"

namespace pvllm {
namespace {

std::vector<double> random_distribution(int32_t n, std::mt19937_64& rng, double zero_share) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> p(n);
  double total = 0.0;
  for (double& v : p) {
    v = u(rng) < zero_share ? 0.0 : std::pow(u(rng), 2.0);
    total += v;
  }
  if (total == 0.0) {
    p[0] = 1.0;
    total = 1.0;
  }
  for (double& v : p) v /= total;
  return p;
}

int32_t draw(const std::vector<double>& q, std::mt19937_64& rng) {
  return static_cast<int32_t>(std::discrete_distribution<int32_t>(q.begin(), q.end())(rng));
}

// The regularised upper incomplete gamma function Q(a, x): the chi-square
// p-value is Q(df / 2, chi2 / 2). A series below a + 1, a continued
// fraction (modified Lentz) above.
double upper_gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_front = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (term < sum * 1e-15) break;
    }
    return 1.0 - sum * std::exp(log_front);
  }
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-15) break;
  }
  return std::exp(log_front) * h;
}

TEST(SpeculativeSamplingTest, ChiSquareOfTheIncompleteGammaIsRight) {
  // Known values: chi-square 3.84 at 1 degree of freedom is p 0.05; 23.21
  // at 10 is 0.01; 0 is 1.
  EXPECT_NEAR(upper_gamma_q(0.5, 3.841 / 2), 0.05, 1e-3);
  EXPECT_NEAR(upper_gamma_q(5.0, 23.209 / 2), 0.01, 1e-4);
  EXPECT_DOUBLE_EQ(upper_gamma_q(3.0, 0.0), 1.0);
}

TEST(SpeculativeSamplingTest, EmittedTokensFollowTheTargetAtEveryPosition) {
  std::mt19937_64 rng(38);
  int64_t chains = 0;
  int checked_positions = 0;
  for (int config = 0; config < 8; ++config) {
    const int32_t vocab = 8 + (config % 3) * 4;  // 8, 12, 16
    const int k = 1 + config % 4;
    std::vector<std::vector<double>> p, q;
    for (int i = 0; i < k; ++i) {
      p.push_back(random_distribution(vocab, rng, 0.2));
      q.push_back(random_distribution(vocab, rng, 0.2));
    }
    std::vector<std::vector<int64_t>> emitted(k, std::vector<int64_t>(vocab, 0));
    std::vector<int64_t> reached(k, 0), accepted(k, 0);
    const int64_t n = 125000;
    for (int64_t c = 0; c < n; ++c) {
      const uint64_t seed = static_cast<uint64_t>(config) << 40 | static_cast<uint64_t>(c);
      for (int i = 0; i < k; ++i) {
        ++reached[i];
        const int32_t proposal = draw(q[i], rng);
        const SpeculativeVerdict v = verify_proposal(p[i], proposal, q[i], seed, 0, i);
        ASSERT_GE(v.token_id, 0);
        ASSERT_GT(p[i][v.token_id], 0.0) << "a token the target rules out";
        ++emitted[i][v.token_id];
        if (!v.accepted) break;
        ++accepted[i];
      }
    }
    chains += n;
    for (int i = 0; i < k; ++i) {
      double chi2 = 0.0;
      int df = -1;
      for (int32_t t = 0; t < vocab; ++t) {
        if (p[i][t] == 0.0) continue;
        const double expect = p[i][t] * static_cast<double>(reached[i]);
        chi2 += (emitted[i][t] - expect) * (emitted[i][t] - expect) / expect;
        ++df;
      }
      const double p_value = upper_gamma_q(df / 2.0, chi2 / 2.0);
      EXPECT_GT(p_value, 1e-3) << "config " << config << " position " << i << " chi2 " << chi2
                               << " df " << df;
      double alpha = 0.0;
      for (int32_t t = 0; t < vocab; ++t) alpha += std::min(p[i][t], q[i][t]);
      const double mean = alpha * static_cast<double>(reached[i]);
      const double sigma = std::sqrt(static_cast<double>(reached[i]) * alpha * (1.0 - alpha));
      EXPECT_NEAR(static_cast<double>(accepted[i]), mean, 4.0 * sigma + 1.0)
          << "config " << config << " position " << i;
      ++checked_positions;
    }
  }
  EXPECT_EQ(chains, 1000000);
  EXPECT_EQ(checked_positions, 20);
}

TEST(SpeculativeSamplingTest, SureProposalsFollowTheTargetToo) {
  // No q: the proposal came surely (prompt lookup, a replay).
  std::mt19937_64 rng(7);
  const std::vector<double> p = random_distribution(10, rng, 0.3);
  std::vector<int64_t> emitted(10, 0);
  int64_t accepted = 0;
  const int64_t n = 200000;
  const int32_t proposal = static_cast<int32_t>(std::max_element(p.begin(), p.end()) -
                                                p.begin());  // often right, not always
  for (int64_t c = 0; c < n; ++c) {
    const SpeculativeVerdict v = verify_proposal(p, proposal, {}, static_cast<uint64_t>(c), 3, 5);
    ++emitted[v.token_id];
    accepted += v.accepted;
  }
  double chi2 = 0.0;
  int df = -1;
  for (int32_t t = 0; t < 10; ++t) {
    if (p[t] == 0.0) {
      EXPECT_EQ(emitted[t], 0);
      continue;
    }
    chi2 += (emitted[t] - p[t] * n) * (emitted[t] - p[t] * n) / (p[t] * n);
    ++df;
  }
  EXPECT_GT(upper_gamma_q(df / 2.0, chi2 / 2.0), 1e-3) << chi2;
  const double sigma = std::sqrt(n * p[proposal] * (1 - p[proposal]));
  EXPECT_NEAR(static_cast<double>(accepted), p[proposal] * n, 4 * sigma + 1);
}

TEST(SpeculativeSamplingTest, ProposalsDrawnFromTheTargetAreAlwaysAccepted) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<double> p = random_distribution(16, rng, 0.25);
    for (int d = 0; d < 200; ++d) {
      const int32_t proposal = draw(p, rng);
      const SpeculativeVerdict v =
          verify_proposal(p, proposal, p, static_cast<uint64_t>(trial * 1000 + d), 0, d);
      EXPECT_TRUE(v.accepted);
      EXPECT_EQ(v.token_id, proposal);
    }
  }
}

TEST(SpeculativeSamplingTest, MaskedTokensAreNeverEmitted) {
  // The target's distribution under a structured-output mask; proposals
  // anywhere, the masked ones included, sure or with a q that favours them.
  std::mt19937_64 rng(5);
  std::vector<float> logits(64);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& v : logits) v = normal(rng);
  std::vector<uint64_t> allowed = {0x00FF00FF00FF00FFull};
  SamplingParams params;
  params.temperature = 1.0f;
  std::vector<double> p;
  sample_distribution(logits, params, {}, {}, allowed, &p);
  std::vector<double> q(64, 0.0);
  for (int32_t t = 0; t < 64; ++t) q[t] = token_allowed(allowed, t) ? 0.1 : 1.0;
  double total = 0.0;
  for (double v : q) total += v;
  for (double& v : q) v /= total;
  for (int c = 0; c < 20000; ++c) {
    const int32_t proposal = draw(q, rng);
    for (const bool sure : {false, true}) {
      const SpeculativeVerdict v = verify_proposal(p, proposal, sure ? std::vector<double>{} : q,
                                                   static_cast<uint64_t>(c), 1, 2);
      ASSERT_TRUE(token_allowed(allowed, v.token_id)) << v.token_id;
      if (!token_allowed(allowed, proposal)) {
        EXPECT_FALSE(v.accepted);
      }
    }
  }
  // A mask that allows nothing: nothing is emitted.
  const std::vector<uint64_t> none = {0};
  sample_distribution(logits, params, {}, {}, none, &p);
  EXPECT_EQ(verify_proposal(p, 3, {}, 1, 0, 0).token_id, -1);
}

TEST(SpeculativeSamplingTest, GreedyAcceptsExactlyTheArgmax) {
  std::mt19937_64 rng(9);
  SamplingParams greedy;  // temperature 0
  greedy.temperature = 0.0f;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(32);
    for (float& v : logits) v = normal(rng);
    std::vector<double> p;
    sample_distribution(logits, greedy, {}, {}, {}, &p);
    const int32_t argmax = sample_token(logits, greedy, {}, {}, 0, 0, 0).token_id;
    for (int32_t proposal = 0; proposal < 32; ++proposal) {
      const SpeculativeVerdict v =
          verify_proposal(p, proposal, {}, static_cast<uint64_t>(trial), 0, proposal);
      EXPECT_EQ(v.accepted, proposal == argmax);
      EXPECT_EQ(v.token_id, argmax);
    }
  }
}

TEST(SpeculativeSamplingTest, SampleDistributionIsWhatSampleTokenDraws) {
  // sample_token's own draws over seeds against sample_distribution, with
  // penalties, temperature, top-k, top-p and min-p.
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(12);
  for (float& v : logits) v = normal(rng);
  const std::vector<int32_t> prompt = {1, 2, 2}, output = {4, 4, 7};
  for (int variant = 0; variant < 4; ++variant) {
    SamplingParams params;
    params.temperature = 0.8f;
    params.repetition_penalty = 1.3f;
    params.presence_penalty = 0.2f;
    if (variant == 1) params.top_k = 5;
    if (variant == 2) params.top_p = 0.7f;
    if (variant == 3) params.min_p = 0.15f;
    std::vector<double> p;
    sample_distribution(logits, params, prompt, output, {}, &p);
    double total = 0.0;
    for (double v : p) total += v;
    EXPECT_NEAR(total, 1.0, 1e-12);
    std::vector<int64_t> counts(12, 0);
    const int n = 200000;
    for (int s = 0; s < n; ++s) {
      ++counts[sample_token(logits, params, prompt, output, static_cast<uint64_t>(s), 0, 0)
                   .token_id];
    }
    double chi2 = 0.0;
    int df = -1;
    for (int32_t t = 0; t < 12; ++t) {
      if (p[t] == 0.0) {
        EXPECT_EQ(counts[t], 0) << "variant " << variant << " token " << t;
        continue;
      }
      chi2 += (counts[t] - p[t] * n) * (counts[t] - p[t] * n) / (p[t] * n);
      ++df;
    }
    EXPECT_GT(upper_gamma_q(df / 2.0, chi2 / 2.0), 1e-3) << "variant " << variant;
    if (variant > 0) {
      EXPECT_LT(df + 1, 12) << "the filter left every token in";
    }
  }
}

}  // namespace
}  // namespace pvllm
