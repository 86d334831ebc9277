#include "core/sample/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

namespace pvllm {

namespace {

// ---- counter-based randomness ------------------------------------------

// The splitmix64 finaliser: a bijection on 64 bits with full avalanche, so
// neighbouring counters give unrelated outputs.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One 64-bit draw per (seed, sample_index, step); no state is carried, which
// is what makes a seeded request reproducible across batches and preemption.
uint64_t draw_bits(uint64_t seed, int32_t sample_index, int32_t step) {
  const uint64_t counter =
      (uint64_t{static_cast<uint32_t>(sample_index)} << 32) | static_cast<uint32_t>(step);
  return mix64(mix64(seed + 0x9E3779B97F4A7C15ull) ^ mix64(counter ^ 0xD1B54A32D192ED03ull));
}

// ---- ordering ------------------------------------------------------------

// Higher logit first; equal logits by lower id, so every ranking is a strict
// total order and top-k / top-p boundaries never depend on the sort algorithm.
struct RankDesc {
  const float* x;
  bool operator()(int32_t a, int32_t b) const { return x[a] != x[b] ? x[a] > x[b] : a < b; }
};

// The `count` best ids of `x`, best first. O(V + count log count).
std::vector<int32_t> top_ids(std::span<const float> x, int32_t count) {
  const auto num_tokens = static_cast<int32_t>(x.size());
  count = std::min(count, num_tokens);
  std::vector<int32_t> ids(num_tokens);
  for (int32_t i = 0; i < num_tokens; ++i) ids[i] = i;
  const RankDesc rank{x.data()};
  if (count < num_tokens) {
    std::nth_element(ids.begin(), ids.begin() + count, ids.end(), rank);
    ids.resize(count);
  }
  std::sort(ids.begin(), ids.end(), rank);
  return ids;
}

// NaN ranks below everything; +inf becomes the largest finite value so that
// differences from the maximum stay finite.
// Written as two selects so that loops over it vectorize.
inline float sanitized(float v) {
  v = v != v ? -std::numeric_limits<float>::infinity() : v;  // NaN
  return v == std::numeric_limits<float>::infinity() ? FLT_MAX : v;
}

// The lowest id of the largest sanitized value, without a copy. First the
// plain maximum over eight lanes: `v > m ? v : m` passes over NaN (every
// comparison with it is false), so it vectorizes and needs no sanitizing.
// Then the first id whose sanitized value equals the maximum's: +inf and
// FLT_MAX rank equal, -0 and +0 too, and when nothing beats -inf (every
// value NaN or -inf) id 0 wins, as in a strict one-pass argmax.
int32_t argmax_sanitized(std::span<const float> x) {
  const auto n = static_cast<int64_t>(x.size());
  float lane[8];
  for (float& l : lane) l = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float best = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (float l : lane) best = l > best ? l : best;
  if (best == -std::numeric_limits<float>::infinity()) return 0;
  if (best < FLT_MAX) {  // finite: the first equal value (NaN equals nothing)
    for (i = 0; i < n; ++i) {
      if (x[i] == best) return static_cast<int32_t>(i);
    }
  }
  for (i = 0; i < n; ++i) {  // FLT_MAX or +inf: the first of either
    if (x[i] >= FLT_MAX) return static_cast<int32_t>(i);
  }
  return 0;
}

// ---- penalties -----------------------------------------------------------

// Sorted copy of the ids that are valid tokens (out-of-range ids are ignored
// rather than trusted as indices).
std::vector<int32_t> sorted_valid(std::span<const int32_t> ids, int32_t num_tokens) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < num_tokens) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool has_penalties(const SamplingParams& params) {
  return params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
         params.frequency_penalty != 0.0f;
}

void apply_penalties(std::span<float> x, const SamplingParams& params,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids) {
  const auto num_tokens = static_cast<int32_t>(x.size());
  const std::vector<int32_t> output = sorted_valid(output_ids, num_tokens);

  if (params.repetition_penalty != 1.0f) {
    // HF / vLLM rule: shrink positive logits, push negative ones further down,
    // once per distinct token seen in the prompt or the output.
    std::vector<int32_t> seen = sorted_valid(prompt_ids, num_tokens);
    seen.insert(seen.end(), output.begin(), output.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      x[id] = x[id] > 0.0f ? x[id] / params.repetition_penalty : x[id] * params.repetition_penalty;
    }
  }

  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    for (size_t i = 0; i < output.size();) {
      size_t j = i;
      while (j < output.size() && output[j] == output[i]) ++j;
      const auto num_occurrences = static_cast<float>(j - i);
      x[output[i]] -= params.presence_penalty + num_occurrences * params.frequency_penalty;
      i = j;
    }
  }
}

