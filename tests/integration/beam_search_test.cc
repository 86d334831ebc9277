// Beam search on the real stories260K checkpoint (the repository's copy)
// against a reference search written here in the plainest way: every
// beam's next-token distribution recomputed from scratch (a fresh request
// over the beam's whole token list, prefix cache off), candidates ranked,
// hypotheses kept, as core/sample/beam_search.h specifies. Also: beams
// share blocks, a preempted beam does not change the result, an abort
// releases everything, and what beam search cannot honour is refused. And
// the search's rules on candidates made up by hand (BeamSearchRulesTest):
// ties, stop tokens in and out of the first W, each early_stopping mode.
#include "core/sample/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/integration/engine_harness.h"
#include "tests/integration/forwarding_backend.h"
#include "tests/util/shared_paths.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

// The real stories260K: the repository's models/ ($PVLLM_REPO_MODELS, which
// ctest sets), else the shared material's ($PVLLM_SHARED_DIR/models, as in
// the GPU bundle); "" when neither is set.
std::string repo_model() {
  const char* repo = std::getenv("PVLLM_REPO_MODELS");
  if (repo != nullptr && *repo != '\0') return std::string(repo) + "/stories260K/stories260K.bin";
  const std::string shared = shared_dir();
  return shared.empty() ? "" : shared + "/models/stories260K/stories260K.bin";
}

struct Hyp {
  std::vector<int32_t> tokens;
  double cum = 0;
  double score = 0;
  bool stopped = false;
};

class BeamSearchTest : public ::testing::Test {
 protected:
  static EngineConfig config() {
    EngineConfig c;
    c.model_path = repo_model();
    c.device = "cpu";
    c.num_threads = 1;
    c.block_size = 16;
    return c;
  }

  void SetUp() override {
    ASSERT_FALSE(config().model_path.empty())
        << "set $PVLLM_REPO_MODELS to the repository's models/ folder (ctest sets it)";
    EngineConfig c = config();
    c.enable_prefix_caching = false;  // every distribution computed from scratch
    reference_ = make_engine(c);
    ASSERT_NE(reference_, nullptr);
    ASSERT_TRUE(reference_->tokenizer()->encode("Once upon a time", true, &prompt_).ok());
    stop_ids_ = {1, 2};  // llama2.c checkpoints end a story at BOS; EOS too
  }

  // The 2W most likely next tokens after `tokens`, recomputed from scratch.
  std::vector<TokenLogprob> top(const std::vector<int32_t>& tokens, int32_t k) {
    SamplingParams p = greedy(1);
    p.ignore_eos = true;  // a stop token is reported like any other
    p.logprobs = k;
    uint64_t id = 0;
    EXPECT_TRUE(reference_->submit_tokens(tokens, p, 0, &id).ok());
    const Outputs out = run_to_completion(reference_.get());
    const SampleOutput& s = out.at({id, 0});
    EXPECT_EQ(s.logprobs.size(), 1u);
    return s.logprobs.at(0).top;
  }

