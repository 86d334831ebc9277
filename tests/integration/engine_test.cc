// End-to-end behaviour of the Engine on tiny random-weight models the test
// writes itself: batching, chunked prefill, preemption, prefix caching,
// parallel sampling, stop conditions and aborts.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "kernels/cpu/cpu_backend.h"
#include "tests/integration/engine_harness.h"
#include "tests/integration/forwarding_backend.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 256;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("engine_test"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  EngineConfig config() const {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 2;
    return c;
  }

  // Prompts of varied lengths, as token ids (BOS first).
  std::vector<std::vector<int32_t>> prompts(int count, uint32_t seed = 7) const {
    std::vector<std::vector<int32_t>> out;
    uint32_t x = seed;
    for (int i = 0; i < count; ++i) {
      std::vector<int32_t> p{1};
      const int len = 3 + (i * 7) % 40;
      for (int k = 0; k < len; ++k) {
        x = x * 1664525u + 1013904223u;
        p.push_back(3 + static_cast<int32_t>((x >> 8) % (tiny_tokenizer_vocab_size() - 3)));
      }
      out.push_back(p);
    }
    return out;
  }

  // Runs each prompt alone in a fresh engine.
  std::vector<std::vector<int32_t>> run_alone(const std::vector<std::vector<int32_t>>& ps,
                                              const SamplingParams& params) {
    std::vector<std::vector<int32_t>> result;
    for (const auto& p : ps) {
      auto engine = make_engine(config());
      uint64_t id = 0;
      EXPECT_TRUE(engine->submit_tokens(p, params, 0, &id).ok());
      Outputs out = run_to_completion(engine.get());
      result.push_back(out.at({id, 0}).token_ids);
    }
    return result;
  }

  std::vector<std::vector<int32_t>> run_together(Engine* engine,
                                                 const std::vector<std::vector<int32_t>>& ps,
                                                 const SamplingParams& params) {
    std::vector<uint64_t> ids;
    for (const auto& p : ps) {
      uint64_t id = 0;
      EXPECT_TRUE(engine->submit_tokens(p, params, 0, &id).ok());
      ids.push_back(id);
    }
    Outputs out = run_to_completion(engine);
    std::vector<std::vector<int32_t>> result;
    for (uint64_t id : ids) result.push_back(out.at({id, 0}).token_ids);
    return result;
  }

  static std::string* model_dir_;
};

std::string* EngineTest::model_dir_ = nullptr;

TEST_F(EngineTest, BatchGivesSameTokensAsEachRequestAlone) {
  auto ps = prompts(6);
  SamplingParams p = greedy(20);
  p.ignore_eos = true;
  auto alone = run_alone(ps, p);
  auto engine = make_engine(config());
  EXPECT_EQ(run_together(engine.get(), ps, p), alone);
}

TEST_F(EngineTest, ChunkedPrefillGivesSameTokens) {
  auto ps = prompts(5);
  SamplingParams p = greedy(12);
  p.ignore_eos = true;
  auto alone = run_alone(ps, p);
  EngineConfig c = config();
  c.max_num_batched_tokens = 5;  // every prompt needs several steps
  auto engine = make_engine(c);
  EXPECT_EQ(run_together(engine.get(), ps, p), alone);
}

TEST_F(EngineTest, SeededSamplingIsIndependentOfBatchMates) {
  auto ps = prompts(5);
  SamplingParams seeded;
  seeded.temperature = 0.9f;
  seeded.top_p = 0.95f;
  seeded.max_tokens = 16;
  seeded.ignore_eos = true;
  seeded.has_seed = true;
  seeded.seed = 1234;
  auto alone = run_alone({ps[0]}, seeded);

  auto engine = make_engine(config());
  uint64_t id = 0;
  SamplingParams noisy = seeded;
  noisy.has_seed = false;  // batch mates draw from random seeds
  for (size_t i = 1; i < ps.size(); ++i) {
    uint64_t other = 0;
    ASSERT_TRUE(engine->submit_tokens(ps[i], noisy, 0, &other).ok());
  }
  ASSERT_TRUE(engine->submit_tokens(ps[0], seeded, 0, &id).ok());
  Outputs out = run_to_completion(engine.get());
  EXPECT_EQ(out.at({id, 0}).token_ids, alone[0]);
}

