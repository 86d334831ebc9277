// Structured output, a part of the OutputProcessor: a request's constraint
// is compiled at submit (cached by its text, core/structured/constraint.h);
// each of its samples follows it with a TokenMatcher; each draw gets the
// mask of the tokens that may come next, plus the stop tokens once the text
// may end. Every backend draws with the masks (Backend::forward_sample's
// contract).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/base/status.h"
#include "core/engine/request.h"
#include "core/sample/sampling_params.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm {

class Constraints {
 public:
  // `tokenizer` may be null (no constraint can then be compiled).
  Constraints(const Tokenizer* tokenizer, int32_t vocab_size)
      : tokenizer_(tokenizer), vocab_size_(vocab_size) {}
  ~Constraints();

  // Sets req->constraint from params (none when params have none). Any
  // thread; the compiler is built at the first constraint.
  Status compile(const SamplingParams& params, Request* req);
  // Gives a new sample of a constrained request its matcher.
  void start_matcher(const Request& req, SampleState* state) const;

  // The step thread only, below.
  // Forgets the previous step's masks.
  void begin_step() { masks_.clear(); }
  // The mask of what `state`'s next draw may be; valid until begin_step.
  std::span<const uint64_t> mask(const Request& req, const SampleState& state);
  int64_t num_constrained_draws() const { return num_constrained_draws_; }
  double mask_ms() const { return mask_ms_; }

 private:
  const Tokenizer* const tokenizer_;
  const int32_t vocab_size_;
  std::mutex compiler_mu_;
  std::unique_ptr<structured::ConstraintCompiler> compiler_;
  std::vector<std::vector<uint64_t>> masks_;  // this step's, one per constrained draw
  int64_t num_constrained_draws_ = 0;
  double mask_ms_ = 0.0;  // host time spent making masks
};

}  // namespace pvllm