  // The search of beam_search.h, written out plainly.
  std::vector<Hyp> reference(int32_t width, int32_t n, float lp, EarlyStopping es,
                             int32_t max_tokens) {
    auto score = [lp](double cum, size_t len) {
      return cum / std::pow(static_cast<double>(std::max<size_t>(len, 1)), lp);
    };
    struct Beam {
      std::vector<int32_t> tokens;  // generated
      double cum = 0;
    };
    std::vector<Beam> live{Beam{}};
    std::vector<Hyp> done;
    auto keep = [&](Hyp h) {
      h.score = score(h.cum, h.tokens.size() + (h.stopped ? 1 : 0));
      if (static_cast<int32_t>(done.size()) < width) {
        done.push_back(h);
        return;
      }
      auto worst = std::min_element(done.begin(), done.end(),
                                    [](const Hyp& a, const Hyp& b) { return a.score < b.score; });
      if (h.score > worst->score) *worst = h;
    };
    bool finished_by_rule = false;
    for (int32_t len = 0; len < max_tokens && !live.empty(); ++len) {
      struct Cand {
        size_t beam;
        int32_t token;
        double total;
      };
      std::vector<Cand> cands;
      for (size_t b = 0; b < live.size(); ++b) {
        std::vector<int32_t> all = prompt_;
        all.insert(all.end(), live[b].tokens.begin(), live[b].tokens.end());
        for (const TokenLogprob& t : top(all, 2 * width)) {
          cands.push_back({b, t.token_id, live[b].cum + t.logprob});
        }
      }
      std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        if (a.total != b.total) return a.total > b.total;
        if (a.beam != b.beam) return a.beam < b.beam;
        return a.token < b.token;
      });
      std::vector<Beam> next;
      for (size_t r = 0; r < cands.size() && static_cast<int32_t>(next.size()) < width; ++r) {
        const Cand& c = cands[r];
        if (std::find(stop_ids_.begin(), stop_ids_.end(), c.token) != stop_ids_.end()) {
          if (r < static_cast<size_t>(width)) keep(Hyp{live[c.beam].tokens, c.total, 0, true});
          continue;
        }
        Beam child = live[c.beam];
        child.tokens.push_back(c.token);
        child.cum = c.total;
        next.push_back(child);
      }
      live = next;
      if (static_cast<int32_t>(done.size()) == width) {
        double best = -INFINITY;
        for (const Beam& b : live) best = std::max(best, b.cum);
        double worst = INFINITY;
        for (const Hyp& h : done) worst = std::min(worst, h.score);
        const size_t reach = es == EarlyStopping::kNever && lp > 0 ? max_tokens : len + 1;
        if (es == EarlyStopping::kTrue || worst >= score(best, reach)) {
          finished_by_rule = true;
          break;
        }
      }
    }
    if (!finished_by_rule) {
      for (const Beam& b : live) keep(Hyp{b.tokens, b.cum, 0, false});
    }
    std::stable_sort(done.begin(), done.end(),
                     [](const Hyp& a, const Hyp& b) { return a.score > b.score; });
    done.resize(std::min<size_t>(done.size(), n));
    return done;
  }

  SamplingParams beam_params(int32_t width, int32_t n, float lp, EarlyStopping es,
                             int32_t max_tokens) {
    SamplingParams p = greedy(max_tokens);
    p.beam_width = width;
    p.n = n;
    p.length_penalty = lp;
    p.early_stopping = es;
    return p;
  }

  // Runs one beam request; returns its events, and the peak of blocks used.
  std::vector<Output> run_beams(Engine* engine, const SamplingParams& p, int32_t* peak_blocks) {
    uint64_t id = 0;
    EXPECT_TRUE(engine->submit_tokens(prompt_, p, 0, &id).ok());
    *peak_blocks = 0;
    return run_events(
        engine, [&] { *peak_blocks = std::max(*peak_blocks, engine->stats().num_blocks_used); });
  }

  void expect_equal(const std::vector<Output>& events, const std::vector<Hyp>& want, int32_t n,
                    const std::string& what) {
    ASSERT_EQ(events.size(), static_cast<size_t>(n)) << what << ": one event per hypothesis";
    ASSERT_EQ(want.size(), static_cast<size_t>(n)) << what;
    for (int32_t i = 0; i < n; ++i) {
      const Output& ev = events[static_cast<size_t>(i)];
      EXPECT_EQ(ev.sample_index, i) << what;
      EXPECT_EQ(ev.token_ids, want[i].tokens) << what << ": hypothesis " << i;
      EXPECT_NEAR(ev.score, want[i].score, 1e-4) << what << ": hypothesis " << i;
      EXPECT_EQ(ev.finish_reason, want[i].stopped ? FinishReason::kStop : FinishReason::kLength)
          << what << ": hypothesis " << i;
      EXPECT_FALSE(ev.text.empty()) << what;
      EXPECT_EQ(ev.request_finished, i == n - 1) << what;
    }
  }

  std::unique_ptr<Engine> reference_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> stop_ids_;
};

TEST_F(BeamSearchTest, EqualsAReferenceSearchOverRecomputedLogits) {
  struct Case {
    int32_t width, n;
    float lp;
    EarlyStopping es;
    int32_t max_tokens;
  };
  for (const Case& c :
       {Case{4, 4, 1.0f, EarlyStopping::kHeuristic, 24},
        Case{2, 1, 1.0f, EarlyStopping::kHeuristic, 40}, Case{3, 2, 0.5f, EarlyStopping::kTrue, 30},
        Case{4, 3, 2.0f, EarlyStopping::kNever, 20},
        Case{5, 5, -0.5f, EarlyStopping::kNever, 16}}) {
    const std::string what = "width " + std::to_string(c.width) + ", n " + std::to_string(c.n) +
                             ", length_penalty " + std::to_string(c.lp) + ", early_stopping " +
                             std::to_string(static_cast<int>(c.es));
    auto engine = make_engine(config());
    int32_t peak = 0;
    const std::vector<Output> events =
        run_beams(engine.get(), beam_params(c.width, c.n, c.lp, c.es, c.max_tokens), &peak);
    expect_equal(events, reference(c.width, c.n, c.lp, c.es, c.max_tokens), c.n, what);
    EXPECT_EQ(engine->stats().num_blocks_used, 0) << what << ": blocks left after the search";
  }
}

// Beams fork by sharing blocks: the peak is well under W unshared copies
// of the longest beam.
TEST_F(BeamSearchTest, BeamsShareTheirBlocks) {
  auto engine = make_engine(config());
  const int32_t width = 8, max_tokens = 40;
  int32_t peak = 0;
  const std::vector<Output> events = run_beams(
      engine.get(), beam_params(width, 1, 1.0f, EarlyStopping::kNever, max_tokens), &peak);
  ASSERT_EQ(events.size(), 1u);
  const int32_t longest = static_cast<int32_t>(prompt_.size()) + max_tokens;
  const int32_t unshared = width * ((longest + 15) / 16);
  std::printf("beam search (width %d, %d tokens): peak %d blocks shared, %d unshared: %d saved\n",
              width, max_tokens, peak, unshared, unshared - peak);
  EXPECT_LT(peak, unshared * 2 / 3);
  EXPECT_GT(engine->stats().num_block_copies, 0) << "forks write into shared last blocks";
}

