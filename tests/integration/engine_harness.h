// Drives an Engine to completion and gathers what each sample produced,
// checking on the way that every sample finishes exactly once.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/engine.h"

namespace pvllm::testing {

struct SampleOutput {
  std::vector<int32_t> token_ids;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_finish_events = 0;
  std::vector<OutputLogprobs> logprobs;
};

// Keyed by (request id, sample index).
using Outputs = std::map<std::pair<uint64_t, int32_t>, SampleOutput>;

inline void collect(Engine* engine, Outputs* outputs) {
  std::vector<Output> events;
  engine->poll(&events);
  for (Output& ev : events) {
    SampleOutput& s = (*outputs)[{ev.request_id, ev.sample_index}];
    EXPECT_EQ(s.num_finish_events, 0) << "event after the finish of request " << ev.request_id;
    s.token_ids.insert(s.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    s.text += ev.text;
    s.logprobs.insert(s.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    if (ev.finish_reason != FinishReason::kNone) {
      s.finish_reason = ev.finish_reason;
      ++s.num_finish_events;
    }
  }
}

// Steps until nothing is unfinished (bounded), returning every event in the
// order made; `after_step`, when given, runs after each step.
inline std::vector<Output> run_events(Engine* engine,
                                      const std::function<void()>& after_step = nullptr,
                                      int max_steps = 10000) {
  std::vector<Output> events;
  for (int i = 0; i < max_steps && engine->has_unfinished(); ++i) {
    Status st = engine->step();
    EXPECT_TRUE(st.ok()) << st.message();
    if (after_step) after_step();
    engine->poll(&events);
  }
  engine->poll(&events);
  EXPECT_FALSE(engine->has_unfinished())
      << "engine did not finish within " << max_steps << " steps";
  return events;
}

// Steps until nothing is unfinished (bounded), collecting outputs.
inline Outputs run_to_completion(Engine* engine, int max_steps = 100000) {
  Outputs outputs;
  for (int i = 0; i < max_steps && engine->has_unfinished(); ++i) {
    Status st = engine->step();
    EXPECT_TRUE(st.ok()) << st.message();
    collect(engine, &outputs);
  }
  collect(engine, &outputs);
  EXPECT_FALSE(engine->has_unfinished())
      << "engine did not finish within " << max_steps << " steps";
  for (const auto& [key, s] : outputs) {
    EXPECT_EQ(s.num_finish_events, 1) << "request " << key.first << " sample " << key.second;
  }
  return outputs;
}

// The engine of `config`. A failed create fails the test right here (an
// exception GoogleTest reports with the message) rather than handing back a
// null engine for the next line to crash on.
inline std::unique_ptr<Engine> make_engine(EngineConfig config) {
  std::unique_ptr<Engine> engine;
  Status st = Engine::create(config, &engine);
  if (!st.ok()) throw std::runtime_error("Engine::create failed: " + st.message());
  return engine;
}

inline SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

}  // namespace pvllm::testing
