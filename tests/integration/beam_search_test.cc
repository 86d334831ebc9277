// Beam search on the real stories260K checkpoint (the repository's copy)
// against a reference search written here in the plainest way: every
// beam's next-token distribution recomputed from scratch (a fresh request
// over the beam's whole token list, prefix cache off), candidates ranked,
// hypotheses kept, as core/sample/beam_search.h specifies. Also: beams
// share blocks, a preempted beam does not change the result, an abort
// releases everything, and what beam search cannot honour is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/integration/engine_harness.h"
#include "tests/util/shared_paths.h"

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

}  // namespace
}  // namespace pvllm::testing