// ---- logprobs ------------------------------------------------------------

double log_sum_exp(std::span<const float> x) {
  float max_x = -std::numeric_limits<float>::infinity();
  for (float v : x) max_x = std::max(max_x, v);
  if (!std::isfinite(max_x)) return max_x;
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - max_x);
  return max_x + std::log(sum);
}

// `raw`: the sanitized logits before penalties and temperature.
void fill_logprobs(std::span<const float> raw, int32_t token_id, int32_t num_top,
                   SampleResult& result) {
  const double lse = log_sum_exp(raw);
  result.logprob = static_cast<float>(raw[token_id] - lse);
  if (num_top <= 0) return;
  for (int32_t id : top_ids(raw, num_top)) {
    result.top_logprobs.push_back({id, static_cast<float>(raw[id] - lse)});
  }
}

// ---- the random draw -----------------------------------------------------

// Rearranges `ids` so that its first k entries are the nucleus (in rank
// order, the shortest prefix whose weight reaches `target`) and returns k.
// A weighted quickselect: halve the range around its median rank and keep
// the half where the boundary lies, so the cost is O(n), not a full sort.
size_t nucleus_size(std::vector<int32_t>& ids, const float* x, const std::vector<double>& weights,
                    double target) {
  const RankDesc rank{x};
  size_t begin = 0;
  size_t end = ids.size();
  double mass_before = 0.0;  // of ids[0, begin), all ranked above ids[begin, end)
  while (end - begin > 64) {
    const size_t mid = begin + (end - begin) / 2;
    std::nth_element(ids.begin() + begin, ids.begin() + mid, ids.begin() + end, rank);
    double upper = 0.0;
    for (size_t i = begin; i < mid; ++i) upper += weights[ids[i]];
    if (mass_before + upper >= target) {
      end = mid;
    } else {
      mass_before += upper;
      begin = mid;
    }
  }
  std::sort(ids.begin() + begin, ids.begin() + end, rank);
  for (size_t i = begin; i < end; ++i) {
    mass_before += weights[ids[i]];
    if (mass_before >= target) return i + 1;
  }
  return end;  // rounding left the sum a hair short: keep all that is left
}

