#include "core/spec/replay_proposer.h"

#include <algorithm>
#include <utility>

namespace pvllm {

void ReplayProposer::expect(uint64_t request_id, int32_t sample_index,
                            std::vector<int32_t> continuation) {
  expected_[{request_id, sample_index}] = std::move(continuation);
}

void ReplayProposer::propose(const ProposalContext& ctx, int32_t k, std::vector<int32_t>* out) {
  out->clear();
  auto it = expected_.find({ctx.request_id, ctx.sample_index});
  if (it == expected_.end() || k <= 0) return;
  const std::vector<int32_t>& want = it->second;
  const auto generated = static_cast<int64_t>(ctx.tokens.size()) - ctx.num_prompt_tokens;
  if (generated < 0) return;
  for (int64_t i = generated;
       i < static_cast<int64_t>(want.size()) && static_cast<int32_t>(out->size()) < k; ++i) {
    const bool right = right_ < 0 || static_cast<int32_t>(out->size()) < right_;
    out->push_back(right ? want[i] : (want[i] + 1) % std::max(vocab_size_, 2));
  }
}

}  // namespace pvllm
