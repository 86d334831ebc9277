// Beam search over one request: which beams live on after each step, which
// hypotheses are finished, and when the search is done, as Hugging Face's
// beam search decides them. Plain bookkeeping over tokens and log-
// probabilities; the engine mirrors the live beams on sequences that share
// their blocks copy-on-write (core/engine/beams.cc).
//
// The rules:
//   - Every live beam proposes its 2W most likely next tokens (W = the beam
//     width) with their log-probabilities under the raw model distribution;
//     a candidate's total is the beam's cumulative log-probability plus the
//     token's.
//   - Candidates are ranked by total (ties: lower beam, then lower token).
//     Walking them in rank order, a stop token ends its beam's text as a
//     finished hypothesis when it ranks among the first W (else it is
//     skipped); any other token extends its beam; W extensions are the next
//     step's live beams.
//   - A hypothesis' score is its cumulative log-probability (the stop token
//     included) over its length to the power length_penalty, its length
//     being its generated tokens (the stop token included). The best W
//     finished hypotheses are kept.
//   - Done, once W hypotheses are finished, when early_stopping is kTrue; or
//     when no live beam can beat the worst of them: its best cumulative
//     log-probability over the current length (kHeuristic), or over the
//     longest length it may reach when length_penalty > 0 (kNever).
//   - When the live beams reach max_tokens before the search is done, they
//     join the hypotheses (scored with their length); the best n hypotheses
//     are the result, best first.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/sample/sampler.h"

namespace pvllm {

struct BeamConfig {
  int32_t width = 1;
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  int32_t max_tokens = 16;  // generated tokens of a live beam at most
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated; a stop token that ended it is not among them
  std::vector<float> logprobs;  // of `tokens` (and of the stop token, last, when stopped)
  double cumulative_logprob = 0;
  double score = 0;
  bool stopped = false;  // ended by a stop token (else by length)
};

// The next live beam `parent` (an index into the live beams before the
// step) extended by `token`.
struct BeamChoice {
  int32_t parent = 0;
  int32_t token = 0;
  float logprob = 0.0f;
};

class BeamSearch {
 public:
  explicit BeamSearch(const BeamConfig& config);

  int32_t num_live() const { return static_cast<int32_t>(live_.size()); }
  // Generated tokens of every live beam (they advance together).
  int32_t length() const { return length_; }
  bool done() const { return done_; }
  int32_t max_tokens() const { return config_.max_tokens; }

  // One step: tops[b] holds live beam b's 2W best next tokens, best first.
  // Returns the new live beams in rank order (at most W; none once done).
  std::vector<BeamChoice> step(const std::vector<std::vector<TokenLogprob>>& tops,
                               const std::function<bool(int32_t)>& is_stop);

  // Ends the search: unless the rules ended it, the live beams join the
  // hypotheses. Returns the best n, best first.
  std::vector<BeamHypothesis> finish(int32_t n);

 private:
  struct Live {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    double cumulative_logprob = 0;
  };
  double score(double cumulative_logprob, int32_t length) const;
  void add_hypothesis(BeamHypothesis h);
  bool is_done(double best_live_cumulative) const;

  BeamConfig config_;
  std::vector<Live> live_;
  std::vector<BeamHypothesis> finished_;  // the best W, in no order
  int32_t length_ = 0;
  bool done_ = false;
};

}  // namespace pvllm