// By recompute and by swap (each beam's blocks to the host and back).
TEST_F(BeamSearchTest, PreemptedBeamsGiveTheSameResult) {
  for (const PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    const std::string what = mode == PreemptionMode::kSwap ? "preempted by swap" : "preempted";
    EngineConfig c = config();
    c.num_kv_blocks = 12;  // 4 beams of up to 45 tokens need 12 unshared
    c.max_model_len = 64;
    c.preemption_mode = mode;
    auto engine = make_engine(c);
    uint64_t beams = 0, other = 0;
    ASSERT_TRUE(engine
                    ->submit_tokens(prompt_, beam_params(4, 2, 1.0f, EarlyStopping::kNever, 40),
                                    /*priority=*/1, &beams)
                    .ok());
    std::vector<Output> events;
    for (int i = 0; i < 12; ++i) {
      ASSERT_TRUE(engine->step().ok());
      engine->poll(&events);
    }
    // A request of better priority that needs the pool pushes the beams out
    // (all of them: they are preempted together) and runs first.
    std::vector<int32_t> long_prompt = prompt_;
    while (long_prompt.size() < 40) long_prompt.push_back(long_prompt[long_prompt.size() % 5]);
    SamplingParams p = greedy(20);
    p.ignore_eos = true;
    ASSERT_TRUE(engine->submit_tokens(long_prompt, p, /*priority=*/-1, &other).ok());
    for (int i = 0; i < 10000 && engine->has_unfinished(); ++i) {
      ASSERT_TRUE(engine->step().ok());
      engine->poll(&events);
    }
    engine->poll(&events);
    EXPECT_GE(engine->stats().num_preemptions, 4)
        << what << ": the pool was meant to preempt the beams";
    if (mode == PreemptionMode::kSwap) {
      EXPECT_GE(engine->stats().num_preemptions_by_swap, 4);
    }
    std::erase_if(events, [other](const Output& ev) { return ev.request_id == other; });
    expect_equal(events, reference(4, 2, 1.0f, EarlyStopping::kNever, 40), 2, what);
    EXPECT_EQ(engine->stats().num_blocks_used, 0);
  }
}

TEST_F(BeamSearchTest, AbortEndsEverySampleAndFreesTheBeams) {
  auto engine = make_engine(config());
  uint64_t id = 0;
  ASSERT_TRUE(
      engine->submit_tokens(prompt_, beam_params(4, 3, 1.0f, EarlyStopping::kNever, 200), 0, &id)
          .ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine->step().ok());
  EXPECT_GT(engine->stats().num_blocks_used, 0);
  ASSERT_TRUE(engine->abort(id).ok());
  const Outputs out = run_to_completion(engine.get());
  for (int32_t s = 0; s < 3; ++s) {
    EXPECT_EQ(out.at({id, s}).finish_reason, FinishReason::kAbort) << s;
  }
  EXPECT_EQ(engine->stats().num_blocks_used, 0);
  EXPECT_EQ(engine->stats().num_running, 0);
}

TEST_F(BeamSearchTest, WhatBeamSearchCannotHonourIsRefused) {
  auto engine = make_engine(config());
  struct Bad {
    const char* field;
    void (*set)(SamplingParams*);
  };
  for (const Bad& b : std::initializer_list<Bad>{
           {"temperature", [](SamplingParams* p) { p->temperature = 0.7f; }},
           {"top_p", [](SamplingParams* p) { p->top_p = 0.9f; }},
           {"top_k", [](SamplingParams* p) { p->top_k = 5; }},
           {"repetition_penalty", [](SamplingParams* p) { p->repetition_penalty = 1.1f; }},
           {"stop", [](SamplingParams* p) { p->stop = {"."}; }},
           {"logprobs", [](SamplingParams* p) { p->logprobs = 2; }},
           {"n", [](SamplingParams* p) { p->n = 5; }},
           {"beam_width", [](SamplingParams* p) { p->beam_width = 11; }},
           {"early_stopping", [](SamplingParams* p) { p->early_stopping = EarlyStopping(3); }},
           {"length_penalty", [](SamplingParams* p) { p->length_penalty = NAN; }}}) {
    SamplingParams p = beam_params(4, 2, 1.0f, EarlyStopping::kHeuristic, 10);
    b.set(&p);
    uint64_t id = 0;
    const Status st = engine->submit_tokens(prompt_, p, 0, &id);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b.field;
    EXPECT_NE(st.message().find(b.field), std::string::npos) << st.message();
  }
}

