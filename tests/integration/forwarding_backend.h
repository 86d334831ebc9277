// A Backend that hands every call to another one: the engine tests' wrapper
// backends (scripted draws, injected faults, hooks inside the forward pass,
// no masks) derive from it and override only the calls they change.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.h"

namespace pvllm::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string name() const override { return inner_->name(); }
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override {
    return inner_->forward_sample(md, rows, out);
  }
  Status forward(const BatchMetadata& md, float* logits) override {
    return inner_->forward(md, logits);
  }
  Status copy_blocks(const std::vector<BlockCopy>& copies) override {
    return inner_->copy_blocks(copies);
  }
  Status reserve_swap_space(int64_t bytes, int32_t* num_blocks) override {
    return inner_->reserve_swap_space(bytes, num_blocks);
  }
  Status swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection direction) override {
    return inner_->swap_blocks(copies, direction);
  }
  PreemptionCosts preemption_costs() const override { return inner_->preemption_costs(); }
  int32_t num_blocks() const override { return inner_->num_blocks(); }
  int32_t block_size() const override { return inner_->block_size(); }

 protected:
  Backend& inner() { return *inner_; }
  const Backend& inner() const { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace pvllm::testing
