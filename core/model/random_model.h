// Random-weight models of standard shapes, built in memory without any
// file: benchmarks measure the engine on a real model's sizes without
// downloading its checkpoint. Such a model has no tokenizer (prompts are
// token ids).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/model/model.h"

namespace pvllm {

// The shape names make_random_model accepts, in a stable order:
// "tiny", "tinyllama-1.1b", "llama-2-7b", "llama-3-8b".
const std::vector<std::string>& random_model_shapes();

// The ModelConfig of a named shape (Hugging Face conventions: rotate-half
// RoPE, untied embeddings). InvalidArgument listing the known shapes for
// an unknown name.
Status random_model_config(const std::string& shape, ModelConfig* out);

// What make_random_model would build — config, tensor table and weight
// bytes — without allocating any weight: for estimates and `inspect`.
Status inspect_random_model(const std::string& shape, DType dtype, ModelSummary* out);

// Builds the model with weights owned by the Model: matrices normal with
// std 0.02, norms 1. The same (shape, dtype, seed) gives the same bytes
// whatever the number of cores: each value depends only on the seed, the
// tensor and its index (a counter-based generator), and the tensors are
// filled in parallel chunks. dtype is kBF16 for benchmarks; kF32 and kF16
// also work.
Status make_random_model(const std::string& shape, DType dtype, uint64_t seed,
                         std::unique_ptr<Model>* out);

}  // namespace pvllm
