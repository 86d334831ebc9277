// The hyperparameters of a Llama-architecture decoder, whatever format the
// checkpoint came in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pvllm {

// How RoPE pairs the dimensions of a head.
//  kInterleaved: pairs (2i, 2i+1)        — Meta / llama2.c checkpoints.
//  kRotateHalf:  pairs (i, i + head_dim/2) — Hugging Face checkpoints.
enum class RopeStyle : uint8_t { kInterleaved = 0, kRotateHalf = 1 };

struct RopeScaling {
  enum class Type : uint8_t { kNone = 0, kLinear = 1, kLlama3 = 2 };
  Type type = Type::kNone;
  float factor = 1.0f;                              // linear and llama3
  float low_freq_factor = 1.0f;                     // llama3
  float high_freq_factor = 4.0f;                    // llama3
  int32_t original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  std::string architecture = "llama";
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // hidden_size / num_heads unless the config says otherwise
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  RopeStyle rope_style = RopeStyle::kRotateHalf;
  bool tie_word_embeddings = false;
  int32_t bos_token_id = 1;
  int32_t eos_token_id = 2;
  // Tokens that end generation by default besides eos (llama2.c checkpoints
  // end a story with BOS).
  std::vector<int32_t> extra_stop_token_ids;

  // Checks internal consistency (positive sizes, heads divide, ...).
  Status validate() const;
};

// RoPE inverse frequencies for one head, head_dim / 2 values, with the
// config's scaling applied. Shared by every backend so they agree exactly.
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace pvllm
