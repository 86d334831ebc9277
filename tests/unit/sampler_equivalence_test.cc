// The sampler gives the same tokens and logprobs as the 0.4.0 sampler kept in
// sampler_reference.cc, bit for bit, over random rows (with NaN, infinities
// and ties) and every kind of params: greedy, temperature, top-k, top-p,
// min-p, penalties, logprobs, and n samples of one seed. Faster sampling
// must not change what a seeded request generates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/sample/sampler.h"
#include "tests/unit/sampler_reference.h"

namespace pvllm {
namespace {

std::vector<float> awkward_logits(std::mt19937* rng, int32_t vocab) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> kind(0, 99);
  std::vector<float> x(vocab);
  for (float& v : x) {
    const int k = kind(*rng);
    if (k == 0) {
      v = std::numeric_limits<float>::quiet_NaN();
    } else if (k == 1) {
      v = std::numeric_limits<float>::infinity();
    } else if (k == 2) {
      v = -std::numeric_limits<float>::infinity();
    } else if (k < 10) {
      v = 2.5f;  // ties
    } else if (k == 10) {
      v = -0.0f;
    } else {
      v = normal(*rng);
    }
  }
  return x;
}

SamplingParams random_params(std::mt19937* rng, int32_t vocab) {
  std::uniform_int_distribution<int> pick(0, 9);
  SamplingParams p;
  p.temperature = pick(*rng) < 3 ? 0.0f : 0.3f + 0.2f * static_cast<float>(pick(*rng));
  if (pick(*rng) < 4) p.top_k = 1 + pick(*rng) * vocab / 10;
  if (pick(*rng) < 4) p.top_p = 0.05f + 0.1f * static_cast<float>(pick(*rng));
  if (pick(*rng) < 3) p.min_p = 0.02f * static_cast<float>(pick(*rng));
  if (pick(*rng) < 3) p.repetition_penalty = 1.0f + 0.1f * static_cast<float>(pick(*rng));
  if (pick(*rng) < 3) p.presence_penalty = 0.1f * static_cast<float>(pick(*rng) - 3);
  if (pick(*rng) < 3) p.frequency_penalty = 0.1f * static_cast<float>(pick(*rng) - 3);
  p.logprobs = pick(*rng) < 4 ? pick(*rng) - 1 : -1;
  return p;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(SamplerEquivalence, SameTokensAndLogprobsAsThe040Sampler) {
  std::mt19937 rng(2026);
  int64_t compared = 0;
  for (int32_t vocab : {1, 7, 512, 32000}) {
    const int rows = vocab >= 32000 ? 40 : 400;
    for (int r = 0; r < rows; ++r) {
      const bool awkward = r % 3 == 0;
      std::vector<float> logits = awkward ? awkward_logits(&rng, vocab) : std::vector<float>(vocab);
      if (!awkward) {
        std::normal_distribution<float> normal(0.0f, 2.0f + static_cast<float>(r % 5));
        for (float& v : logits) v = normal(rng);
      }
      const SamplingParams params = random_params(&rng, vocab);
      std::uniform_int_distribution<int32_t> id(-2, vocab + 1);  // some out of range
      std::vector<int32_t> prompt(r % 20), output(r % 13);
      for (int32_t& t : prompt) t = id(rng);
      for (int32_t& t : output) t = id(rng);
      const uint64_t seed = rng();
      for (int32_t sample_index = 0; sample_index < 2; ++sample_index) {
        for (int32_t step : {0, 5}) {
          const SampleResult got =
              sample_token(logits, params, prompt, output, seed, sample_index, step);
          const SampleResult want = testing::reference_sample_token(logits, params, prompt, output,
                                                                    seed, sample_index, step);
          ASSERT_EQ(got.token_id, want.token_id) << "vocab " << vocab << " row " << r;
          ASSERT_TRUE(same_bits(got.logprob, want.logprob)) << "vocab " << vocab << " row " << r;
          ASSERT_EQ(got.top_logprobs.size(), want.top_logprobs.size());
          for (size_t i = 0; i < got.top_logprobs.size(); ++i) {
            ASSERT_EQ(got.top_logprobs[i].token_id, want.top_logprobs[i].token_id);
            ASSERT_TRUE(same_bits(got.top_logprobs[i].logprob, want.top_logprobs[i].logprob));
          }
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 4000);
}

}  // namespace
}  // namespace pvllm