TEST_F(EngineTest, PreemptionRecomputesExactly) {
  auto ps = prompts(8);
  SamplingParams p;
  p.temperature = 0.8f;
  p.max_tokens = 40;
  p.ignore_eos = true;
  p.has_seed = true;
  p.seed = 99;
  auto roomy_engine = make_engine(config());
  auto roomy = run_together(roomy_engine.get(), ps, p);
  EXPECT_EQ(roomy_engine->stats().num_preemptions, 0);

  EngineConfig tight = config();
  tight.block_size = 8;
  tight.num_kv_blocks = 32;  // room for about three of the eight sequences
  auto engine = make_engine(tight);
  EXPECT_EQ(run_together(engine.get(), ps, p), roomy);
  EXPECT_GT(engine->stats().num_preemptions, 0);
  EngineStats s = engine->stats();
  EXPECT_EQ(s.num_blocks_used, 0);
  EXPECT_EQ(s.num_blocks_free + s.num_blocks_cached, s.num_blocks_total);
}

TEST_F(EngineTest, PrefixCacheHitsSkipPrefillAndKeepOutputs) {
  std::vector<int32_t> prompt = prompts(1)[0];
  while (prompt.size() < 70) prompt.push_back(5 + prompt.size() % 50);
  SamplingParams p = greedy(8);
  p.ignore_eos = true;

  EngineConfig off = config();
  off.enable_prefix_caching = false;
  auto cold = make_engine(off);
  auto expected = run_together(cold.get(), {prompt}, p)[0];

  auto engine = make_engine(config());
  EXPECT_EQ(run_together(engine.get(), {prompt}, p)[0], expected);
  const int64_t prefill_before = engine->stats().num_prompt_tokens_processed;
  EXPECT_EQ(run_together(engine.get(), {prompt}, p)[0], expected);
  EngineStats s = engine->stats();
  EXPECT_GT(s.prefix_cache_hits, 0);
  // 70 tokens in blocks of 16: four full blocks (64 tokens) come from the cache.
  EXPECT_EQ(s.num_prompt_tokens_processed - prefill_before, 70 - 64);
}

TEST_F(EngineTest, ParallelSamplesShareThePromptAndFinishOnce) {
  std::vector<int32_t> prompt = prompts(1)[0];
  while (prompt.size() < 64) prompt.push_back(9);
  SamplingParams p;
  p.n = 4;
  p.temperature = 1.0f;
  p.max_tokens = 6;
  p.ignore_eos = true;
  p.has_seed = true;
  p.has_seed = true;
  p.seed = 5;
  auto engine = make_engine(config());
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompt, p, 0, &id).ok());
  // Prefill, first samples, then peek at the pool while all four decode.
  Outputs out;
  ASSERT_TRUE(engine->step().ok());
  ASSERT_TRUE(engine->step().ok());
  EngineStats mid = engine->stats();
  EXPECT_EQ(mid.num_running, 4);
  // 64 prompt tokens = 4 shared blocks; each sample owns one more block.
  EXPECT_LE(mid.num_blocks_used, 4 + 4);
  collect(engine.get(), &out);
  Outputs rest = run_to_completion(engine.get());
  for (auto& [k, v] : rest) {
    auto& s = out[k];
    s.token_ids.insert(s.token_ids.end(), v.token_ids.begin(), v.token_ids.end());
    s.num_finish_events += v.num_finish_events;
  }
  ASSERT_EQ(out.size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (int k = 0; k < 4; ++k) {
    const SampleOutput& s = out.at({id, k});
    EXPECT_EQ(s.num_finish_events, 1);
    EXPECT_EQ(s.token_ids.size(), 6u);
    distinct.insert(s.token_ids);
  }
  EXPECT_GT(distinct.size(), 1u) << "four samples at temperature 1 should differ";
}

TEST_F(EngineTest, GreedyParallelSamplesAreIdentical) {
  SamplingParams p = greedy(10);
  p.n = 3;
  p.ignore_eos = true;
  auto engine = make_engine(config());
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 0, &id).ok());
  Outputs out = run_to_completion(engine.get());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out.at({id, 1}).token_ids, out.at({id, 0}).token_ids);
  EXPECT_EQ(out.at({id, 2}).token_ids, out.at({id, 0}).token_ids);
}

