// The Hugging Face architectures pvllm runs, and the config.json keys each
// one reads: the one table the config parser classifies every key against.
// A key is honoured (parsed into ModelConfig, or checked to hold the one
// value pvllm implements), metadata that does not change the math (shared
// by all architectures), or refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pvllm {

struct HfArch {
  const char* model_type;  // config.json "model_type", also ModelConfig::architecture
  const char* class_name;  // config.json "architectures" entry
  // The keys this architecture reads, beyond the shared metadata keys.
  std::vector<std::string> fields;
  // transformers' defaults for keys a config may leave out.
  int32_t default_max_position_embeddings = 2048;
  int32_t default_num_kv_heads = 0;    // 0: num_attention_heads
  int32_t default_head_dim = 0;        // 0: hidden_size / num_attention_heads
  int32_t default_sliding_window = 0;  // 0: none
  int32_t default_max_window_layers = 0;
  // Fixed by the architecture, whatever the config says.
  bool always_qkv_bias = false;  // Qwen2: q/k/v projections carry a bias
  bool always_qk_norm = false;   // Qwen3: per-head RMSNorm of q and k
};

// Every supported architecture, in a stable order.
const std::vector<HfArch>& hf_archs();

// The architecture whose model_type or class name is `name`; nullptr if none.
const HfArch* find_hf_arch(const std::string& name);

// Whether `key` is one of the keys any config may carry that do not change
// the forward pass (names, versions, dtype hints, training-only settings,
// the sampling defaults of old configs, which pvllm takes from the caller).
bool is_hf_metadata_key(const std::string& key);

// Whether the architecture reads `key` (arch.fields).
bool hf_arch_reads(const HfArch& arch, const std::string& key);

}  // namespace pvllm
