// config.json edits pvllm must refuse, each with the field and value the
// refusal has to name: shared by the loader test and the C ABI test.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pvllm::testing {

struct RefusedField {
  const char* name;    // the test case
  const char* tiny;    // tiny_arch_spec name to start from
  nlohmann::json set;  // keys to set (null erases)
  std::string field;   // the message names `field "<field>"`
  std::string value;   // ... `= <value>`
};

inline std::vector<RefusedField> refused_fields() {
  using nlohmann::json;
  return {
      {"HiddenActGelu", "llama2", {{"hidden_act", "gelu"}}, "hidden_act", "\"gelu\""},
      {"MlpBias", "llama2", {{"mlp_bias", true}}, "mlp_bias", "true"},
      {"RopeYarn",
       "llama2",
       {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}},
       "rope_scaling.rope_type",
       "\"yarn\""},
      {"RopeLongrope",
       "llama2",
       {{"rope_scaling", {{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {2.0}}}}},
       "rope_scaling.rope_type",
       "\"longrope\""},
      {"RopeParametersYarnV5",
       "llama3-v5",
       {{"rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}}}},
       "rope_parameters.rope_type",
       "\"yarn\""},
      {"RopeLinearUnknownKey",
       "llama-linear",
       {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}, {"attention_factor", 0.5}}}},
       "rope_scaling.attention_factor",
       "0.5"},
      {"RopeDynamicLlama3Key",
       "llama-dynamic",
       {{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}, {"low_freq_factor", 1.0}}}},
       "rope_scaling.low_freq_factor",
       "1.0"},
      {"PartialRotary", "llama2", {{"partial_rotary_factor", 0.5}}, "partial_rotary_factor", "0.5"},
      {"QuantizationConfig",
       "llama2",
       {{"quantization_config", {{"quant_method", "gptq"}, {"bits", 4}}}},
       "quantization_config",
       "{\"bits\":4,\"quant_method\":\"gptq\"}"},
      {"UnknownField", "llama2", {{"my_new_field", 3}}, "my_new_field", "3"},
      {"AutoMap",
       "qwen2",
       {{"auto_map", {{"AutoModel", "x.Y"}}}},
       "auto_map",
       "{\"AutoModel\":\"x.Y\"}"},
      {"LlamaLayerTypes",
       "llama2",
       {{"layer_types", {"full_attention", "full_attention"}}},
       "layer_types",
       "[\"full_attention\",\"full_attention\"]"},
      {"Qwen2AttentionBias", "qwen2", {{"attention_bias", true}}, "attention_bias", "true"},
      {"Qwen2SlidingSomeLayers",
       "qwen2",
       {{"use_sliding_window", true}, {"sliding_window", 8}, {"max_window_layers", 1}},
       "max_window_layers",
       "1"},
      {"Qwen3MixedLayerTypes",
       "qwen3",
       {{"use_sliding_window", true},
        {"sliding_window", 8},
        {"max_window_layers", 0},
        {"layer_types", {"full_attention", "sliding_attention"}}},
       "layer_types",
       "[\"full_attention\",\"sliding_attention\"]"},
      {"MistralLayerTypesDisagree",
       "mistral",
       {{"layer_types", {"full_attention", "full_attention"}}},
       "layer_types",
       "[\"full_attention\",\"full_attention\"]"},
      {"MistralZeroWindow", "mistral", {{"sliding_window", 0}}, "sliding_window", "0"},
      {"MistralAttentionBias", "mistral", {{"attention_bias", true}}, "attention_bias", "true"},
      {"OtherArchitecture",
       "llama2",
       {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}},
       "architectures",
       "[\"GPT2LMHeadModel\"]"},
      {"ModelTypeDisagrees", "llama2", {{"model_type", "qwen2"}}, "model_type", "\"qwen2\""},
  };
}

}  // namespace pvllm::testing
