// Speculative sampling: whether a proposed token stands, drawn so that the
// token emitted at each position has exactly the target's distribution
// whatever the proposer proposed.
//
// A proposal d drawn from the proposer's distribution q is accepted with
// probability min(1, p[d] / q[d]), p the target's distribution at that
// position (sample_distribution: the request's mask, penalties,
// temperature, top-k, top-p and min-p applied to the target's logits);
// rejected, the emitted token is drawn from max(0, p - q) normalised. Then
// P(emit t) = min(p[t], q[t]) + (1 - sum min(p, q)) * max(0, p[t] - q[t]) /
// sum max(0, p - q) = p[t]. A proposer that gives no probabilities proposed
// d surely: q is one-hot on d (accept with p[d]; else draw from p without
// d). At temperature 0, p is one-hot on the greedy token: a proposal stands
// exactly when it is that token, and a rejection emits it.
//
// The draws are counter based, as sample_token's: (seed, sample_index,
// step) of the position, each on a stream of its own, so a seeded request
// emits the same tokens whatever its batch.
#pragma once

#include <cstdint>
#include <span>

namespace pvllm {

struct SpeculativeVerdict {
  int32_t token_id = -1;  // the token emitted at this position (-1: p allows nothing)
  bool accepted = false;  // token_id is the proposal
};

// `p`: the target's distribution ([vocab], sums to 1, or all 0 when
// nothing may be emitted). `q`: the proposer's distribution, or empty for
// a sure proposal. A proposal outside the vocabulary is rejected.
SpeculativeVerdict verify_proposal(std::span<const double> p, int32_t proposed,
                                   std::span<const double> q, uint64_t seed, int32_t sample_index,
                                   int32_t step);

// A token drawn from `p` itself (the position after the last accepted
// proposal), on the stream verify_proposal's residual draws use.
int32_t draw_from(std::span<const double> p, uint64_t seed, int32_t sample_index, int32_t step);

}  // namespace pvllm