// What the engine needs besides valid params: the paged allocator, a seat
// for every beam, and a pool that holds every beam at its longest unshared
// (the longest being capped by the context, as the context ends a beam).
TEST_F(BeamSearchTest, RefusedWhenTheEngineCannotHoldEveryBeam) {
  const SamplingParams p = beam_params(4, 1, 1.0f, EarlyStopping::kHeuristic, 40);
  uint64_t id = 0;
  {
    EngineConfig c = config();
    c.kv_allocator = KvAllocator::kContiguous;
    auto engine = make_engine(c);
    const Status st = engine->submit_tokens(prompt_, p, 0, &id);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
    EXPECT_NE(st.message().find("paged KV allocator"), std::string::npos) << st.message();
  }
  {
    EngineConfig c = config();
    c.max_num_seqs = 3;
    auto engine = make_engine(c);
    const Status st = engine->submit_tokens(prompt_, p, 0, &id);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find("beam_width 4 exceeds max_num_seqs 3"), std::string::npos)
        << st.message();
    EXPECT_TRUE(
        engine
            ->submit_tokens(prompt_, beam_params(3, 1, 1.0f, EarlyStopping::kHeuristic, 40), 0, &id)
            .ok())
        << "three beams fit three seats";
  }
  {
    // Beams of up to prompt + 40 tokens take 3 blocks of 16 each: 4 beams
    // need 12 of the 8, 2 beams 6.
    ASSERT_LE(prompt_.size(), 8u);
    EngineConfig c = config();
    c.num_kv_blocks = 8;
    c.max_model_len = 64;
    auto engine = make_engine(c);
    const Status st = engine->submit_tokens(prompt_, p, 0, &id);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find("needs 12 KV blocks, more than the pool's 8"), std::string::npos)
        << st.message();
    EXPECT_TRUE(
        engine
            ->submit_tokens(prompt_, beam_params(2, 1, 1.0f, EarlyStopping::kHeuristic, 40), 0, &id)
            .ok());
  }
}

// With a context of 20 tokens the beams end after the token that makes
// them 21 long, so 4 beams need only 2 blocks each and fit the 8.
TEST_F(BeamSearchTest, TheContextEndsTheBeamsAndBoundsTheirBlocks) {
  EngineConfig c = config();
  c.num_kv_blocks = 8;
  c.max_model_len = 20;
  auto engine = make_engine(c);
  int32_t peak = 0;
  const std::vector<Output> events =
      run_beams(engine.get(), beam_params(4, 2, 1.0f, EarlyStopping::kNever, 40), &peak);
  ASSERT_EQ(events.size(), 2u);
  const size_t want = 20 - prompt_.size() + 1;
  for (const Output& ev : events) {
    EXPECT_EQ(ev.finish_reason, FinishReason::kLength);
    EXPECT_EQ(ev.token_ids.size(), want);
  }
  EXPECT_LE(peak, 8);
  EXPECT_EQ(engine->stats().num_blocks_used, 0);
}

// A prompt computed in chunks: the beam's first steps run without a draw
// (the search waits for it), and the result is the one of a whole prompt.
TEST_F(BeamSearchTest, AChunkedPromptGivesTheSameBeams) {
  while (prompt_.size() < 40) prompt_.push_back(prompt_[prompt_.size() % 5]);
  const SamplingParams p = beam_params(3, 3, 1.0f, EarlyStopping::kHeuristic, 12);
  int32_t peak = 0;
  auto whole = make_engine(config());
  const std::vector<Output> want = run_beams(whole.get(), p, &peak);
  EngineConfig c = config();
  c.max_num_batched_tokens = 16;
  auto chunked = make_engine(c);
  uint64_t id = 0;
  ASSERT_TRUE(chunked->submit_tokens(prompt_, p, 0, &id).ok());
  ASSERT_TRUE(chunked->step().ok());
  EXPECT_EQ(chunked->stats().num_blocks_used, 1) << "the first step computes 16 prompt tokens";
  const std::vector<Output> got = run_events(chunked.get());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].token_ids, want[i].token_ids) << i;
    EXPECT_NEAR(got[i].score, want[i].score, 1e-4) << i;
    EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << i;
  }
}

// Stop token ids of the request end hypotheses (kStop, the stop token not
// among the tokens), as in the reference; with logprobs 0 each token
// carries its logprob, and a hypothesis' logprobs sum to its
// cumulative logprob (score * length, length_penalty 1) less the stop
// token's.
TEST_F(BeamSearchTest, StopTokenIdsEndHypotheses) {
  const int32_t period = reference_->tokenizer()->token_to_id(".");
  ASSERT_GT(period, 2);
  stop_ids_.push_back(period);
  SamplingParams p = beam_params(3, 3, 1.0f, EarlyStopping::kHeuristic, 40);
  p.stop_token_ids = {period};
  p.logprobs = 0;
  auto engine = make_engine(config());
  int32_t peak = 0;
  const std::vector<Output> events = run_beams(engine.get(), p, &peak);
  const std::vector<Hyp> want = reference(3, 3, 1.0f, EarlyStopping::kHeuristic, 40);
  expect_equal(events, want, 3, "stop at '.'");
  int32_t stopped = 0;
  for (const Output& ev : events) {
    ASSERT_EQ(ev.logprobs.size(), ev.token_ids.size());
    double sum = 0;
    for (size_t t = 0; t < ev.token_ids.size(); ++t) {
      EXPECT_EQ(ev.logprobs[t].token_id, ev.token_ids[t]);
      EXPECT_TRUE(ev.logprobs[t].top.empty());
      sum += ev.logprobs[t].logprob;
    }
    EXPECT_EQ(std::count(ev.token_ids.begin(), ev.token_ids.end(), period), 0);
    if (ev.finish_reason == FinishReason::kStop) {
      ++stopped;
      const double cumulative = ev.score * static_cast<double>(ev.token_ids.size() + 1);
      EXPECT_GT(sum, cumulative - 1e-3) << "the stop token's logprob is <= 0";
    } else {
      EXPECT_NEAR(sum, ev.score * static_cast<double>(ev.token_ids.size()), 1e-3);
    }
  }
  // All three end at '.' (after 10 tokens, well before 40): the rules, not
  // max_tokens, ended the search.
  EXPECT_EQ(stopped, 3) << "'.' was meant to end every hypothesis";
}