// Scratch buffers of the calling thread, reused from draw to draw so that
// sampling allocates nothing once they have grown to the vocabulary.
struct Scratch {
  std::vector<float> x;         // the logits being shaped
  std::vector<float> raw;       // sanitized raw logits, for logprobs
  std::vector<double> weights;  // [vocab] unnormalised probabilities (of candidates)
  std::vector<int32_t> ids;     // candidates of top-k / top-p
  std::vector<double> cum;      // running sums of the survivors' weights, in id order
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The largest value (no NaN in x): eight lanes, so not one long chain.
float max_of(std::span<const float> x) {
  float lane[8];
  for (float& l : lane) l = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  for (; i + 8 <= x.size(); i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float best = -std::numeric_limits<float>::infinity();
  for (; i < x.size(); ++i) best = x[i] > best ? x[i] : best;
  for (float l : lane) best = l > best ? l : best;
  return best;
}

// The survivors of top-k and top-p, their ids ascending in s.ids, their
// weights exp(x - max) in s.weights[id]; min-p not applied yet.
void top_candidates(std::span<const float> x, float max_x, const SamplingParams& params,
                    bool use_top_k, bool use_top_p, Scratch& s) {
  const auto num_tokens = static_cast<int32_t>(x.size());
  std::vector<int32_t>& ids = s.ids;  // the candidates still in play
  ids.resize(num_tokens);
  for (int32_t i = 0; i < num_tokens; ++i) ids[i] = i;
  if (use_top_k) {
    std::nth_element(ids.begin(), ids.begin() + params.top_k, ids.end(), RankDesc{x.data()});
    ids.resize(params.top_k);
  }
  double total = 0.0;
  for (int32_t id : ids) {
    s.weights[id] = std::exp(double{x[id]} - max_x);
    total += s.weights[id];
  }
  // top-p acts on the distribution left by top-k, renormalised (as vLLM).
  if (use_top_p) ids.resize(nucleus_size(ids, x.data(), s.weights, params.top_p * total));
  std::sort(ids.begin(), ids.end());
}

// The candidates a draw chooses among and their weights: every id (`*all`)
// or s.ids ascending, weight exp(x - max) in s.weights[id] after top-k,
// top-p and min-p (0 for those min-p drops). false when nothing is
// possible (every logit -inf).
bool candidate_weights(std::span<const float> x, const SamplingParams& params, Scratch& s,
                       bool* all) {
  const float max_x = max_of(x);
  if (max_x == -std::numeric_limits<float>::infinity()) return false;
  const auto num_tokens = static_cast<int32_t>(x.size());
  s.weights.resize(num_tokens);
  const bool use_top_k = params.top_k > 0 && params.top_k < num_tokens;
  const bool use_top_p = params.top_p < 1.0f;
  *all = !use_top_k && !use_top_p;  // every id a candidate
  if (*all) {
    // exp(-inf) is +0 exactly: tokens a structured-output mask refused (or
    // the model ruled out) skip the call and weigh the same.
    const float minus_inf = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < num_tokens; ++i) {
      s.weights[i] = x[i] == minus_inf ? 0.0 : std::exp(double{x[i]} - max_x);
    }
  } else {
    top_candidates(x, max_x, params, use_top_k, use_top_p, s);
  }
  // min-p: p_i >= min_p * p_max  <=>  exp(x_i - max) >= min_p, whatever the
  // normaliser; the best token always survives since its weight is 1.
  if (params.min_p > 0.0f) {
    const auto n = static_cast<int32_t>(*all ? num_tokens : s.ids.size());
    for (int32_t j = 0; j < n; ++j) {
      double& w = s.weights[*all ? j : s.ids[j]];
      if (w < params.min_p) w = 0.0;
    }
  }
  return true;
}

// Inverse CDF over the surviving tokens, in id order so the result does not
// depend on how the filters arranged their candidates: the first survivor
// whose running sum of weights passes u * total. The running sums are the
// same additions in the same order as summing the weights one by one (a
// token of weight 0 adds nothing), kept so that the crossing is found by
// binary search rather than a second walk.
int32_t draw(std::span<const float> x, const SamplingParams& params, double u) {
  Scratch& s = scratch();
  bool all = false;
  if (!candidate_weights(x, params, s, &all)) return 0;  // nothing is possible
  const auto num_candidates = static_cast<int32_t>(all ? x.size() : s.ids.size());
  auto id_of = [&](int32_t j) { return all ? j : s.ids[j]; };
  s.cum.resize(num_candidates);
  double running = 0.0;
  for (int32_t j = 0; j < num_candidates; ++j) s.cum[j] = running += s.weights[id_of(j)];
  const double target = u * running;
  const auto crossing = std::upper_bound(s.cum.begin(), s.cum.end(), target);
  if (crossing != s.cum.end()) return id_of(static_cast<int32_t>(crossing - s.cum.begin()));
  // u * total rounded up to the total: the last token that can be drawn.
  for (int32_t j = num_candidates - 1; j >= 0; --j) {
    if (s.weights[id_of(j)] > 0.0) return id_of(j);
  }
  return 0;
}

// The structured-output mask: -inf for every token it does not allow.
void apply_mask(std::span<const uint64_t> allowed, std::vector<float>& x) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const size_t n = x.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = w < allowed.size() ? allowed[w] : 0;
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i) {
      if (((bits >> (i & 63)) & 1) == 0) x[i] = minus_inf;
    }
  }
}

int32_t first_allowed_token(std::span<const uint64_t> allowed, int32_t vocab_size) {
  for (size_t w = 0; w < allowed.size() && w * 64 < static_cast<size_t>(vocab_size); ++w) {
    if (allowed[w] != 0) {
      const auto id =
          static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(allowed[w])));
      return id < vocab_size ? id : -1;
    }
  }
  return -1;
}

// The thread's scratch copy of `logits`, sanitized, masked and penalized
// (what sample_token and sample_distribution shape before temperature).
std::vector<float>& shaped_copy(std::span<const float> logits, const SamplingParams& params,
                                std::span<const int32_t> prompt_ids,
                                std::span<const int32_t> output_ids,
                                std::span<const uint64_t> allowed) {
  std::vector<float>& x = scratch().x;
  x.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) x[i] = sanitized(logits[i]);
  if (!allowed.empty()) apply_mask(allowed, x);
  apply_penalties(x, params, prompt_ids, output_ids);
  return x;
}

}  // namespace

float sampler_uniform(uint64_t seed, int32_t sample_index, int32_t step) {
  // 24 bits: every value is exactly representable and strictly below 1.
  return static_cast<float>(draw_bits(seed, sample_index, step) >> 40) * 0x1p-24f;
}

