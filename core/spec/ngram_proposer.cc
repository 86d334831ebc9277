#include "core/spec/ngram_proposer.h"

#include <algorithm>

namespace pvllm {

void NgramProposer::propose(const ProposalContext& ctx, int32_t k, std::vector<int32_t>* out) {
  out->clear();
  const std::span<const int32_t> t = ctx.tokens;
  const auto len = static_cast<int64_t>(t.size());
  if (k <= 0) return;
  // From the longest tail down: the first n with an earlier occurrence.
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const std::span<const int32_t> tail = t.subspan(static_cast<size_t>(len - n));
    // Occurrences ending before the tail itself (each followed by at least
    // one token), latest first: the latest followed by k tokens, or, when
    // none is, the one followed by the most (in a loop the latest
    // occurrence overlaps the tail and predicts only a token or two).
    int64_t best = -1;
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), t.begin() + start)) continue;
      best = start;
      if (len - (start + n) >= k) break;
    }
    if (best >= 0) {
      const int64_t from = best + n;
      const int64_t count = std::min<int64_t>(k, len - from);
      out->assign(t.begin() + from, t.begin() + from + count);
      return;
    }
  }
}

}  // namespace pvllm
