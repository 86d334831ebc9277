// Prompt logprobs (SamplingParams::prompt_logprobs): against a reference
// made here from one unchunked forward pass of the CPU backend and a
// log-softmax written in the test; the same through chunked prefill, a warm
// prefix cache, n samples and preemption; and the generated tokens
// unchanged by asking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/backend/registry.h"
#include "core/model/model.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

struct Expected {
  double logprob = 0;            // of the prompt token
  std::vector<int32_t> top_ids;  // best first
  std::vector<double> top_logprobs;
};

class PromptLogprobsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 128;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("prompt_logprobs"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  static std::vector<int32_t> prompt() {
    std::vector<int32_t> p{1};
    for (int32_t i = 1; i < 30; ++i) p.push_back(3 + (i * 37) % 250);
    return p;
  }

  static EngineConfig config() {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 1;
    c.block_size = 8;
    c.max_num_batched_tokens = 8;  // the 30-token prompt runs in four chunks
    return c;
  }

  // Entry i for prompt token i + 1: one forward pass over the whole prompt
  // on a fresh CPU backend, and the log-softmax of each row in double.
  static std::vector<Expected> reference(const std::vector<int32_t>& tokens, int32_t k) {
    std::unique_ptr<Model> model;
    EXPECT_TRUE(load_model(*model_dir_, &model).ok());
    BackendOptions o;
    o.block_size = 8;
    o.num_blocks = 8;
    o.num_threads = 1;
    std::unique_ptr<Backend> backend;
    EXPECT_TRUE(create_backend("cpu", *model, o, &backend).ok());
    const int32_t n = static_cast<int32_t>(tokens.size());
    BatchMetadata md;
    md.num_tokens = n;
    md.num_seqs = 1;
    md.input_ids = tokens;
    md.query_start = {0, n};
    md.context_lens = {n};
    md.max_blocks_per_seq = (n + 7) / 8;
    for (int32_t p = 0; p < n; ++p) {
      md.positions.push_back(p);
      md.slot_mapping.push_back(p);  // blocks 0, 1, ... in order
      md.logits_rows.push_back(p);
    }
    for (int32_t b = 0; b < md.max_blocks_per_seq; ++b) md.block_tables.push_back(b);
    const int32_t vocab = model->config.vocab_size;
    std::vector<float> logits(static_cast<size_t>(n) * vocab);
    EXPECT_TRUE(backend->forward(md, logits.data()).ok());
    std::vector<Expected> out;
    for (int32_t p = 0; p + 1 < n; ++p) {
      const float* row = logits.data() + static_cast<size_t>(p) * vocab;
      const double max = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int32_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
      const double lse = max + std::log(sum);
      Expected e;
      e.logprob = row[tokens[p + 1]] - lse;
      std::vector<int32_t> ids(vocab);
      std::iota(ids.begin(), ids.end(), 0);
      std::stable_sort(ids.begin(), ids.end(),
                       [row](int32_t a, int32_t b) { return row[a] > row[b]; });
      for (int32_t i = 0; i < k; ++i) {
        e.top_ids.push_back(ids[i]);
        e.top_logprobs.push_back(row[ids[i]] - lse);
      }
      out.push_back(e);
    }
    return out;
  }

  static void expect_matches(const std::vector<OutputLogprobs>& got,
                             const std::vector<Expected>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    const std::vector<int32_t> tokens = prompt();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].token_id, tokens[i + 1]) << what << " entry " << i;
      EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-4) << what << " entry " << i;
      ASSERT_EQ(got[i].top.size(), want[i].top_ids.size()) << what << " entry " << i;
      for (size_t j = 0; j < got[i].top.size(); ++j) {
        EXPECT_EQ(got[i].top[j].token_id, want[i].top_ids[j]) << what << " entry " << i;
        EXPECT_NEAR(got[i].top[j].logprob, want[i].top_logprobs[j], 1e-4) << what;
      }
    }
  }

  // The prompt logprobs a request's events carry: exactly one event has
  // them (the request's first), or none.
  static std::vector<OutputLogprobs> prompt_logprobs_of(const std::vector<Output>& events,
                                                        uint64_t id, bool* first) {
    std::vector<OutputLogprobs> found;
    int carriers = 0;
    bool seen_event = false;
    *first = false;
    for (const Output& ev : events) {
      if (ev.request_id != id) continue;
      if (!ev.prompt_logprobs.empty()) {
        ++carriers;
        *first = !seen_event;
        found = ev.prompt_logprobs;
      }
      seen_event = true;
    }
    EXPECT_LE(carriers, 1) << "prompt logprobs on " << carriers << " events";
    return found;
  }

  static std::vector<int32_t> tokens_of(const std::vector<Output>& events, uint64_t id,
                                        int32_t sample) {
    std::vector<int32_t> t;
    for (const Output& ev : events) {
      if (ev.request_id == id && ev.sample_index == sample) {
        t.insert(t.end(), ev.token_ids.begin(), ev.token_ids.end());
      }
    }
    return t;
  }

  static std::string* model_dir_;
};

