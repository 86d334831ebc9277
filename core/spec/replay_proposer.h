// Replay: proposes what it was told the sequence will say, for tests and
// benchmarks (an oracle). Given each request's expected continuation (the
// tokens after its prompt, say a run without speculation), it proposes the
// next k of them, right for the first `right` proposals of each step and
// wrong after (a different token), so a test controls exactly how many
// stand. right < 0: always right.
#pragma once

#include <map>
#include <vector>

#include "core/spec/proposer.h"

namespace pvllm {

class ReplayProposer final : public Proposer {
 public:
  // `vocab_size`: wrong proposals stay inside the vocabulary.
  ReplayProposer(int32_t vocab_size, int32_t right) : vocab_size_(vocab_size), right_(right) {}
  // What request `request_id`'s sample `sample_index` generates.
  void expect(uint64_t request_id, int32_t sample_index, std::vector<int32_t> continuation);
  void propose(const ProposalContext& ctx, int32_t k, std::vector<int32_t>* out) override;

 private:
  int32_t vocab_size_;
  int32_t right_;
  std::map<std::pair<uint64_t, int32_t>, std::vector<int32_t>> expected_;
};

}  // namespace pvllm
