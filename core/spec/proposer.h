// Proposer: where speculative decoding's guesses come from. Each step, for
// a sequence in decode, a proposer offers up to k tokens to follow the
// sequence's tokens so far; the engine runs them through the target model
// in one pass and keeps the run the target agrees with
// (core/sample/speculative.h). A proposer holds no engine state: it sees
// the tokens and answers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pvllm {

struct ProposalContext {
  uint64_t request_id = 0;
  int32_t sample_index = 0;
  std::span<const int32_t> tokens;  // the prompt, then the tokens generated so far
  int32_t num_prompt_tokens = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Up to `k` tokens to follow ctx.tokens, into *out (cleared first); none
  // when it has nothing to offer. Sure proposals: no probabilities.
  virtual void propose(const ProposalContext& ctx, int32_t k, std::vector<int32_t>* out) = 0;
};

}  // namespace pvllm
