// How one request samples its tokens and when it stops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/structured/constraint_spec.h"

namespace pvllm {

// When beam search is done (core/sample/beam_search.h): as Hugging Face's
// early_stopping False (a heuristic), True, and "never".
enum class EarlyStopping : int32_t { kHeuristic = 0, kTrue = 1, kNever = 2 };

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off; >1 discourages tokens seen in prompt or output
  float presence_penalty = 0.0f;    // subtracted once from logits of tokens generated so far
  float frequency_penalty = 0.0f;   // subtracted per occurrence in the generated tokens
  int32_t max_tokens = 16;          // generated tokens at most
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings; not part of the output text
  bool ignore_eos = false;        // also ignores the model's extra stop ids
  // -1: no logprobs; 0: the chosen token's logprob; k > 0: plus the top k.
  int32_t logprobs = -1;
  bool has_seed = false;
  uint64_t seed = 0;
  int32_t n = 1;  // parallel samples sharing the prompt
  // -1: none; 0: each prompt token's logprob (after the first); k > 0:
  // plus the top k at each of those positions. The prompt is then computed
  // whole, without prefix-cache hits, so that every position has logits.
  int32_t prompt_logprobs = -1;
  // Beam search (core/sample/beam_search.h) with this many beams when >= 1
  // (0 = off): the best n (<= beam_width) hypotheses are returned. It is
  // deterministic: temperature must be 0 and the other shaping off; no stop
  // strings; logprobs at most 0.
  int32_t beam_width = 0;
  float length_penalty = 1.0f;  // a hypothesis' score: logprob sum / length^length_penalty
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  // Structured output (core/structured): the text must match this. The
  // engine compiles it at submit and masks each draw to the tokens that
  // can continue it.
  structured::ConstraintSpec constraint;
  // Speculative decoding (docs/speculative.md), where the engine has it
  // on: false keeps this request out of it.
  bool speculative = true;

  Status validate(int32_t vocab_size) const;

  // Each beam asks for its 2 * beam_width best tokens, and the draws give
  // at most 20 alternatives.
  static constexpr int32_t kMaxBeamWidth = 10;

 private:
  Status validate_beam_search() const;
};

}  // namespace pvllm
