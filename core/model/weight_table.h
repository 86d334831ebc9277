// The tensors a checkpoint offers, by name, and how a Llama-family model's
// weights are taken from them: every tensor the config asks for with its
// shape, and none left over (a tensor nothing reads is refused, never
// silently ignored). Shared by the safetensors and .pvllm loaders.
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/model/model.h"

namespace pvllm {

struct WeightTable {
  struct Entry {
    Tensor tensor;
    std::string file;  // named in errors
  };
  std::map<std::string, Entry> by_name;
  std::string source;  // the file named when a tensor is missing
  mutable std::set<std::string> taken;
};

// Fills w from the table: row-major tensors under their Hugging Face names,
// or, when `packed`, the projections in the panel layout (q, k and v as
// self_attn.qkv_proj.weight, gate and up as mlp.gate_up_proj.weight, o_proj,
// down_proj and lm_head.weight) into w->packed and w->packed_lm_head.
Status take_weights(const WeightTable& t, const ModelConfig& c, bool packed, ModelWeights* w);

// Checks that every tensor was taken: UNSUPPORTED naming the first one
// nothing reads.
Status check_all_taken(const WeightTable& t, const ModelConfig& c);

}  // namespace pvllm
