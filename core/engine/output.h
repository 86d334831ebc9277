// What the engine hands its callers for each request: output events, their
// logprobs, and the request's timing with its last event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sample/sampler.h"

namespace pvllm {

enum class FinishReason : int32_t {
  kNone = 0,    // still running
  kStop = 1,    // EOS, a stop token or a stop string
  kLength = 2,  // max_tokens or the model's context
  kAbort = 3,   // aborted by the caller
  kError = 4,   // failed; see Output::error
};

struct OutputLogprobs {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

// A request's timing and token counts, given with its last event.
struct RequestMetrics {
  double time_queued = 0;            // s from submit to the first step that ran any of its tokens
  double time_to_first_token = 0;    // s from submit to the end of the step of its first token
  double time_per_output_token = 0;  // s, mean gap between its token steps after the first
  double e2e_latency = 0;            // s from submit to the end of its last step
  int64_t num_prompt_tokens = 0;
  int64_t num_prefill_tokens = 0;        // prompt tokens computed, recomputation included
  int64_t num_cached_prompt_tokens = 0;  // prompt tokens the prefix cache spared
  int64_t num_generated_tokens = 0;      // over all its samples
};

// One event for one sample of one request.
struct Output {
  uint64_t request_id = 0;
  int32_t sample_index = 0;
  std::vector<int32_t> token_ids;  // new tokens since the last event
  std::string text;                // their text delta (complete UTF-8)
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<OutputLogprobs> logprobs;  // one per new token when requested
  std::string error;                     // with kError
  // The request's last event: every one of its n samples has finished.
  bool request_finished = false;
  // The event's place among its request's events (all samples): 0, 1, 2,
  // ... in the order the engine made them, so events taken by several
  // pollers can be put back in order (RequestEventQueues numbers them).
  uint64_t sequence = 0;
  RequestMetrics metrics;  // with request_finished; zero on other events
  // On the request's first event when it asked for prompt logprobs: entry i
  // for prompt token i + 1 (the first token has none), the token's logprob
  // and its top alternatives.
  std::vector<OutputLogprobs> prompt_logprobs;
  // Beam search: the hypothesis' score (core/sample/beam_search.h); 0
  // otherwise.
  double score = 0;
};

}  // namespace pvllm
