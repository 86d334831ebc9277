// Speculative decoding's proposers (core/spec): prompt lookup against a
// direct reading of its rule (the longest tail of min_n..max_n tokens with
// an earlier occurrence, its latest occurrence, what followed it) on random
// token strings from a small alphabet, plus the edges; the replay proposer
// right for exactly the tokens it is told.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/spec/ngram_proposer.h"
#include "core/spec/replay_proposer.h"

namespace pvllm {
namespace {

std::vector<int32_t> propose(Proposer& p, const std::vector<int32_t>& tokens, int32_t k,
                             int32_t num_prompt = 0, uint64_t request = 1) {
  std::vector<int32_t> out = {-7};  // cleared by propose
  p.propose({request, 0, tokens, num_prompt}, k, &out);
  return out;
}

// The rule, read directly: for n from max_n down to min_n, the starts
// s < len - n with tokens[s, s + n) == the tail; the last of those followed
// by k tokens (s + n + k <= len), else the first (followed by the most);
// then up to k tokens from s + n.
std::vector<int32_t> reference(const std::vector<int32_t>& t, int32_t min_n, int32_t max_n,
                               int32_t k) {
  const int len = static_cast<int>(t.size());
  for (int n = max_n; n >= min_n; --n) {
    if (n >= len) continue;
    int found = -1, first = -1;
    for (int s = 0; s + n < len; ++s) {
      bool same = true;
      for (int i = 0; i < n; ++i) same = same && t[s + i] == t[len - n + i];
      if (!same) continue;
      if (first < 0) first = s;
      if (s + n + k <= len) found = s;
    }
    if (found < 0) found = first;
    if (found < 0) continue;
    std::vector<int32_t> out;
    for (int i = found + n; i < len && static_cast<int>(out.size()) < k; ++i) out.push_back(t[i]);
    return out;
  }
  return {};
}

TEST(NgramProposerTest, AgreesWithTheRuleOnRandomStrings) {
  std::mt19937 rng(38);
  int proposed = 0;
  for (int round = 0; round < 3000; ++round) {
    const int32_t alphabet = 2 + static_cast<int32_t>(rng() % 5);
    std::vector<int32_t> t(1 + rng() % 40);
    for (int32_t& v : t) v = static_cast<int32_t>(rng() % alphabet);
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 3);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 3);
    const int32_t k = 1 + static_cast<int32_t>(rng() % 8);
    NgramProposer p(min_n, max_n);
    const std::vector<int32_t> got = propose(p, t, k);
    ASSERT_EQ(got, reference(t, min_n, max_n, k)) << "round " << round;
    proposed += !got.empty();
  }
  EXPECT_GT(proposed, 1000);
}

TEST(NgramProposerTest, LongestTailThenLatestOccurrence) {
  NgramProposer p(1, 3);
  // Tail "1 2 3" occurs at 0 (then 9); tail "2 3" also occurs at 5 (then
  // 8), later: the longer tail wins.
  EXPECT_EQ(propose(p, {1, 2, 3, 9, 9, 2, 3, 8, 0, 1, 2, 3}, 4),
            (std::vector<int32_t>{9, 9, 2, 3}));
  // Two occurrences of the longest tail: the latest.
  EXPECT_EQ(propose(p, {5, 6, 1, 5, 6, 2, 5, 6}, 1), (std::vector<int32_t>{2}));
  // In a loop the latest occurrence overlaps the tail: an earlier one
  // followed by k tokens.
  EXPECT_EQ(propose(p, {4, 4, 4, 4, 4, 4}, 3), (std::vector<int32_t>{4, 4, 4}));
  NgramProposer two(2, 2);
  EXPECT_EQ(propose(two, {1, 7, 8, 9, 7, 8, 3, 7, 8}, 3), (std::vector<int32_t>{3, 7, 8}));
  EXPECT_EQ(propose(two, {1, 7, 8, 9, 7, 8, 3, 7, 8}, 4), (std::vector<int32_t>{9, 7, 8, 3}));
  // What follows is cut at the sequence's end, and at k.
  EXPECT_EQ(propose(p, {4, 7, 4}, 5), (std::vector<int32_t>{7, 4}));
  EXPECT_EQ(propose(p, {4, 7, 4}, 1), (std::vector<int32_t>{7}));
  // No earlier occurrence, k 0, a single token, tails shorter than min_n.
  EXPECT_TRUE(propose(p, {1, 2, 3, 4}, 3).empty());
  EXPECT_TRUE(propose(p, {1, 1}, 0).empty());
  EXPECT_TRUE(propose(p, {1}, 3).empty());
  NgramProposer long_only(3, 4);
  EXPECT_TRUE(propose(long_only, {1, 2, 9, 1, 2}, 3).empty());
  EXPECT_EQ(propose(long_only, {1, 2, 3, 9, 1, 2, 3}, 3), (std::vector<int32_t>{9, 1, 2}));
}

TEST(ReplayProposerTest, RightForExactlyTheTokensItIsTold) {
  const std::vector<int32_t> prompt = {10, 11, 12};
  const std::vector<int32_t> continuation = {5, 6, 7, 8, 9, 4};
  for (int32_t right : {-1, 0, 1, 2, 3}) {
    ReplayProposer p(16, right);
    p.expect(7, 0, continuation);
    for (size_t generated = 0; generated <= continuation.size(); ++generated) {
      std::vector<int32_t> tokens = prompt;
      tokens.insert(tokens.end(), continuation.begin(), continuation.begin() + generated);
      const std::vector<int32_t> got = propose(p, tokens, 4, 3, 7);
      const size_t expect_len = std::min<size_t>(4, continuation.size() - generated);
      ASSERT_EQ(got.size(), expect_len);
      for (size_t i = 0; i < got.size(); ++i) {
        const bool should_be_right = right < 0 || static_cast<int32_t>(i) < right;
        EXPECT_EQ(got[i] == continuation[generated + i], should_be_right)
            << "right " << right << " generated " << generated << " i " << i;
        EXPECT_GE(got[i], 0);
        EXPECT_LT(got[i], 16);
      }
    }
    // Another request, or another sample of it: nothing to propose.
    EXPECT_TRUE(propose(p, prompt, 4, 3, 8).empty());
  }
}

}  // namespace
}  // namespace pvllm
