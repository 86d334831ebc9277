// Speculative decoding through the C ABI (0.11): pvllm_engine_params'
// speculative fields on the real stories260K checkpoint give the same greedy
// tokens as without, pvllm_stats counts the drafts; a request that keeps
// out (sampling.speculative = 0) has none; an unknown method and bad sizes
// are INVALID_ARGUMENT naming the field; a 0.10 caller (whose struct ends
// before the fields) gets none.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/integration/capi_generate.h"

namespace pvllm::testing {
namespace {

std::string stories260k() {
  const char* dir = std::getenv("PVLLM_REPO_MODELS");
  return dir != nullptr && *dir != '\0' ? std::string(dir) + "/stories260K/stories260K.bin"
                                        : std::string();
}

class CapiSpeculativeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = stories260k();
    ASSERT_FALSE(model_.empty()) << "PVLLM_REPO_MODELS is not set (ctest sets it)";
  }

  pvllm_engine_params params(const char* speculative, int32_t k) const {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof(p));
    p.model_path = model_.c_str();
    p.device = "cpu";
    p.num_threads = 2;
    p.speculative = speculative;
    p.speculative_tokens = k;
    return p;
  }

  // Greedy tokens of "Once upon a time" and the engine's counters;
  // `keep_out`: the request sets sampling.speculative = 0.
  static std::vector<int32_t> generate(const pvllm_engine_params& p, bool keep_out,
                                       pvllm_stats* stats) {
    std::vector<int32_t> ids;
    std::string message;
    EXPECT_EQ(generate_greedy(p, 60, &ids, &message, stats, keep_out ? 0 : 1), PVLLM_STATUS_OK)
        << message;
    return ids;
  }

  std::string model_;
};

TEST_F(CapiSpeculativeTest, PromptLookupGivesTheSameTokensAndCountsItsDrafts) {
  pvllm_stats plain_stats, spec_stats, out_stats;
  const std::vector<int32_t> plain = generate(params(nullptr, 4), false, &plain_stats);
  ASSERT_EQ(plain.size(), 60u);
  EXPECT_EQ(plain_stats.num_spec_drafts, 0);
  for (int32_t k : {1, 4, 8}) {
    EXPECT_EQ(generate(params("ngram", k), false, &spec_stats), plain) << "k " << k;
    EXPECT_GT(spec_stats.num_spec_drafts, 0) << "k " << k;
    EXPECT_GE(spec_stats.num_spec_proposed_tokens, spec_stats.num_spec_accepted_tokens);
    int64_t by_position = 0;
    for (int64_t n : spec_stats.spec_accepted_at) by_position += n;
    EXPECT_EQ(by_position, spec_stats.num_spec_accepted_tokens);
  }
  EXPECT_EQ(generate(params("ngram", 4), true, &out_stats), plain);
  EXPECT_EQ(out_stats.num_spec_drafts, 0) << "the request kept out";
}

TEST_F(CapiSpeculativeTest, BadValuesAreInvalidArgumentNamingTheField) {
  struct Case {
    const char* method;
    int32_t k;
    const char* says;
  };
  for (const Case& c : {Case{"draft", 4, "speculative must be"},
                        Case{"ngram", 0, "speculative_tokens must be in [1, 16]"},
                        Case{"ngram", 17, "speculative_tokens must be in [1, 16]"}}) {
    std::vector<int32_t> ids;
    std::string message;
    EXPECT_EQ(generate_greedy(params(c.method, c.k), 4, &ids, &message),
              PVLLM_STATUS_INVALID_ARGUMENT)
        << c.method << " " << c.k;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
  }
}

TEST_F(CapiSpeculativeTest, ACallerBuiltBeforeTheFieldsGetsNone) {
  // A 0.10 caller's struct ends right after kv_cache_dtype: whatever lies
  // beyond it in memory is not read.
  pvllm_engine_params p = params("ngram", 4);
  const size_t size_0_10 = offsetof(pvllm_engine_params, speculative);
  p.struct_size = static_cast<uint32_t>(size_0_10);
  pvllm_stats old_stats, new_stats;
  const std::vector<int32_t> ids = generate(p, false, &old_stats);
  EXPECT_EQ(ids.size(), 60u);
  EXPECT_EQ(old_stats.num_spec_drafts, 0);
  EXPECT_EQ(generate(params("ngram", 4), false, &new_stats), ids);
  EXPECT_GT(new_stats.num_spec_drafts, 0) << "the full struct turns it on";
}

}  // namespace
}  // namespace pvllm::testing
