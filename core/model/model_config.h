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

// RoPE scaling as transformers defines it (rope_scaling in v4 configs,
// rope_parameters in v5).
//  kLinear:  every frequency divided by factor.
//  kLlama3:  low frequencies divided by factor, high ones kept, blended
//            between (Llama 3.1+).
//  kDynamic: NTK-aware: once a sequence is longer than
//            original_max_position_embeddings, the base grows with its
//            length; the frequencies depend on the sequence's length, so
//            backends ask rope_inv_freq per sequence (rope_depends_on_length).
struct RopeScaling {
  enum class Type : uint8_t { kNone = 0, kLinear = 1, kLlama3 = 2, kDynamic = 3 };
  Type type = Type::kNone;
  float factor = 1.0f;                              // linear, llama3, dynamic
  float low_freq_factor = 1.0f;                     // llama3
  float high_freq_factor = 4.0f;                    // llama3
  int32_t original_max_position_embeddings = 8192;  // llama3, dynamic
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
  // Per-frequency divisors of the inverse frequencies, head_dim / 2 of them,
  // applied after rope_scaling: a GGUF file's rope_freqs tensor (how
  // llama.cpp's converter stores Llama 3.1's scaling). Empty: none.
  std::vector<float> rope_freq_factors;
  RopeStyle rope_style = RopeStyle::kRotateHalf;
  bool tie_word_embeddings = false;
  // Bias vectors on the q, k and v projections (Qwen2 always; Llama's
  // attention_bias also puts one on o_proj: o_bias).
  bool qkv_bias = false;
  bool o_bias = false;
  // Per-head RMSNorm of q and k before RoPE (Qwen3), weights [head_dim].
  bool qk_norm = false;
  // Sliding-window attention (Mistral): a query at position p attends to the
  // keys at positions p - sliding_window + 1 .. p. 0: full attention.
  int32_t sliding_window = 0;
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
// `seq_len` is the length of the sequence the frequencies are for (the
// highest position in this step + 1); only dynamic scaling reads it.
std::vector<float> rope_inv_freq(const ModelConfig& config, int64_t seq_len = 0);

// The longest context the config supports: max_position_embeddings, times
// the factor for linear and dynamic scaling (which stretch the original
// context; llama3 configs already state the stretched length).
int64_t max_context_length(const ModelConfig& config);

// FLOPs of one token's forward pass through the weights (two per weight:
// the projections, the MLP and the classifier; attention over the context
// not counted). For cost estimates.
double weight_flops_per_token(const ModelConfig& config);

// True when rope_inv_freq depends on seq_len (dynamic scaling past the
// original context), so a backend computes the table per sequence.
bool rope_depends_on_length(const ModelConfig& config);

}  // namespace pvllm
