#include "core/sample/sampling_params.h"

#include <cmath>
#include <string>

namespace pvllm {

namespace {

// The comparisons below are written so that NaN fails them (a NaN parameter
// is never "in range").
Status bad(const std::string& field, const std::string& why) {
  return InvalidArgument("sampling params: " + field + " " + why);
}

}  // namespace

Status SamplingParams::validate(int32_t vocab_size) const {
  if (!(std::isfinite(temperature) && temperature >= 0.0f)) {
    return bad("temperature", "must be finite and >= 0, got " + std::to_string(temperature));
  }
  if (top_k < 0) return bad("top_k", "must be >= 0 (0 = off), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return bad("top_p", "must be in (0, 1], got " + std::to_string(top_p));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return bad("min_p", "must be in [0, 1], got " + std::to_string(min_p));
  }
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)) {
    return bad("repetition_penalty",
               "must be finite and > 0, got " + std::to_string(repetition_penalty));
  }
  if (!std::isfinite(presence_penalty)) return bad("presence_penalty", "must be finite");
  if (!std::isfinite(frequency_penalty)) return bad("frequency_penalty", "must be finite");
  if (max_tokens < 1) {
    return bad("max_tokens", "must be >= 1, got " + std::to_string(max_tokens));
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return bad("stop_token_ids", "entry " + std::to_string(id) + " is outside [0, " +
                                       std::to_string(vocab_size) + ")");
    }
  }
  for (const std::string& s : stop) {
    if (s.empty()) return bad("stop", "must not contain an empty string");
  }
  if (logprobs < -1 || logprobs > 20) {
    return bad("logprobs", "must be in [-1, 20], got " + std::to_string(logprobs));
  }
  if (n < 1) return bad("n", "must be >= 1, got " + std::to_string(n));
  if (prompt_logprobs < -1 || prompt_logprobs > 20) {
    return bad("prompt_logprobs", "must be in [-1, 20], got " + std::to_string(prompt_logprobs));
  }
  return validate_beam_search();
}

// Beam search ranks tokens by the raw model distribution: anything that
// would shape or randomize it is refused rather than ignored.
Status SamplingParams::validate_beam_search() const {
  if (beam_width < 0 || beam_width > kMaxBeamWidth) {
    return bad("beam_width", "must be in [0, " + std::to_string(kMaxBeamWidth) +
                                 "] (0 = off), got " + std::to_string(beam_width));
  }
  if (!std::isfinite(length_penalty)) return bad("length_penalty", "must be finite");
  const int32_t es = static_cast<int32_t>(early_stopping);
  if (es < 0 || es > 2) {
    return bad("early_stopping",
               "must be 0 (heuristic), 1 (true) or 2 (never), got " + std::to_string(es));
  }
  if (beam_width == 0) return Status::Ok();
  const std::string with =
      "must be off with beam search (beam_width " + std::to_string(beam_width) + "), got ";
  if (n > beam_width)
    return bad("n", "must be <= beam_width with beam search, got " + std::to_string(n));
  if (temperature != 0.0f)
    return bad("temperature", "must be 0 with beam search, got " + std::to_string(temperature));
  if (top_k != 0) return bad("top_k", with + std::to_string(top_k));
  if (top_p != 1.0f) return bad("top_p", with + std::to_string(top_p));
  if (min_p != 0.0f) return bad("min_p", with + std::to_string(min_p));
  if (repetition_penalty != 1.0f) {
    return bad("repetition_penalty", with + std::to_string(repetition_penalty));
  }
  if (presence_penalty != 0.0f)
    return bad("presence_penalty", with + std::to_string(presence_penalty));
  if (frequency_penalty != 0.0f) {
    return bad("frequency_penalty", with + std::to_string(frequency_penalty));
  }
  if (!stop.empty()) return bad("stop", "stop strings are not supported with beam search");
  if (logprobs > 0) {
    return bad("logprobs", "must be -1 or 0 with beam search (no alternatives), got " +
                               std::to_string(logprobs));
  }
  return Status::Ok();
}

}  // namespace pvllm