// Without a tokenizer (the checkpoint alone in a folder) the events carry
// the same tokens and scores, and no text.
TEST_F(BeamSearchTest, WithoutATokenizerTheHypothesesHaveNoText) {
  const std::string dir = make_temp_dir("beam_no_tokenizer");
  const std::string bin = dir + "/stories260K.bin";
  std::filesystem::copy_file(config().model_path, bin);
  EngineConfig c = config();
  c.model_path = bin;
  auto bare = make_engine(c);
  ASSERT_EQ(bare->tokenizer(), nullptr);
  const SamplingParams p = beam_params(2, 2, 1.0f, EarlyStopping::kHeuristic, 10);
  int32_t peak = 0;
  const std::vector<Output> got = run_beams(bare.get(), p, &peak);
  auto engine = make_engine(config());
  const std::vector<Output> want = run_beams(engine.get(), p, &peak);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].token_ids, want[i].token_ids) << i;
    EXPECT_NEAR(got[i].score, want[i].score, 1e-6) << i;
    EXPECT_TRUE(got[i].text.empty()) << got[i].text;
    EXPECT_FALSE(want[i].text.empty());
  }
}

// Fails every forward pass from the `fail_at`-th on.
class FailingBackend final : public ForwardingBackend {
 public:
  FailingBackend(std::unique_ptr<Backend> inner, int32_t fail_at)
      : ForwardingBackend(std::move(inner)), fail_at_(fail_at) {}
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override {
    if (++calls_ >= fail_at_) return Internal("injected fault");
    return inner().forward_sample(md, rows, out);
  }
  Status forward(const BatchMetadata& md, float* logits) override {
    if (++calls_ >= fail_at_) return Internal("injected fault");
    return inner().forward(md, logits);
  }

 private:
  int32_t fail_at_;
  int32_t calls_ = 0;
};

// A beam whose forward pass fails ends the whole search: every sample ends
// with kError and the message, no tokens, and the beams' blocks are freed.
TEST_F(BeamSearchTest, AFailedForwardEndsEverySampleWithTheError) {
  EngineConfig c = config();
  c.backend_factory = [](const Model& m, const BackendOptions& o, std::unique_ptr<Backend>* out) {
    std::unique_ptr<Backend> cpu;
    PVLLM_RETURN_IF_ERROR(create_cpu_backend(m, o, &cpu));
    *out = std::make_unique<FailingBackend>(std::move(cpu), /*fail_at=*/4);
    return Status::Ok();
  };
  auto engine = make_engine(c);
  uint64_t id = 0;
  ASSERT_TRUE(
      engine->submit_tokens(prompt_, beam_params(3, 2, 1.0f, EarlyStopping::kNever, 20), 0, &id)
          .ok());
  std::vector<Status> failed;
  std::vector<Output> events;
  for (int i = 0; i < 100 && engine->has_unfinished(); ++i) {
    const Status st = engine->step();
    if (!st.ok()) failed.push_back(st);
    engine->poll(&events);
  }
  ASSERT_FALSE(engine->has_unfinished());
  ASSERT_EQ(failed.size(), 1u) << "the fourth pass fails and ends the request";
  EXPECT_EQ(failed[0].code(), StatusCode::kInternal);
  ASSERT_EQ(events.size(), 2u);
  for (int32_t i = 0; i < 2; ++i) {
    const Output& ev = events[static_cast<size_t>(i)];
    EXPECT_EQ(ev.request_id, id);
    EXPECT_EQ(ev.sample_index, i);
    EXPECT_EQ(ev.finish_reason, FinishReason::kError);
    EXPECT_EQ(ev.error, "injected fault");
    EXPECT_TRUE(ev.token_ids.empty());
    EXPECT_EQ(ev.request_finished, i == 1);
  }
  EXPECT_EQ(engine->stats().num_blocks_used, 0);
}

// Appends one more alternative, certain (logprob 0), after every draw's own.
class PaddedDrawsBackend final : public ForwardingBackend {
 public:
  PaddedDrawsBackend(std::unique_ptr<Backend> inner, int32_t token)
      : ForwardingBackend(std::move(inner)), token_(token) {}
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override {
    PVLLM_RETURN_IF_ERROR(inner().forward_sample(md, rows, out));
    for (SampleResult& r : *out) r.top_logprobs.push_back({token_, 0.0f});
    return Status::Ok();
  }

 private:
  int32_t token_;
};

