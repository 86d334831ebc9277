// Prompt lookup: the tokens that followed the last earlier occurrence of
// the sequence's tail. The longest tail of min_n..max_n tokens that occurs
// earlier in the prompt or the output wins; among its occurrences the
// latest followed by k tokens (nearest text is likeliest to repeat the
// same way), else the one followed by the most. What followed it, up to k
// tokens, is the proposal. No second model: it pays on work
// that copies its input (summaries, code edits, quoting).
#pragma once

#include "core/spec/proposer.h"

namespace pvllm {

class NgramProposer final : public Proposer {
 public:
  // 1 <= min_n <= max_n.
  NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}
  void propose(const ProposalContext& ctx, int32_t k, std::vector<int32_t>* out) override;

 private:
  int32_t min_n_;
  int32_t max_n_;
};

}  // namespace pvllm
