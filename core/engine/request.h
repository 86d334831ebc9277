// The engine's record of one submitted request and of each of its samples,
// owned by the OutputProcessor (core/engine/output_processor.h) from the
// step that takes the request until its last event.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/output.h"
#include "core/sample/beam_search.h"
#include "core/sample/sampling_params.h"
#include "core/sched/sequence.h"
#include "core/structured/constraint.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm {

// One sample's output state: its detokenizer and the text not yet
// released (held back while it could still grow into a stop string).
struct SampleState {
  Sequence* seq = nullptr;
  IncrementalDetokenizer detok;
  std::string text;          // all text produced so far
  size_t num_text_sent = 0;  // bytes of `text` already in events
  bool finished = false;
  // Structured output: where this sample's text is in the request's
  // constraint (null without one).
  std::unique_ptr<structured::TokenMatcher> matcher;

  SampleState(const Tokenizer* tok, int32_t last_prompt_token) : detok(tok, last_prompt_token) {}
};

// A request's beam search (core/engine/beams.h): the search, its live beams'
// sequences (in the search's order) and this beam step's draws, one per
// live beam.
struct BeamState {
  std::unique_ptr<BeamSearch> search;
  std::vector<Sequence*> seqs;
  std::vector<std::optional<SampleResult>> draws;
  SamplingParams draw_params;  // greedy, 2W logprobs
};

struct Request {
  uint64_t id = 0;
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int32_t priority = 0;
  uint64_t arrival_order = 0;  // place in submit order
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;  // tokens that end generation
  size_t max_stop_len = 0;        // longest stop string, in bytes
  bool forked = false;            // the n samples exist
  std::shared_ptr<const structured::CompiledConstraint> constraint;  // null: none
  std::vector<std::unique_ptr<SampleState>> samples;
  int32_t num_finished = 0;

  // Prompt logprobs (params.prompt_logprobs >= 0): entry i for prompt token
  // i + 1, filled as the prompt's chunks run (again, identically, after a
  // preemption), handed to the request's first event once all are there.
  std::vector<OutputLogprobs> prompt_logprobs;
  bool prompt_logprobs_complete = false;
  bool prompt_logprobs_sent = false;

  std::unique_ptr<BeamState> beam;  // null unless params.beam_width > 0

  // For its RequestMetrics (the last event carries them).
  using Clock = std::chrono::steady_clock;
  Clock::time_point submit_time;
  Clock::time_point first_run_time;    // the first step that ran any of its tokens
  Clock::time_point first_token_time;  // the end of the step of its first token
  Clock::time_point last_token_time;   // the end of the latest step with a token
  bool has_run = false;
  int64_t num_token_steps = 0;  // steps that gave it at least one token
  int64_t num_prefill_tokens = 0;
  int64_t num_cached_prompt_tokens = 0;
  int64_t num_generated_tokens = 0;

  // What its draws follow: its params, or for beam search a greedy draw that
  // asks for the 2W best tokens.
  const SamplingParams& draw_params() const { return beam ? beam->draw_params : params; }
};

// What a sample's detokenizer is primed with: the last prompt token, or -1
// (no prompt) without a tokenizer (random-weights models), which never
// reads one.
inline int32_t last_prompt_token(const Request& req, const Tokenizer* tokenizer) {
  return tokenizer != nullptr ? req.prompt_ids.back() : -1;
}

}  // namespace pvllm