// Each beam proposes its 2W best tokens and no more: an alternative past
// the 2W (one that would win every step) is left out.
TEST_F(BeamSearchTest, AlternativesBeyondTwiceTheWidthAreIgnored) {
  const SamplingParams p = beam_params(2, 2, 1.0f, EarlyStopping::kHeuristic, 8);
  int32_t peak = 0;
  auto plain = make_engine(config());
  const std::vector<Output> want = run_beams(plain.get(), p, &peak);
  EngineConfig c = config();
  c.backend_factory = [](const Model& m, const BackendOptions& o, std::unique_ptr<Backend>* out) {
    std::unique_ptr<Backend> cpu;
    PVLLM_RETURN_IF_ERROR(create_cpu_backend(m, o, &cpu));
    *out = std::make_unique<PaddedDrawsBackend>(std::move(cpu), /*token=*/300);
    return Status::Ok();
  };
  auto padded = make_engine(c);
  const std::vector<Output> got = run_beams(padded.get(), p, &peak);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].token_ids, want[i].token_ids) << i;
    EXPECT_EQ(std::count(got[i].token_ids.begin(), got[i].token_ids.end(), 300), 0) << i;
    EXPECT_NEAR(got[i].score, want[i].score, 1e-6) << i;
  }
}

// A model of 4 tokens, one of them the stop token: 5 beams of one token
// make 4 hypotheses (3 cut by length, 1 stopped), so of n = 5 samples the
// last has none and ends with kLength and no tokens.
TEST(BeamSearchTinyVocabularyTest, FewerHypothesesThanNLeaveTheLastSamplesEmpty) {
  TinyModelSpec spec;
  spec.vocab_size = 4;
  spec.eos_ids = {2};
  const std::string dir = write_tiny_hf_model(make_temp_dir("beam_tiny_vocab"), spec);
  std::filesystem::remove(dir + "/tokenizer.model");  // its vocabulary is larger
  EngineConfig c;
  c.model_path = dir;
  c.device = "cpu";
  c.num_threads = 1;
  auto engine = make_engine(c);
  SamplingParams p = greedy(1);
  p.beam_width = 5;
  p.n = 5;
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_tokens({1, 3, 0, 3}, p, 0, &id).ok());
  const std::vector<Output> events = run_events(engine.get());
  ASSERT_EQ(events.size(), 5u);
  std::vector<int32_t> extended;
  int32_t num_stopped = 0;
  for (size_t i = 0; i < 4; ++i) {
    const Output& ev = events[i];
    EXPECT_LT(ev.score, 0.0) << i;
    if (ev.finish_reason == FinishReason::kStop) {
      ++num_stopped;
      EXPECT_TRUE(ev.token_ids.empty()) << i;
    } else {
      EXPECT_EQ(ev.finish_reason, FinishReason::kLength) << i;
      ASSERT_EQ(ev.token_ids.size(), 1u) << i;
      extended.push_back(ev.token_ids[0]);
    }
    if (i > 0) {
      EXPECT_GE(events[i - 1].score, ev.score) << "best first";
    }
  }
  EXPECT_EQ(num_stopped, 1);
  std::sort(extended.begin(), extended.end());
  EXPECT_EQ(extended, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(events[4].sample_index, 4);
  EXPECT_EQ(events[4].finish_reason, FinishReason::kLength);
  EXPECT_TRUE(events[4].token_ids.empty());
  EXPECT_EQ(events[4].score, 0.0);
  EXPECT_TRUE(events[4].request_finished);
}

// ---- the search's rules, on candidates made up here -----------------------
// Log-probabilities are multiples of 1/4 so that totals and scores are
// exact and ties are real ties.

using Tops = std::vector<std::vector<TokenLogprob>>;

std::function<bool(int32_t)> stop_at(std::vector<int32_t> ids) {
  return [ids](int32_t token) { return std::find(ids.begin(), ids.end(), token) != ids.end(); };
}

BeamConfig beam_config(int32_t width, float length_penalty, EarlyStopping es, int32_t max_tokens) {
  BeamConfig c;
  c.width = width;
  c.length_penalty = length_penalty;
  c.early_stopping = es;
  c.max_tokens = max_tokens;
  return c;
}

void expect_choices(const std::vector<BeamChoice>& got,
                    const std::vector<std::pair<int32_t, int32_t>>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].parent, want[i].first) << what << ": choice " << i;
    EXPECT_EQ(got[i].token, want[i].second) << what << ": choice " << i;
  }
}

// Equal totals rank by the lower beam, then by the lower token.
TEST(BeamSearchRulesTest, TiesRankByLowerBeamThenLowerToken) {
  BeamSearch search(beam_config(2, 1.0f, EarlyStopping::kHeuristic, 8));
  const auto no_stop = stop_at({});
  expect_choices(search.step({{{7, -1.0f}, {3, -1.0f}, {9, -2.0f}, {8, -2.0f}}}, no_stop),
                 {{0, 3}, {0, 7}}, "step 1: same beam, lower token first");
  // Beams [3] and [7] (both -1): beam 0's token 5 and beam 1's token 4 tie
  // at -1.5; the lower beam wins although its token is higher.
  expect_choices(search.step({{{5, -0.5f}, {6, -2.0f}, {10, -3.0f}, {11, -4.0f}},
                              {{4, -0.5f}, {2, -2.0f}, {12, -3.0f}, {13, -4.0f}}},
                             no_stop),
                 {{0, 5}, {1, 4}}, "step 2: lower beam first");
  EXPECT_FALSE(search.done());
  EXPECT_EQ(search.length(), 2);
  const std::vector<BeamHypothesis> best = search.finish(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{7, 4}));
  for (const BeamHypothesis& h : best) {
    EXPECT_FALSE(h.stopped);
    EXPECT_EQ(h.cumulative_logprob, -1.5);
    EXPECT_EQ(h.score, -0.75);
  }
}