TEST_F(EngineTest, MaxTokensEndsWithLength) {
  SamplingParams p = greedy(7);
  p.ignore_eos = true;
  auto engine = make_engine(config());
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 0, &id).ok());
  Outputs out = run_to_completion(engine.get());
  EXPECT_EQ(out.at({id, 0}).token_ids.size(), 7u);
  EXPECT_EQ(out.at({id, 0}).finish_reason, FinishReason::kLength);
}

TEST_F(EngineTest, StopTokenEndsWithStopAndIsNotReported) {
  SamplingParams p = greedy(30);
  p.ignore_eos = true;
  auto engine = make_engine(config());
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 0, &id).ok());
  auto full = run_to_completion(engine.get()).at({id, 0}).token_ids;
  ASSERT_GE(full.size(), 5u);
  p.stop_token_ids = {full[4]};
  const auto first = std::find(full.begin(), full.end(), full[4]) - full.begin();
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 0, &id).ok());
  SampleOutput s = run_to_completion(engine.get()).at({id, 0});
  EXPECT_EQ(s.finish_reason, FinishReason::kStop);
  EXPECT_EQ(s.token_ids, std::vector<int32_t>(full.begin(), full.begin() + first));
}

TEST_F(EngineTest, StopStringCutsTheTextBeforeIt) {
  SamplingParams p = greedy(30);
  p.ignore_eos = true;
  auto engine = make_engine(config());
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_text("Once upon a time", p, 0, &id).ok());
  std::string full = run_to_completion(engine.get()).at({id, 0}).text;
  ASSERT_GE(full.size(), 8u);
  const std::string stop = full.substr(full.size() / 2, 3);
  p.stop = {stop};
  ASSERT_TRUE(engine->submit_text("Once upon a time", p, 0, &id).ok());
  SampleOutput s = run_to_completion(engine.get()).at({id, 0});
  EXPECT_EQ(s.finish_reason, FinishReason::kStop);
  EXPECT_EQ(s.text, full.substr(0, full.find(stop)));
}

TEST_F(EngineTest, StreamedTextEqualsDecodedTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 40;
  p.ignore_eos = true;
  p.has_seed = true;
  p.seed = 3;
  auto engine = make_engine(config());
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_text("The café", p, 0, &id).ok());
  SampleOutput s = run_to_completion(engine.get()).at({id, 0});
  std::vector<int32_t> prompt;
  ASSERT_TRUE(engine->tokenizer()->encode("The café", true, &prompt).ok());
  std::string whole, prompt_text;
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), s.token_ids.begin(), s.token_ids.end());
  ASSERT_TRUE(engine->tokenizer()->decode(all, &whole).ok());
  ASSERT_TRUE(engine->tokenizer()->decode(prompt, &prompt_text).ok());
  EXPECT_EQ(prompt_text + s.text, whole);
}

TEST_F(EngineTest, AbortEndsWaitingAndRunningRequestsOnce) {
  auto engine = make_engine(config());
  SamplingParams p = greedy(50);
  p.ignore_eos = true;
  uint64_t running = 0, waiting = 0;
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 0, &running).ok());
  ASSERT_TRUE(engine->step().ok());
  ASSERT_TRUE(engine->submit_tokens(prompts(2)[1], p, 0, &waiting).ok());
  ASSERT_TRUE(engine->abort(running).ok());
  ASSERT_TRUE(engine->abort(waiting).ok());
  Outputs out = run_to_completion(engine.get());
  EXPECT_EQ(out.at({running, 0}).finish_reason, FinishReason::kAbort);
  EXPECT_EQ(out.at({waiting, 0}).finish_reason, FinishReason::kAbort);
  EXPECT_EQ(engine->abort(running).code(), StatusCode::kNotFound);
  EXPECT_EQ(engine->stats().num_blocks_used, 0);
}

TEST_F(EngineTest, HigherPriorityRequestIsServedFirst) {
  EngineConfig c = config();
  c.max_num_seqs = 1;
  auto engine = make_engine(c);
  SamplingParams p = greedy(3);
  p.ignore_eos = true;
  uint64_t low = 0, high = 0;
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 5, &low).ok());
  ASSERT_TRUE(engine->submit_tokens(prompts(2)[1], p, -5, &high).ok());
  std::vector<uint64_t> finish_order;
  while (engine->has_unfinished()) {
    ASSERT_TRUE(engine->step().ok());
    std::vector<Output> evs;
    engine->poll(&evs);
    for (auto& e : evs)
      if (e.finish_reason != FinishReason::kNone) finish_order.push_back(e.request_id);
  }
  EXPECT_EQ(finish_order, (std::vector<uint64_t>{high, low}));
}

