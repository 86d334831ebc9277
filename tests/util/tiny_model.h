// Tiny random-weight models, written by the tests themselves in every
// format pvllm loads, with a tokenizer trained on the spot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_config.h"
#include "core/base/tensor.h"

namespace pvllm::testing {

struct TinyModelSpec {
  int32_t hidden_size = 32;
  int32_t intermediate_size = 48;
  int32_t num_layers = 2;
  int32_t num_heads = 4;
  int32_t num_kv_heads = 2;
  int32_t max_position_embeddings = 256;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  DType dtype = DType::kF32;
  bool tie_word_embeddings = true;
  uint64_t seed = 1;
  // vocab_size is the tiny tokenizer's (tiny_tokenizer_vocab_size()).
};

// A fresh empty folder under the system temp dir.
std::string make_temp_dir(const std::string& prefix);

// A sentencepiece tokenizer.model with byte fallback trained on a small
// built-in English corpus; trained once per process, returns its path.
std::string tiny_tokenizer_path();
int32_t tiny_tokenizer_vocab_size();

// Writes config.json, model.safetensors (or, with num_shards > 1, shards
// plus model.safetensors.index.json) and tokenizer.model into `dir`;
// returns dir. Weights are random (normal, std 0.2) from spec.seed.
std::string write_tiny_hf_model(const std::string& dir, const TinyModelSpec& spec,
                                int num_shards = 1);

// Writes a llama2.c checkpoint (f32 only; spec.dtype ignored) as
// dir/model.bin with tokenizer.model beside it; returns the .bin path.
// The same seed gives the same weights as write_tiny_hf_model, with q/k rows
// permuted between the two RoPE conventions, so both files are one model.
std::string write_tiny_llama2c_model(const std::string& dir, const TinyModelSpec& spec);

}  // namespace pvllm::testing