// A stop token ranked among the first W ends a hypothesis; one ranked past
// them is skipped (here it would have been the second hypothesis, and with
// early_stopping kTrue would have ended the search at once). Once W are
// finished, kTrue ends the search: no choices, and finish() returns the
// hypotheses without the live beams ([4, 6], -2 over 2, would score
// better than [5]).
TEST(BeamSearchRulesTest, OnlyStopTokensRankedAmongTheFirstWidthEndHypotheses) {
  BeamSearch search(beam_config(2, 1.0f, EarlyStopping::kTrue, 8));
  const auto stops = stop_at({2, 3});
  expect_choices(search.step({{{2, -0.5f}, {4, -1.0f}, {3, -1.5f}, {5, -2.0f}}}, stops),
                 {{0, 4}, {0, 5}}, "step 1");
  EXPECT_FALSE(search.done()) << "one hypothesis finished, not two";
  EXPECT_EQ(search.num_live(), 2);
  // Beams [4] (-1) and [5] (-2): beam 1's stop ranks second.
  const std::vector<BeamChoice> step2 =
      search.step({{{6, -1.0f}, {7, -2.0f}, {8, -3.0f}, {9, -4.0f}},
                   {{3, -0.25f}, {10, -3.0f}, {11, -4.0f}, {12, -5.0f}}},
                  stops);
  EXPECT_TRUE(step2.empty());
  EXPECT_TRUE(search.done());
  EXPECT_EQ(search.num_live(), 2) << "beams [4, 6] and [4, 7] were live when the search ended";
  const std::vector<BeamHypothesis> best = search.finish(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_TRUE(best[0].tokens.empty());
  EXPECT_EQ(best[0].logprobs, (std::vector<float>{-0.5f}));
  EXPECT_EQ(best[0].score, -0.5);
  EXPECT_TRUE(best[0].stopped);
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{5}));
  EXPECT_EQ(best[1].logprobs, (std::vector<float>{-2.0f, -0.25f}));
  EXPECT_EQ(best[1].cumulative_logprob, -2.25);
  EXPECT_EQ(best[1].score, -1.125) << "-2.25 over 2 tokens (the stop token counts)";
  EXPECT_TRUE(best[1].stopped);
}

// Steps 1-3 of one search, width 2, stop token 2: step 1 finishes [] (-0.5
// over 1), step 2 finishes [4] (-1.5 over 2), and leaves beams [4, 7]
// (-1.25) and [5, 10] (-2.5); step 3 leaves [4, 7, 14] (-2.25) and
// [4, 7, 15] (-3.25).
const Tops kStep1 = {{{2, -0.5f}, {4, -1.0f}, {5, -1.5f}, {6, -3.0f}}};
const Tops kStep2 = {{{2, -0.5f}, {7, -0.25f}, {8, -2.0f}, {9, -3.0f}},
                     {{10, -1.0f}, {11, -2.0f}, {12, -3.0f}, {13, -4.0f}}};
const Tops kStep3 = {{{14, -1.0f}, {15, -2.0f}, {2, -2.5f}, {16, -3.0f}},
                     {{17, -1.0f}, {18, -2.0f}, {19, -3.0f}, {20, -4.0f}}};

// kHeuristic: done once the best live beam, scored at the current length,
// cannot beat the worst hypothesis. After step 2 it can (-1.25 / 2 >
// -0.75); after step 3 it only ties (-2.25 / 3 == -0.75), which is done.
TEST(BeamSearchRulesTest, HeuristicEndsWhenNoLiveBeamCanBeatTheWorstHypothesis) {
  BeamSearch search(beam_config(2, 1.0f, EarlyStopping::kHeuristic, 8));
  const auto stops = stop_at({2});
  expect_choices(search.step(kStep1, stops), {{0, 4}, {0, 5}}, "step 1");
  expect_choices(search.step(kStep2, stops), {{0, 7}, {1, 10}}, "step 2");
  EXPECT_FALSE(search.done()) << "two hypotheses finished, but [4, 7] may beat [4]";
  EXPECT_TRUE(search.step(kStep3, stops).empty());
  EXPECT_TRUE(search.done());
  const std::vector<BeamHypothesis> best = search.finish(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_TRUE(best[0].tokens.empty());
  EXPECT_EQ(best[0].score, -0.5);
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{4}));
  EXPECT_EQ(best[1].score, -0.75);
  EXPECT_TRUE(best[1].stopped);
}

