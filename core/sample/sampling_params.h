// How one request samples its tokens and when it stops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pvllm {

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

  Status validate(int32_t vocab_size) const;
};

}  // namespace pvllm
