// Sampler: one next token from one row of logits, on the host.
//
// Randomness is counter based: the draw for a sequence's t-th generated
// token depends only on (seed, sample_index, t), so a seeded request gives
// the same tokens whatever shares its batch and after preemption.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/sampling_params.h"

namespace pvllm {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token_id = 0;
  float logprob = 0.0f;                    // of the chosen token, from the raw logits
  std::vector<TokenLogprob> top_logprobs;  // the `logprobs` best, best first
};

// A uniform float in [0, 1) from the counter-based generator.
float sampler_uniform(uint64_t seed, int32_t sample_index, int32_t step);

// `logits`: [vocab_size] raw model output (copied internally; not changed).
// `prompt_ids` and `output_ids` feed the penalties. `step` is the index of
// the token being generated (number generated so far). Logprobs are the
// log-softmax of the raw logits (before penalties and temperature).
// Order: penalties, temperature, top-k, top-p, min-p, then the draw; with
// temperature 0 the result is the argmax after penalties (lowest id on ties).
SampleResult sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                          uint64_t seed, int32_t sample_index, int32_t step);

}  // namespace pvllm
