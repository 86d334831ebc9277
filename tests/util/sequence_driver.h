// Drives a backend over one sequence as the engine would — block ids
// handed out in order, chunk after chunk — without the engine, so a test
// chooses the chunks (a whole-prompt prefill, then one token per step, as
// transformers' generate runs).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/backend/backend.h"

namespace pvllm::testing {

class SequenceDriver {
 public:
  SequenceDriver(Backend* backend, int32_t vocab_size) : backend_(backend), vocab_(vocab_size) {}
  // Feeds `ids` at the next positions; *logits gets [ids.size(), vocab].
  // `edit`, when set, may change the metadata before the forward.
  Status step(const std::vector<int32_t>& ids, std::vector<float>* logits,
              const std::function<void(BatchMetadata*)>& edit = nullptr);
  int32_t length() const { return length_; }

 private:
  Backend* backend_;
  int32_t vocab_;
  int32_t length_ = 0;
  std::vector<int32_t> blocks_;
};

// The id of the largest value (the first of equals).
int32_t argmax(const float* values, int32_t n);

}  // namespace pvllm::testing