double sampler_uniform_stream(uint64_t seed, int32_t sample_index, int32_t step, uint32_t stream) {
  const uint64_t bits = mix64(draw_bits(seed, sample_index, step) ^ mix64(uint64_t{stream} + 1));
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

void sample_distribution(std::span<const float> logits, const SamplingParams& params,
                         std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                         std::span<const uint64_t> allowed, std::vector<double>* probs) {
  probs->assign(logits.size(), 0.0);
  if (logits.empty()) return;
  if (!allowed.empty() && first_allowed_token(allowed, static_cast<int32_t>(logits.size())) < 0) {
    return;
  }
  std::vector<float>& x = shaped_copy(logits, params, prompt_ids, output_ids, allowed);
  if (params.temperature == 0.0f) {
    // One-hot where sample_token's greedy draw lands (lowest id on ties;
    // the first allowed token when every allowed logit is -inf).
    int32_t id = argmax_sanitized(x);
    if (!allowed.empty() && !token_allowed(allowed, id)) {
      id = first_allowed_token(allowed, static_cast<int32_t>(logits.size()));
    }
    (*probs)[id] = 1.0;
    return;
  }
  for (float& v : x) v = sanitized(v / params.temperature);
  Scratch& s = scratch();
  bool all = false;
  if (!candidate_weights(x, params, s, &all)) {
    // Every logit -inf: sample_token's draw gives its fallback token.
    int32_t id = 0;
    if (!allowed.empty()) id = first_allowed_token(allowed, static_cast<int32_t>(logits.size()));
    (*probs)[id] = 1.0;
    return;
  }
  double total = 0.0;
  const auto n = static_cast<int32_t>(all ? x.size() : s.ids.size());
  for (int32_t j = 0; j < n; ++j) {
    const int32_t id = all ? j : s.ids[j];
    (*probs)[id] = s.weights[id];
    total += s.weights[id];
  }
  for (double& p : *probs) p /= total;
}

SampleResult sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                          uint64_t seed, int32_t sample_index, int32_t step,
                          std::span<const uint64_t> allowed) {
  SampleResult result;
  if (logits.empty()) return result;
  int32_t first_allowed = -1;
  if (!allowed.empty()) {
    first_allowed = first_allowed_token(allowed, static_cast<int32_t>(logits.size()));
    if (first_allowed < 0) {
      result.token_id = -1;
      return result;
    }
  }
  const bool shaped = has_penalties(params) || params.temperature != 0.0f || !allowed.empty();
  if (!shaped) {
    // Plain greedy: read the row in place, no copy.
    result.token_id = argmax_sanitized(logits);
  } else {
    // One copy, shaped in place: penalties, temperature, then the draw.
    std::vector<float>& x = shaped_copy(logits, params, prompt_ids, output_ids, allowed);
    if (params.temperature == 0.0f) {
      result.token_id = argmax_sanitized(x);
    } else {
      const float temperature = params.temperature;
      for (float& v : x) v = sanitized(v / temperature);
      // 53 bits for the inverse CDF so that tokens far below 2^-24 in
      // probability keep their share; its top 24 bits equal sampler_uniform.
      const double u = static_cast<double>(draw_bits(seed, sample_index, step) >> 11) * 0x1p-53;
      result.token_id = draw(x, params, u);
    }
  }
  // Every allowed logit -inf (or NaN): the first allowed token.
  if (!allowed.empty() && !token_allowed(allowed, result.token_id)) result.token_id = first_allowed;
  if (params.logprobs >= 0) {
    // Log-softmax of the raw logits, only when asked.
    std::vector<float>& raw = scratch().raw;
    raw.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) raw[i] = sanitized(logits[i]);
    fill_logprobs(raw, result.token_id, params.logprobs, result);
  }
  return result;
}

SampleResult token_logprobs(std::span<const float> logits, int32_t token_id, int32_t num_top) {
  SampleResult result;
  result.token_id = token_id;
  std::vector<float>& raw = scratch().raw;
  raw.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) raw[i] = sanitized(logits[i]);
  fill_logprobs(raw, token_id, num_top, result);
  return result;
}

SampleResult sample_row(const float* logits, int32_t vocab_size, const SampleRow& row) {
  const std::span<const float> x(logits + static_cast<size_t>(row.logits_index) * vocab_size,
                                 static_cast<size_t>(vocab_size));
  return sample_token(x, *row.params, row.prompt_ids, row.output_ids, row.seed, row.sample_index,
                      row.step, row.allowed);
}

Status validate_sample_rows(std::span<const SampleRow> rows, int32_t num_logits) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleRow& r = rows[i];
    if (r.params == nullptr) {
      return InvalidArgument("sample row " + std::to_string(i) + " has no sampling params");
    }
    if (r.logits_index < 0 || r.logits_index >= num_logits) {
      return InvalidArgument("sample row " + std::to_string(i) + " reads logits row " +
                             std::to_string(r.logits_index) + " of " + std::to_string(num_logits));
    }
  }
  return Status::Ok();
}

}  // namespace pvllm