std::string* PromptLogprobsTest::model_dir_ = nullptr;

TEST_F(PromptLogprobsTest, ChunkedPromptMatchesOneForwardPass) {
  const std::vector<Expected> want = reference(prompt(), 3);
  auto engine = make_engine(config());
  SamplingParams p = greedy(5);
  p.ignore_eos = true;
  uint64_t plain = 0, asked = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(), p, 0, &plain).ok());
  const std::vector<Output> plain_events = run_events(engine.get());
  bool first = false;
  EXPECT_TRUE(prompt_logprobs_of(plain_events, plain, &first).empty());
  // Now the prompt is in the prefix cache; asking computes it whole anyway.
  p.prompt_logprobs = 3;
  ASSERT_TRUE(engine->submit_tokens(prompt(), p, 0, &asked).ok());
  const std::vector<Output> events = run_events(engine.get());
  expect_matches(prompt_logprobs_of(events, asked, &first), want, "after a warm cache");
  EXPECT_TRUE(first) << "the prompt logprobs come with the request's first event";
  EXPECT_EQ(tokens_of(events, asked, 0), tokens_of(plain_events, plain, 0))
      << "asking for prompt logprobs changed the generated tokens";
  // k = 0: each prompt token's own logprob, no alternatives.
  p.prompt_logprobs = 0;
  uint64_t bare = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(), p, 0, &bare).ok());
  const std::vector<OutputLogprobs> got =
      prompt_logprobs_of(run_events(engine.get()), bare, &first);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].top.empty());
    EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-4);
  }
}

TEST_F(PromptLogprobsTest, NSamplesAndPreemptionKeepThemWhole) {
  const std::vector<Expected> want = reference(prompt(), 2);
  EngineConfig c = config();
  c.num_kv_blocks = 9;  // two 30-token prompts and their tokens do not fit together
  c.max_model_len = 64;
  auto engine = make_engine(c);
  SamplingParams p;
  p.temperature = 0.8f;
  p.has_seed = true;
  p.seed = 5;
  p.n = 2;
  p.max_tokens = 20;
  p.ignore_eos = true;
  p.prompt_logprobs = 2;
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt(), p, 0, &a).ok());
  ASSERT_TRUE(engine->submit_tokens(prompt(), p, 1, &b).ok());
  const std::vector<Output> events = run_events(engine.get());
  EXPECT_GT(engine->stats().num_preemptions, 0) << "the pool was meant to force a preemption";
  bool first = false;
  expect_matches(prompt_logprobs_of(events, a, &first), want, "request a");
  expect_matches(prompt_logprobs_of(events, b, &first), want, "request b");
  // The same seeded request without prompt logprobs draws the same tokens.
  auto calm = make_engine(config());
  p.prompt_logprobs = -1;
  uint64_t ref = 0;
  ASSERT_TRUE(calm->submit_tokens(prompt(), p, 0, &ref).ok());
  const std::vector<Output> ref_events = run_events(calm.get());
  for (int32_t s = 0; s < 2; ++s) {
    EXPECT_EQ(tokens_of(events, a, s), tokens_of(ref_events, ref, s)) << "sample " << s;
    EXPECT_EQ(tokens_of(events, b, s), tokens_of(ref_events, ref, s)) << "sample " << s;
  }
}

TEST_F(PromptLogprobsTest, OutOfRangeIsRefused) {
  auto engine = make_engine(config());
  SamplingParams p = greedy(2);
  uint64_t id = 0;
  for (int32_t k : {-2, 21}) {
    p.prompt_logprobs = k;
    const Status st = engine->submit_tokens(prompt(), p, 0, &id);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << k;
    EXPECT_NE(st.message().find("prompt_logprobs"), std::string::npos) << st.message();
  }
  // A one-token prompt has no prompt logprobs to give, and that is no error.
  p.prompt_logprobs = 1;
  ASSERT_TRUE(engine->submit_tokens({1}, p, 0, &id).ok());
  bool first = false;
  EXPECT_TRUE(prompt_logprobs_of(run_events(engine.get()), id, &first).empty());
}

}  // namespace
}  // namespace pvllm::testing
