#include "core/engine/constraints.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace pvllm {

Constraints::~Constraints() = default;

Status Constraints::compile(const SamplingParams& params, Request* req) {
  if (!params.constraint.active()) return Status::Ok();
  if (params.beam_width > 0) return Unsupported("an output constraint with beam search");
  if (tokenizer_ == nullptr) {
    return Unsupported(
        "an output constraint needs the model's tokenizer (the text each token writes)");
  }
  structured::ConstraintCompiler* compiler = nullptr;
  {
    std::lock_guard<std::mutex> lock(compiler_mu_);
    if (!compiler_) {
      std::vector<std::string> bytes(static_cast<size_t>(tokenizer_->vocab_size()));
      for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
        bytes[static_cast<size_t>(id)] = tokenizer_->token_bytes(id);
      }
      compiler_ = std::make_unique<structured::ConstraintCompiler>(std::move(bytes));
    }
    compiler = compiler_.get();
  }
  return compiler->compile(params.constraint, &req->constraint);
}

void Constraints::start_matcher(const Request& req, SampleState* state) const {
  if (!req.constraint) return;
  // The text starts as the detokenizer writes it: without the tokenizer's
  // dummy-prefix space after BOS.
  const int32_t last = last_prompt_token(req, tokenizer_);
  const int spaces =
      (last < 0 || last == tokenizer_->bos_id()) ? tokenizer_->num_leading_spaces_stripped() : 0;
  state->matcher = std::make_unique<structured::TokenMatcher>(req.constraint, spaces);
}

std::span<const uint64_t> Constraints::mask(const Request& req, const SampleState& state) {
  const auto start = std::chrono::steady_clock::now();
  const structured::CompiledConstraint::Mask allowed = state.matcher->allowed();
  std::vector<uint64_t> mask((static_cast<size_t>(vocab_size_) + 63) / 64, 0);
  std::copy_n(allowed->begin(), std::min(mask.size(), allowed->size()), mask.begin());
  // Stop tokens end the text: allowed once it is complete, refused before
  // (also when a stop id is an ordinary piece of text in the vocabulary).
  const bool can_end = state.matcher->can_end();
  for (int32_t id : req.stop_ids) {
    if (id < 0 || id >= vocab_size_) continue;
    const uint64_t bit = uint64_t{1} << (id & 63);
    uint64_t& word = mask[static_cast<size_t>(id) >> 6];
    word = can_end ? (word | bit) : (word & ~bit);
  }
  masks_.push_back(std::move(mask));
  ++num_constrained_draws_;
  mask_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return masks_.back();  // moving the outer vector keeps this buffer
}

}  // namespace pvllm