TEST_F(EngineTest, BadRequestsAreRejectedWithoutSideEffects) {
  EngineConfig c = config();
  c.max_model_len = 32;
  auto engine = make_engine(c);
  uint64_t id = 0;
  std::vector<int32_t> too_long(33, 5);
  Status st = engine->submit_tokens(too_long, greedy(4), 0, &id);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("33"), std::string::npos) << st.message();
  EXPECT_EQ(engine->submit_tokens({1, 100000}, greedy(4), 0, &id).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->submit_tokens({}, greedy(4), 0, &id).code(), StatusCode::kInvalidArgument);
  SamplingParams bad = greedy(4);
  bad.top_p = 0.0f;
  EXPECT_EQ(engine->submit_tokens({1, 5}, bad, 0, &id).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine->has_unfinished());
}

TEST_F(EngineTest, ContextLimitEndsWithLength) {
  EngineConfig c = config();
  c.max_model_len = 24;
  auto engine = make_engine(c);
  SamplingParams p = greedy(100);
  p.ignore_eos = true;
  uint64_t id = 0;
  std::vector<int32_t> prompt(10, 7);
  prompt[0] = 1;
  ASSERT_TRUE(engine->submit_tokens(prompt, p, 0, &id).ok());
  SampleOutput s = run_to_completion(engine.get()).at({id, 0});
  EXPECT_EQ(s.finish_reason, FinishReason::kLength);
  // Positions 0..23 are fed; the token sampled at position 23 is the last.
  EXPECT_EQ(s.token_ids.size(), 24u - 10u + 1u);
}

TEST_F(EngineTest, CreateRejectsBadConfigs) {
  std::unique_ptr<Engine> engine;
  EngineConfig c = config();
  c.block_size = 12;
  EXPECT_EQ(Engine::create(c, &engine).code(), StatusCode::kInvalidArgument);
  c = config();
  c.model_path = *model_dir_ + "/does-not-exist";
  EXPECT_EQ(Engine::create(c, &engine).code(), StatusCode::kNotFound);
  c = config();
  c.num_kv_blocks = 2;  // cannot hold one 256-token sequence
  EXPECT_EQ(Engine::create(c, &engine).code(), StatusCode::kInvalidArgument);
  c = config();
  c.device = "cuda:999";  // no such device, with or without a GPU
  EXPECT_EQ(Engine::create(c, &engine).code(), StatusCode::kUnsupported);
}

// A CPU backend that fails, with `code`, every batch holding a poisoned
// prompt: `poison` as its second token (position 1, which generated tokens
// never take). Counts the batches it was asked to run.
class FaultInjectingBackend final : public ForwardingBackend {
 public:
  FaultInjectingBackend(std::unique_ptr<Backend> inner, int32_t poison, StatusCode code)
      : ForwardingBackend(std::move(inner)), poison_(poison), code_(code) {}
  std::string name() const override { return "fault-injecting " + inner().name(); }
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override {
    PVLLM_RETURN_IF_ERROR(check(md));
    return inner().forward_sample(md, rows, out);
  }
  Status forward(const BatchMetadata& md, float* logits) override {
    PVLLM_RETURN_IF_ERROR(check(md));
    return inner().forward(md, logits);
  }

  int32_t num_faults = 0;
  int32_t max_seqs_in_a_failed_batch = 0;

 private:
  Status check(const BatchMetadata& md) {
    for (int32_t i = 0; i < md.num_tokens; ++i) {
      if (md.positions[i] == 1 && md.input_ids[i] == poison_) {
        ++num_faults;
        max_seqs_in_a_failed_batch = std::max(max_seqs_in_a_failed_batch, md.num_seqs);
        return Status(code_, "injected fault");
      }
    }
    return Status::Ok();
  }

  int32_t poison_;
  StatusCode code_;
};

