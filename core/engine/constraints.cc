// Structured output in the engine: a request's constraint is compiled at
// submit (cached by its text, core/structured/constraint.h); each of its
// samples follows it with a TokenMatcher; each draw gets the mask of the
// tokens that may come next, plus the stop tokens once the text may end.
// Every backend draws with the masks (Backend::forward_sample's contract).
#include <algorithm>
#include <chrono>

#include "core/engine/engine.h"
#include "core/engine/model_runner.h"
#include "core/engine/request.h"

namespace pvllm {

Status Engine::compile_constraint(const SamplingParams& params, Request* req) {
  if (!params.constraint.active()) return Status::Ok();
  if (params.beam_width > 0) return Unsupported("an output constraint with beam search");
  if (!tokenizer_) {
    return Unsupported(
        "an output constraint needs the model's tokenizer (the text each token writes)");
  }
  {
    std::lock_guard<std::mutex> lock(constraints_mu_);
    if (!constraints_) {
      std::vector<std::string> bytes(static_cast<size_t>(tokenizer_->vocab_size()));
      for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
        bytes[static_cast<size_t>(id)] = tokenizer_->token_bytes(id);
      }
      constraints_ = std::make_unique<structured::ConstraintCompiler>(std::move(bytes));
    }
  }
  return constraints_->compile(params.constraint, &req->constraint);
}

void Engine::start_matcher(const Request& req, SampleState* state) const {
  if (!req.constraint) return;
  // The text starts as the detokenizer writes it: without the tokenizer's
  // dummy-prefix space after BOS.
  const int32_t last = last_prompt_token(req);
  const int spaces =
      (last < 0 || last == tokenizer_->bos_id()) ? tokenizer_->num_leading_spaces_stripped() : 0;
  state->matcher = std::make_unique<structured::TokenMatcher>(req.constraint, spaces);
}

std::span<const uint64_t> Engine::draw_mask(const Request& req, const SampleState& state) {
  const auto start = std::chrono::steady_clock::now();
  const structured::CompiledConstraint::Mask allowed = state.matcher->allowed();
  const int32_t vocab = model_->config.vocab_size;
  std::vector<uint64_t> mask((static_cast<size_t>(vocab) + 63) / 64, 0);
  std::copy_n(allowed->begin(), std::min(mask.size(), allowed->size()), mask.begin());
  // Stop tokens end the text: allowed once it is complete, refused before
  // (also when a stop id is an ordinary piece of text in the vocabulary).
  const bool can_end = state.matcher->can_end();
  for (int32_t id : req.stop_ids) {
    if (id < 0 || id >= vocab) continue;
    const uint64_t bit = uint64_t{1} << (id & 63);
    uint64_t& word = mask[static_cast<size_t>(id) >> 6];
    word = can_end ? (word | bit) : (word & ~bit);
  }
  draw_masks_.push_back(std::move(mask));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.num_constrained_draws;
  stats_.constraint_mask_ms += ms;
  return draw_masks_.back();  // moving the outer vector keeps this buffer
}

}  // namespace pvllm