// kNever with length_penalty > 0 judges a live beam at the longest length
// it may reach (max_tokens 4): after step 3, -2.25 / 4 may still beat
// -0.75, so the search goes on, and at step 4 beam [4, 7, 14, 19] (-2.5 / 4
// = -0.625) replaces the worse hypothesis [4] that kHeuristic kept.
TEST(BeamSearchRulesTest, NeverJudgesLiveBeamsAtMaxTokensWhenLengthIsRewarded) {
  BeamSearch search(beam_config(2, 1.0f, EarlyStopping::kNever, 4));
  const auto stops = stop_at({2});
  search.step(kStep1, stops);
  search.step(kStep2, stops);
  expect_choices(search.step(kStep3, stops), {{0, 14}, {0, 15}}, "step 3");
  EXPECT_FALSE(search.done());
  expect_choices(search.step({{{19, -0.25f}, {20, -1.0f}, {21, -2.0f}, {22, -3.0f}},
                              {{23, -1.0f}, {24, -2.0f}, {25, -3.0f}, {26, -4.0f}}},
                             stops),
                 {{0, 19}, {0, 20}}, "step 4");
  EXPECT_FALSE(search.done());
  EXPECT_EQ(search.length(), search.max_tokens());
  const std::vector<BeamHypothesis> best = search.finish(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_TRUE(best[0].tokens.empty());
  EXPECT_EQ(best[0].score, -0.5);
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{4, 7, 14, 19}));
  EXPECT_EQ(best[1].logprobs, (std::vector<float>{-1.0f, -0.25f, -1.0f, -0.25f}));
  EXPECT_EQ(best[1].score, -0.625);
  EXPECT_FALSE(best[1].stopped);
  // finish(1) keeps only the best.
  BeamSearch again(beam_config(2, 1.0f, EarlyStopping::kNever, 4));
  again.step(kStep1, stops);
  const std::vector<BeamHypothesis> one = again.finish(1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].stopped);
  EXPECT_EQ(one[0].score, -0.5);
}

// kNever with length_penalty <= 0: longer only scores worse, so a live
// beam is judged at the current length, as kHeuristic does. With
// length_penalty -1 (score = cumulative * length) after step 2 the worst
// hypothesis is [4] (-1.5 * 2 = -3) and [4, 7] may still beat it (-1.25 *
// 2 = -2.5; at max_tokens it could not: -5); after step 3 it cannot
// (-2.25 * 3).
TEST(BeamSearchRulesTest, NeverJudgesLiveBeamsAtTheCurrentLengthWhenLengthIsPenalized) {
  BeamSearch search(beam_config(2, -1.0f, EarlyStopping::kNever, 4));
  const auto stops = stop_at({2});
  search.step(kStep1, stops);
  expect_choices(search.step(kStep2, stops), {{0, 7}, {1, 10}}, "step 2");
  EXPECT_FALSE(search.done());
  EXPECT_TRUE(search.step(kStep3, stops).empty());
  EXPECT_TRUE(search.done());
  const std::vector<BeamHypothesis> best = search.finish(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].score, -0.5);
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{4}));
  EXPECT_EQ(best[1].score, -3.0);
}

// Fewer candidates than beams: a vocabulary of two tokens, both stop
// tokens, ends the search with no live beam after one step, with two of
// the three hypotheses asked for; two ordinary tokens leave two live beams.
TEST(BeamSearchRulesTest, CandidatesRunningOutLeaveFewerBeams) {
  BeamSearch all_stop(beam_config(3, 1.0f, EarlyStopping::kHeuristic, 8));
  EXPECT_TRUE(all_stop.step({{{2, -0.5f}, {3, -1.0f}}}, stop_at({2, 3})).empty());
  EXPECT_TRUE(all_stop.done());
  EXPECT_EQ(all_stop.num_live(), 0);
  const std::vector<BeamHypothesis> stopped = all_stop.finish(3);
  ASSERT_EQ(stopped.size(), 2u);
  EXPECT_EQ(stopped[0].logprobs, (std::vector<float>{-0.5f}));
  EXPECT_EQ(stopped[1].logprobs, (std::vector<float>{-1.0f}));
  EXPECT_TRUE(stopped[0].stopped && stopped[1].stopped);

  BeamSearch two(beam_config(3, 1.0f, EarlyStopping::kHeuristic, 8));
  expect_choices(two.step({{{4, -0.5f}, {5, -1.0f}}}, stop_at({2})), {{0, 4}, {0, 5}}, "step 1");
  EXPECT_FALSE(two.done());
  EXPECT_EQ(two.num_live(), 2);
  const std::vector<BeamHypothesis> live = two.finish(3);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].tokens, (std::vector<int32_t>{4}));
  EXPECT_EQ(live[1].tokens, (std::vector<int32_t>{5}));
}

// Broken invariants abort: no beams, a step after the end, and candidate
// lists that do not match the live beams.
TEST(BeamSearchRulesDeathTest, MisuseAborts) {
  EXPECT_DEATH(BeamSearch(beam_config(0, 1.0f, EarlyStopping::kHeuristic, 8)),
               "beam width must be >= 1");
  EXPECT_DEATH(
      {
        BeamSearch search(beam_config(2, 1.0f, EarlyStopping::kHeuristic, 8));
        search.step({{{4, -0.5f}}, {{5, -0.5f}}}, stop_at({}));
      },
      "one list of candidates per live beam");
  EXPECT_DEATH(
      {
        BeamSearch search(beam_config(2, 1.0f, EarlyStopping::kHeuristic, 8));
        search.step({{{2, -0.5f}}}, stop_at({2}));
        search.step({}, stop_at({2}));
      },
      "a finished beam search cannot step");
}
}  // namespace
}  // namespace pvllm::testing
