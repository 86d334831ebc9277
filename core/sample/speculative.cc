#include "core/sample/speculative.h"

#include <algorithm>
#include <vector>

#include "core/sample/sampler.h"

namespace pvllm {
namespace {

constexpr uint32_t kAcceptStream = 1;
constexpr uint32_t kResidualStream = 2;

// Inverse CDF over w (unnormalised, total > 0), in id order; the last id
// of positive weight when rounding leaves u * total at the total.
int32_t inverse_cdf(std::span<const double> w, double total, double u) {
  const double target = u * total;
  double running = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0) continue;
    running += w[i];
    last = static_cast<int32_t>(i);
    if (running > target) return last;
  }
  return last;
}

}  // namespace

int32_t draw_from(std::span<const double> p, uint64_t seed, int32_t sample_index, int32_t step) {
  double total = 0.0;
  for (double v : p) total += std::max(v, 0.0);
  if (total <= 0.0) return -1;
  return inverse_cdf(p, total, sampler_uniform_stream(seed, sample_index, step, kResidualStream));
}

SpeculativeVerdict verify_proposal(std::span<const double> p, int32_t proposed,
                                   std::span<const double> q, uint64_t seed, int32_t sample_index,
                                   int32_t step) {
  SpeculativeVerdict v;
  const bool in_vocab = proposed >= 0 && static_cast<size_t>(proposed) < p.size();
  if (in_vocab) {
    const double pd = p[proposed];
    const double qd =
        q.empty() ? 1.0 : (static_cast<size_t>(proposed) < q.size() ? q[proposed] : 0.0);
    // u < p/q  <=>  u * q < p (no division; q = 0 with p > 0 accepts).
    const double u = sampler_uniform_stream(seed, sample_index, step, kAcceptStream);
    if (pd > 0.0 && u * qd < pd) {
      v.token_id = proposed;
      v.accepted = true;
      return v;
    }
  }
  // The residual max(0, p - q): p less the proposer's share.
  thread_local std::vector<double> residual;
  residual.assign(p.begin(), p.end());
  double total = 0.0;
  for (size_t i = 0; i < residual.size(); ++i) {
    const double qi =
        q.empty() ? (static_cast<int32_t>(i) == proposed ? 1.0 : 0.0) : (i < q.size() ? q[i] : 0.0);
    residual[i] = std::max(residual[i] - qi, 0.0);
    total += residual[i];
  }
  if (total > 0.0) {
    v.token_id = inverse_cdf(residual, total,
                             sampler_uniform_stream(seed, sample_index, step, kResidualStream));
    return v;
  }
  // Rounding left no residual (p and q all but equal): p itself.
  v.token_id = draw_from(p, seed, sample_index, step);
  return v;
}

}  // namespace pvllm
