#include "core/sample/beam_search.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/base/check.h"

namespace pvllm {

BeamSearch::BeamSearch(const BeamConfig& config) : config_(config) {
  PVLLM_CHECK(config_.width >= 1, "beam width must be >= 1");
  live_.emplace_back();  // the prompt: one beam with nothing generated
}

double BeamSearch::score(double cumulative_logprob, int32_t length) const {
  return cumulative_logprob / std::pow(static_cast<double>(std::max(length, 1)),
                                       static_cast<double>(config_.length_penalty));
}

void BeamSearch::add_hypothesis(BeamHypothesis h) {
  h.score = score(h.cumulative_logprob, static_cast<int32_t>(h.logprobs.size()));
  if (static_cast<int32_t>(finished_.size()) < config_.width) {
    finished_.push_back(std::move(h));
    return;
  }
  auto worst = std::min_element(
      finished_.begin(), finished_.end(),
      [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score < b.score; });
  if (h.score > worst->score) *worst = std::move(h);
}

bool BeamSearch::is_done(double best_live_cumulative) const {
  if (static_cast<int32_t>(finished_.size()) < config_.width) return false;
  if (config_.early_stopping == EarlyStopping::kTrue) return true;
  double worst = finished_.front().score;
  for (const BeamHypothesis& h : finished_) worst = std::min(worst, h.score);
  const int32_t reach =
      config_.early_stopping == EarlyStopping::kNever && config_.length_penalty > 0.0f
          ? config_.max_tokens
          : length_;
  return worst >= score(best_live_cumulative, reach);
}

std::vector<BeamChoice> BeamSearch::step(const std::vector<std::vector<TokenLogprob>>& tops,
                                         const std::function<bool(int32_t)>& is_stop) {
  PVLLM_CHECK(!done_, "a finished beam search cannot step");
  PVLLM_CHECK(tops.size() == live_.size(), "one list of candidates per live beam");
  struct Candidate {
    int32_t beam;
    int32_t token;
    float logprob;
    double total;
  };
  std::vector<Candidate> candidates;
  for (size_t b = 0; b < tops.size(); ++b) {
    for (const TokenLogprob& t : tops[b]) {
      candidates.push_back({static_cast<int32_t>(b), t.token_id, t.logprob,
                            live_[b].cumulative_logprob + t.logprob});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.total != b.total) return a.total > b.total;
    if (a.beam != b.beam) return a.beam < b.beam;
    return a.token < b.token;
  });
  std::vector<BeamChoice> choices;
  std::vector<Live> next;
  for (size_t rank = 0; rank < candidates.size(); ++rank) {
    const Candidate& c = candidates[rank];
    const Live& parent = live_[static_cast<size_t>(c.beam)];
    if (is_stop(c.token)) {
      if (rank >= static_cast<size_t>(config_.width)) continue;
      BeamHypothesis h;
      h.tokens = parent.tokens;
      h.logprobs = parent.logprobs;
      h.logprobs.push_back(c.logprob);
      h.cumulative_logprob = c.total;
      h.stopped = true;
      add_hypothesis(std::move(h));
      continue;
    }
    Live child = parent;
    child.tokens.push_back(c.token);
    child.logprobs.push_back(c.logprob);
    child.cumulative_logprob = c.total;
    next.push_back(std::move(child));
    choices.push_back({c.beam, c.token, c.logprob});
    if (static_cast<int32_t>(next.size()) == config_.width) break;
  }
  live_ = std::move(next);
  ++length_;
  double best = -INFINITY;
  for (const Live& l : live_) best = std::max(best, l.cumulative_logprob);
  done_ = live_.empty() || is_done(best);
  if (done_) choices.clear();
  return choices;
}

std::vector<BeamHypothesis> BeamSearch::finish(int32_t n) {
  // A search the rules ended keeps its hypotheses; one cut short by
  // max_tokens (or the context) adds its live beams.
  for (Live& l : done_ ? std::vector<Live>{} : live_) {
    BeamHypothesis h;
    h.tokens = std::move(l.tokens);
    h.logprobs = std::move(l.logprobs);
    h.cumulative_logprob = l.cumulative_logprob;
    add_hypothesis(std::move(h));
  }
  live_.clear();
  done_ = true;
  std::stable_sort(
      finished_.begin(), finished_.end(),
      [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; });
  if (static_cast<int32_t>(finished_.size()) > n) finished_.resize(static_cast<size_t>(n));
  return std::move(finished_);
}

}  // namespace pvllm
