// Tiny random-weight models, written by the tests themselves in every
// format pvllm loads, with a tokenizer trained on the spot.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "core/model/model_config.h"

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
  // 0: the tiny tokenizer's (tiny_tokenizer_vocab_size()); set it to serve
  // a real tokenizer's vocabulary instead (HF writer only).
  int32_t vocab_size = 0;

  // The Hugging Face architecture whose config and tensor names are
  // written: "llama", "mistral", "qwen2" (q/k/v biases always) or "qwen3"
  // (q_norm/k_norm always). The llama2.c writer takes only "llama" without
  // the extras below.
  std::string arch = "llama";
  int32_t head_dim = 0;                     // 0: hidden_size / num_heads
  bool attention_bias = false;              // llama, qwen3: biases on q, k, v and o
  int32_t sliding_window = 0;               // mistral: the window (0 writes null)
  std::vector<int32_t> eos_ids = {2};       // config.json eos_token_id (a list when > 1)
  std::vector<int32_t> generation_eos_ids;  // generation_config.json's; none written if empty
  bool v5_config = false;                   // transformers v5 spelling: rope_parameters, dtype
};

// Named tiny models, one per architecture variant pvllm honours, all
// float32: "llama2", "llama3" (GQA, llama3 RoPE, several EOS ids),
// "llama3-v5" (the same model in the v5 config spelling), "llama-linear",
// "llama-dynamic" (max_position_embeddings 16, so 20+ token prompts grow
// the base), "llama-bias", "mistral" (sliding window 8), "qwen2" (q/k/v
// bias, tied embeddings), "qwen3" (q/k norm, head_dim != hidden / heads).
const std::vector<std::string>& tiny_arch_names();
// The spec of a name above; throws std::invalid_argument for another.
TinyModelSpec tiny_arch_spec(const std::string& name);

// Sets keys of dir/config.json to the values of `set` (null erases a key).
void edit_hf_config(const std::string& dir, const nlohmann::json& set);

// The vocabulary size a spec writes.
int32_t tiny_vocab_size(const TinyModelSpec& spec);

// The head size a spec writes.
int32_t tiny_head_dim(const TinyModelSpec& spec);

// A fresh empty folder under the system temp dir.
// A new empty folder under the temp directory, named prefix + 6 random
// characters; removed with its content when the process exits normally.
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
