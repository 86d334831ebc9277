// The per-architecture tables of config.json keys.
#include "core/model/hf_arch.h"

#include <algorithm>
#include <set>

namespace pvllm {

namespace {

// Read by every architecture: sizes, norms, RoPE in both spellings
// (transformers v4: rope_theta + rope_scaling; v5: rope_parameters), the
// tied head, the special ids, and the two values checked to be the only
// ones implemented (hidden_act "silu", partial_rotary_factor 1).
std::vector<std::string> with_common(std::vector<std::string> extra) {
  std::vector<std::string> fields = {
      "hidden_size",          "intermediate_size", "num_hidden_layers", "num_attention_heads",
      "num_key_value_heads",  "head_dim",          "vocab_size",        "max_position_embeddings",
      "rms_norm_eps",         "rope_theta",        "rope_scaling",      "rope_parameters",
      "tie_word_embeddings",  "bos_token_id",      "eos_token_id",      "hidden_act",
      "partial_rotary_factor"};
  fields.insert(fields.end(), extra.begin(), extra.end());
  return fields;
}

std::vector<HfArch> make_archs() {
  std::vector<HfArch> archs;
  HfArch llama;
  llama.model_type = "llama";
  llama.class_name = "LlamaForCausalLM";
  // attention_bias: q/k/v/o biases; mlp_bias must be false; pretraining_tp
  // only slices the same matmuls (the math is unchanged).
  llama.fields = with_common({"attention_bias", "mlp_bias", "pretraining_tp"});
  llama.default_max_position_embeddings = 2048;
  archs.push_back(llama);

  HfArch mistral;
  mistral.model_type = "mistral";
  mistral.class_name = "MistralForCausalLM";
  mistral.fields = with_common({"sliding_window", "layer_types"});
  mistral.default_max_position_embeddings = 4096 * 32;
  mistral.default_num_kv_heads = 8;
  mistral.default_sliding_window = 4096;
  archs.push_back(mistral);

  HfArch qwen2;
  qwen2.model_type = "qwen2";
  qwen2.class_name = "Qwen2ForCausalLM";
  qwen2.fields =
      with_common({"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"});
  qwen2.default_max_position_embeddings = 32768;
  qwen2.default_num_kv_heads = 32;
  qwen2.default_sliding_window = 4096;
  qwen2.default_max_window_layers = 28;
  qwen2.always_qkv_bias = true;
  archs.push_back(qwen2);

  HfArch qwen3;
  qwen3.model_type = "qwen3";
  qwen3.class_name = "Qwen3ForCausalLM";
  qwen3.fields = with_common({"attention_bias", "use_sliding_window", "sliding_window",
                              "max_window_layers", "layer_types"});
  qwen3.default_max_position_embeddings = 32768;
  qwen3.default_num_kv_heads = 32;
  qwen3.default_head_dim = 128;
  qwen3.default_sliding_window = 4096;
  qwen3.default_max_window_layers = 28;
  qwen3.always_qk_norm = true;
  archs.push_back(qwen3);
  return archs;
}

}  // namespace

const std::vector<HfArch>& hf_archs() {
  static const std::vector<HfArch> archs = make_archs();
  return archs;
}

const HfArch* find_hf_arch(const std::string& name) {
  for (const HfArch& a : hf_archs()) {
    if (name == a.model_type || name == a.class_name) return &a;
  }
  return nullptr;
}

bool hf_arch_reads(const HfArch& arch, const std::string& key) {
  return std::find(arch.fields.begin(), arch.fields.end(), key) != arch.fields.end();
}

bool is_hf_metadata_key(const std::string& key) {
  static const std::set<std::string> keys = {
      // What the file is and who wrote it.
      "_name_or_path", "architectures", "model_type", "transformers_version",
      "_attn_implementation_autoset",
      // The checkpoint's dtype: pvllm reads each tensor's own dtype.
      "torch_dtype", "dtype",
      // Training only: initialisation, dropout, the KV-cache switch.
      "initializer_range", "attention_dropout", "use_cache",
      // Padding is never attended: pvllm batches without pad tokens.
      "pad_token_id",
      // Which outputs a transformers forward returns.
      "output_attentions", "output_hidden_states", "return_dict",
      // Sampling defaults older configs carry: the caller's sampling
      // params decide in pvllm.
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "temperature",
      "top_k", "top_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
      "num_return_sequences"};
  return keys.count(key) != 0;
}

}  // namespace pvllm