// A CPU backend that runs `during_forward` inside each forward pass, that is
// in the middle of Engine::step, after the step has taken its aborts.
class HookedBackend final : public ForwardingBackend {
 public:
  HookedBackend(std::unique_ptr<Backend> inner, std::function<void()>* during_forward)
      : ForwardingBackend(std::move(inner)), during_forward_(during_forward) {}
  std::string name() const override { return "hooked " + inner().name(); }
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override {
    if (*during_forward_) (*during_forward_)();
    return inner().forward_sample(md, rows, out);
  }
  Status forward(const BatchMetadata& md, float* logits) override {
    if (*during_forward_) (*during_forward_)();
    return inner().forward(md, logits);
  }

 private:
  std::function<void()>* during_forward_;
};

// An abort that arrives while the step that finishes its request is
// running is accepted (the request is still live), so the request must end
// with kAbort; before, the step finished it with kLength and the accepted
// abort was silently dropped.
TEST_F(EngineTest, AnAbortAcceptedDuringTheFinishingStepEndsTheRequestWithAbort) {
  std::function<void()> during_forward;
  EngineConfig c = config();
  c.backend_factory = [&during_forward](const Model& m, const BackendOptions& o,
                                        std::unique_ptr<Backend>* out) {
    std::unique_ptr<Backend> cpu;
    PVLLM_RETURN_IF_ERROR(create_cpu_backend(m, o, &cpu));
    *out = std::make_unique<HookedBackend>(std::move(cpu), &during_forward);
    return Status::Ok();
  };
  auto engine = make_engine(c);
  SamplingParams p = greedy(3);
  p.ignore_eos = true;
  uint64_t finishing = 0;
  uint64_t other = 0;
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 0, &finishing).ok());
  SamplingParams longer = p;
  longer.max_tokens = 8;
  ASSERT_TRUE(engine->submit_tokens(prompts(2)[1], longer, 0, &other).ok());
  Outputs out;
  int steps = 0;
  Status abort_status = Internal("not called");
  while (engine->has_unfinished() && steps < 100) {
    ++steps;
    // The third token of `finishing` comes from the third step's forward.
    if (steps == 3) {
      during_forward = [&] { abort_status = engine->abort(finishing); };
    } else {
      during_forward = nullptr;
    }
    ASSERT_TRUE(engine->step().ok());
    collect(engine.get(), &out);
  }
  ASSERT_TRUE(abort_status.ok()) << "the abort came while the request was live";
  EXPECT_EQ(out.at({finishing, 0}).finish_reason, FinishReason::kAbort);
  EXPECT_EQ(out.at({finishing, 0}).num_finish_events, 1);
  EXPECT_EQ(out.at({finishing, 0}).token_ids.size(), 3u);
  EXPECT_EQ(out.at({other, 0}).finish_reason, FinishReason::kLength) << "untouched";
  EXPECT_EQ(out.at({other, 0}).token_ids.size(), 8u);
  EXPECT_EQ(engine->abort(finishing).code(), StatusCode::kNotFound) << "over now";
}

// Every event of a request carries the next number of that request's
// sequence, over all its samples, in the order the engine made them.
TEST_F(EngineTest, EventsAreNumberedPerRequestInTheOrderMade) {
  auto engine = make_engine(config());
  SamplingParams p = greedy(6);
  p.ignore_eos = true;
  p.n = 2;
  p.temperature = 0.7f;
  p.has_seed = true;
  p.seed = 5;
  uint64_t a = 0;
  uint64_t b = 0;
  ASSERT_TRUE(engine->submit_tokens(prompts(1)[0], p, 0, &a).ok());
  ASSERT_TRUE(engine->submit_tokens(prompts(2)[1], p, 0, &b).ok());
  std::map<uint64_t, uint64_t> next;
  while (engine->has_unfinished()) {
    ASSERT_TRUE(engine->step().ok());
    std::vector<Output> events;
    engine->poll(&events);
    for (const Output& ev : events) EXPECT_EQ(ev.sequence, next[ev.request_id]++);
  }
  EXPECT_EQ(next[a], 2u * 6u) << "one event per token per sample";
  EXPECT_EQ(next[b], 2u * 6u);
}

class EngineFaultTest : public EngineTest {
 protected:
  static constexpr int32_t kPoison = 4;

