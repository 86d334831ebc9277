// A plain dense forward pass in double precision, written from the
// transformers modeling code of Llama, Mistral, Qwen2 and Qwen3 and
// nothing of pvllm's kernels: q/k/v/o biases, per-head q/k RMSNorm before
// RoPE, the sliding-window mask (a query at p sees keys p - W + 1 .. p),
// RoPE default / linear / llama3 / dynamic (its frequencies from the length
// the sequence has at each step, as transformers' dynamic update does). It
// keeps its own unpaged K/V, so it is run step by step like a generation.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model.h"

namespace pvllm::testing {

class DenseReference {
 public:
  explicit DenseReference(const Model& model);
  // Runs `ids` at the next positions (a prefill chunk or one decode token)
  // and returns their logits, [ids.size(), vocab].
  std::vector<double> step(const std::vector<int32_t>& ids);
  int32_t length() const { return length_; }

 private:
  std::vector<double> inv_freq(int64_t seq_len) const;

  const Model& m_;
  int32_t length_ = 0;
  // Per layer, per position: [num_kv_heads * head_dim].
  std::vector<std::vector<std::vector<double>>> k_, v_;
};

}  // namespace pvllm::testing