  // An engine whose backend fails batches holding a poisoned prompt.
  std::unique_ptr<Engine> faulty_engine(StatusCode code) {
    EngineConfig c = config();
    c.backend_factory = [this, code](const Model& m, const BackendOptions& o,
                                     std::unique_ptr<Backend>* out) {
      std::unique_ptr<Backend> cpu;
      PVLLM_RETURN_IF_ERROR(create_cpu_backend(m, o, &cpu));
      auto faulty = std::make_unique<FaultInjectingBackend>(std::move(cpu), kPoison, code);
      backend_ = faulty.get();
      *out = std::move(faulty);
      return Status::Ok();
    };
    return make_engine(c);
  }

  // prompts(count) with prompt `poisoned` carrying the poison, and no other.
  std::vector<std::vector<int32_t>> poisoned_prompts(int count, int poisoned) const {
    auto ps = prompts(count);
    for (int i = 0; i < count; ++i) {
      if (ps[i][1] == kPoison) ps[i][1] = kPoison + 1;
    }
    ps[poisoned][1] = kPoison;
    return ps;
  }

  // Steps to the end, tolerating failed steps; returns the statuses seen.
  std::vector<StatusCode> run_all(Engine* engine, Outputs* out) {
    std::vector<StatusCode> codes;
    for (int i = 0; i < 10000 && engine->has_unfinished(); ++i) {
      codes.push_back(engine->step().code());
      collect(engine, out);
    }
    EXPECT_FALSE(engine->has_unfinished());
    return codes;
  }

  FaultInjectingBackend* backend_ = nullptr;
};

TEST_F(EngineFaultTest, OutOfMemoryInAStepEndsOnlyTheRequestThatCannotRun) {
  const auto ps = poisoned_prompts(6, 2);
  SamplingParams p = greedy(12);
  p.ignore_eos = true;
  std::vector<std::vector<int32_t>> clean = ps;
  clean.erase(clean.begin() + 2);
  const auto alone = run_alone(clean, p);

  auto engine = faulty_engine(StatusCode::kOutOfMemory);
  std::vector<uint64_t> ids(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    SamplingParams q = p;
    if (i == 2) q.n = 2;  // both samples of the failed request end
    ASSERT_TRUE(engine->submit_tokens(ps[i], q, 0, &ids[i]).ok());
  }
  Outputs out;
  const std::vector<StatusCode> codes = run_all(engine.get(), &out);
  // All six prompts were scheduled together; the failing batch was split
  // until the poisoned request ran alone.
  EXPECT_EQ(backend_->max_seqs_in_a_failed_batch, 6);
  EXPECT_GT(backend_->num_faults, 1);
  EXPECT_EQ(codes.front(), StatusCode::kOutOfMemory) << "the step reports the failure";
  for (int32_t k = 0; k < 2; ++k) {
    const SampleOutput& failed = out.at({ids[2], k});
    EXPECT_EQ(failed.finish_reason, FinishReason::kError) << "sample " << k;
    EXPECT_EQ(failed.num_finish_events, 1);
    EXPECT_TRUE(failed.token_ids.empty());
  }
  size_t next = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (i == 2) continue;
    const SampleOutput& o = out.at({ids[i], 0});
    EXPECT_EQ(o.finish_reason, FinishReason::kLength) << "request " << i;
    EXPECT_EQ(o.token_ids, alone[next++]) << "request " << i << " lost or changed its work";
  }
}

TEST_F(EngineFaultTest, OutOfMemoryErrorNamesTheCause) {
  const auto ps = poisoned_prompts(1, 0);
  auto engine = faulty_engine(StatusCode::kOutOfMemory);
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens(ps[0], greedy(4), 0, &id).ok());
  ASSERT_EQ(engine->step().code(), StatusCode::kOutOfMemory);
  std::vector<Output> events;
  engine->poll(&events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].finish_reason, FinishReason::kError);
  EXPECT_NE(events[0].error.find("injected fault"), std::string::npos) << events[0].error;
  EXPECT_FALSE(engine->has_unfinished());
  EXPECT_EQ(engine->stats().num_blocks_used, 0) << "the failed request's blocks are freed";
}

TEST_F(EngineFaultTest, OtherFailuresEndTheWholeBatch) {
  // An internal error (a broken device) is not the batch's size: retrying
  // halves would not help, so every request of the batch ends with it.
  const auto ps = poisoned_prompts(4, 1);
  auto engine = faulty_engine(StatusCode::kInternal);
  std::vector<uint64_t> ids(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_TRUE(engine->submit_tokens(ps[i], greedy(4), 0, &ids[i]).ok());
  }
  Outputs out;
  const std::vector<StatusCode> codes = run_all(engine.get(), &out);
  EXPECT_EQ(backend_->num_faults, 1);
  EXPECT_EQ(codes.front(), StatusCode::kInternal);
  for (uint64_t id : ids) EXPECT_EQ(out.at({id, 0}).finish_reason, FinishReason::kError);
}

TEST_F(EngineTest, ContiguousAllocatorGivesSameGreedyTokensAsPaged) {
  auto ps = prompts(6);
  SamplingParams p = greedy(16);
  p.ignore_eos = true;
  auto paged = make_engine(config());
  const auto paged_tokens = run_together(paged.get(), ps, p);
  EngineConfig c = config();
  c.kv_allocator = KvAllocator::kContiguous;
  c.num_kv_blocks = 3 * 256 / 16;  // three contexts: the six requests take turns
  auto contiguous = make_engine(c);
  EXPECT_EQ(run_together(contiguous.get(), ps, p), paged_tokens);
  const EngineStats s = contiguous->stats();
  EXPECT_EQ(s.prefix_cache_queries, 0);
  EXPECT_EQ(s.num_seqs_queued_for_memory, 3);  // at most three contexts at once
  EXPECT_EQ(s.num_preemptions, 0);
}

TEST_F(EngineTest, ContiguousParallelSamplesCopyThePromptAndMatchPaged) {
  std::vector<int32_t> prompt = prompts(1)[0];
  while (prompt.size() < 40) prompt.push_back(11);
  SamplingParams p;
  p.n = 3;
  p.temperature = 1.0f;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.has_seed = true;
  p.seed = 3;
  auto run = [&](EngineConfig c, EngineStats* stats) {
    auto engine = make_engine(c);
    uint64_t id = 0;
    EXPECT_TRUE(engine->submit_tokens(prompt, p, 0, &id).ok());
    Outputs out = run_to_completion(engine.get());
    *stats = engine->stats();
    std::vector<std::vector<int32_t>> samples;
    for (int k = 0; k < p.n; ++k) samples.push_back(out.at({id, k}).token_ids);
    return samples;
  };
  EngineStats paged_stats, contiguous_stats, tight_stats;
  const auto paged = run(config(), &paged_stats);
  EngineConfig c = config();
  c.kv_allocator = KvAllocator::kContiguous;
  EXPECT_EQ(run(c, &contiguous_stats), paged);
  // 40 prompt tokens computed = 3 blocks copied for each of 2 children.
  EXPECT_EQ(contiguous_stats.num_block_copies, 2 * 3);
  // Room for one context only: the children wait and are recomputed.
  c.num_kv_blocks = 256 / 16;
  EXPECT_EQ(run(c, &tight_stats), paged);
}

TEST_F(EngineTest, OccupancyCountsStoredTokensAgainstReservedSlots) {
  std::vector<int32_t> prompt = prompts(1)[0];
  while (prompt.size() < 20) prompt.push_back(5);  // 20 tokens
  SamplingParams p = greedy(4);
  p.ignore_eos = true;
  for (KvAllocator a : {KvAllocator::kPaged, KvAllocator::kContiguous}) {
    EngineConfig c = config();
    c.kv_allocator = a;
    auto engine = make_engine(c);
    uint64_t id = 0;
    ASSERT_TRUE(engine->submit_tokens(prompt, p, 0, &id).ok());
    ASSERT_TRUE(engine->step().ok());  // prefill: 20 tokens computed
    const EngineStats s = engine->stats();
    EXPECT_EQ(s.num_kv_tokens_stored, 20);
    // Paged: 2 blocks of 16; contiguous: the whole 256-token context.
    EXPECT_EQ(s.num_kv_slots_reserved, a == KvAllocator::kPaged ? 32 : 256);
    EXPECT_EQ(s.num_kv_slots_reserved, int64_t{s.num_blocks_used} * 16);
  }
}

}  // namespace
}  // namespace pvllm::testing
