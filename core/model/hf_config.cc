// config.json (and generation_config.json) of a Hugging Face folder into a
// ModelConfig, every key classified by its architecture's table.
#include "core/model/hf_config.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/model/hf_arch.h"
#include "core/model/json_file.h"

namespace pvllm {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The architecture named by "architectures" and "model_type"; both, when
// present, must name the same one.
Status find_arch(const json& c, const std::string& path, const HfArch** out) {
  std::string known;
  for (const HfArch& a : hf_archs()) known += std::string(known.empty() ? "" : ", ") + a.class_name;
  const HfArch* arch = nullptr;
  if (config_has(c, "architectures")) {
    const json& list = c["architectures"];
    if (!list.is_array() || list.empty()) {
      return CorruptModel(path + ": architectures is not a non-empty list");
    }
    for (const json& name : list) {
      const HfArch* a = name.is_string() ? find_hf_arch(name.get<std::string>()) : nullptr;
      if (a == nullptr || (arch != nullptr && a != arch)) {
        return unsupported_field(path, "architectures", list, arch ? arch->model_type : "pvllm",
                                 " (supported: " + known + ")");
      }
      arch = a;
    }
  }
  if (config_has(c, "model_type")) {
    const json& type = c["model_type"];
    const HfArch* a = type.is_string() ? find_hf_arch(type.get<std::string>()) : nullptr;
    if (a == nullptr || (arch != nullptr && a != arch)) {
      return unsupported_field(path, "model_type", type, arch ? arch->model_type : "pvllm",
                               arch ? " (architectures names " + std::string(arch->class_name) + ")"
                                    : " (supported: llama, mistral, qwen2, qwen3)");
    }
    arch = a;
  }
  if (arch == nullptr) {
    return Unsupported(
        path + ": names no architecture (architectures or model_type; supported: " + known + ")");
  }
  *out = arch;
  return Status::Ok();
}

// A key whose only implemented value is `want` (absent is fine).
Status require_value(const json& c, const std::string& path, const HfArch& arch, const char* key,
                     const json& want, const std::string& why) {
  if (!c.contains(key) || c[key].is_null() || c[key] == want) return Status::Ok();
  return unsupported_field(path, key, c[key], arch.model_type, why);
}

Status read_bool(const json& c, const std::string& path, const char* key, bool* out) {
  if (!config_has(c, key)) return Status::Ok();
  if (!c[key].is_boolean()) return CorruptModel(path + ": " + key + " is not true or false");
  *out = c[key].get<bool>();
  return Status::Ok();
}

// Checks that stay true of every supported architecture: the MLP
// activation, biases on the MLP, partial rotary embeddings.
Status check_fixed_values(const json& c, const std::string& path, const HfArch& arch) {
  PVLLM_RETURN_IF_ERROR(
      require_value(c, path, arch, "hidden_act", "silu", " (only \"silu\": SwiGLU MLP)"));
  PVLLM_RETURN_IF_ERROR(
      require_value(c, path, arch, "mlp_bias", false, " (the MLP projections have no bias)"));
  if (config_has(c, "partial_rotary_factor") &&
      !(c["partial_rotary_factor"].is_number() &&
        c["partial_rotary_factor"].get<double>() == 1.0)) {
    return unsupported_field(path, "partial_rotary_factor", c["partial_rotary_factor"],
                             arch.model_type, " (only 1: RoPE over the whole head)");
  }
  if (config_has(c, "pretraining_tp") &&
      !(c["pretraining_tp"].is_number_integer() && c["pretraining_tp"].get<int64_t>() >= 1)) {
    return CorruptModel(path + ": pretraining_tp is not a positive integer");
  }
  return Status::Ok();
}

// Which layers attend through a window: "sliding_attention" or
// "full_attention" per layer, from layer_types when given, else as
// transformers derives them. pvllm runs one kind for every layer.
Status parse_sliding_window(const json& c, const std::string& path, const HfArch& arch,
                            ModelConfig* config) {
  if (!hf_arch_reads(arch, "sliding_window")) return Status::Ok();
  int32_t window = arch.default_sliding_window;
  if (c.contains("sliding_window")) {
    if (c["sliding_window"].is_null()) {
      window = 0;
    } else {
      PVLLM_RETURN_IF_ERROR(json_int(c, path, "sliding_window", false, &window));
      if (window <= 0) {
        return unsupported_field(path, "sliding_window", c["sliding_window"], arch.model_type,
                                 " (a window is a positive number of tokens, or null)");
      }
    }
  }
  int32_t max_window_layers = 0;
  if (hf_arch_reads(arch, "use_sliding_window")) {
    // Qwen2/Qwen3: the window applies only with use_sliding_window, and
    // then to the layers from max_window_layers on.
    bool use = false;
    PVLLM_RETURN_IF_ERROR(read_bool(c, path, "use_sliding_window", &use));
    if (!use) window = 0;
    max_window_layers = arch.default_max_window_layers;
    PVLLM_RETURN_IF_ERROR(json_int(c, path, "max_window_layers", false, &max_window_layers));
  }
  std::vector<std::string> types(config->num_layers);
  for (int32_t i = 0; i < config->num_layers; ++i) {
    types[i] = window > 0 && i >= max_window_layers ? "sliding_attention" : "full_attention";
  }
  const char* decided_by = "max_window_layers";
  if (config_has(c, "layer_types")) {
    // transformers reads the list as written; pvllm accepts it only when it
    // says what the window fields say, so the two cannot disagree.
    const json& lt = c["layer_types"];
    if (!lt.is_array() || lt.size() != types.size() || lt != json(types)) {
      return unsupported_field(path, "layer_types", lt, arch.model_type,
                               " (it must list, per layer, what sliding_window" +
                                   std::string(hf_arch_reads(arch, "use_sliding_window")
                                                   ? ", use_sliding_window and max_window_layers"
                                                   : "") +
                                   " imply: " + json_value_text(json(types)) + ")");
    }
    decided_by = "layer_types";
  }
  const auto sliding = std::count(types.begin(), types.end(), "sliding_attention");
  if (sliding == 0) {
    config->sliding_window = 0;
    return Status::Ok();
  }
  if (sliding != config->num_layers) {
    return unsupported_field(path, decided_by, c.contains(decided_by) ? c[decided_by] : json(),
                             arch.model_type,
                             " (it mixes full and sliding-window layers; pvllm runs one kind)");
  }
  config->sliding_window = window;
  return Status::Ok();
}

// Llama 3 lists several end tokens: the first is eos, the rest also stop.
Status add_eos_ids(const json& value, const std::string& path, bool replace_eos,
                   ModelConfig* config) {
  std::vector<int32_t> ids;
  if (value.is_number_integer()) {
    ids.push_back(value.get<int32_t>());
  } else if (value.is_array()) {
    for (const json& id : value) {
      if (!id.is_number_integer()) return CorruptModel(path + ": eos_token_id is malformed");
      ids.push_back(id.get<int32_t>());
    }
  } else if (!value.is_null()) {
    return CorruptModel(path + ": eos_token_id is not an integer or a list of integers");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 0 && replace_eos) {
      config->eos_token_id = ids[0];
      continue;
    }
    std::vector<int32_t>& extra = config->extra_stop_token_ids;
    if (ids[i] != config->eos_token_id &&
        std::find(extra.begin(), extra.end(), ids[i]) == extra.end()) {
      extra.push_back(ids[i]);
    }
  }
  return Status::Ok();
}

}  // namespace

bool config_has(const json& c, const char* key) { return c.contains(key) && !c[key].is_null(); }

Status unsupported_field(const std::string& path, const std::string& field, const json& value,
                         const std::string& arch, const std::string& why) {
  return Unsupported(path + ": field \"" + field + "\" = " + json_value_text(value) +
                     " is not supported for " + arch + why);
}

Status parse_hf_config(const json& c, const std::string& path, ModelConfig* out) {
  const HfArch* found = nullptr;
  PVLLM_RETURN_IF_ERROR(find_arch(c, path, &found));
  const HfArch& arch = *found;
  for (const auto& [key, value] : c.items()) {
    if (is_hf_metadata_key(key) || hf_arch_reads(arch, key)) continue;
    return unsupported_field(path, key, value, arch.model_type);
  }
  PVLLM_RETURN_IF_ERROR(check_fixed_values(c, path, arch));

  ModelConfig config;
  config.architecture = arch.model_type;
  PVLLM_RETURN_IF_ERROR(json_int(c, path, "hidden_size", true, &config.hidden_size));
  PVLLM_RETURN_IF_ERROR(json_int(c, path, "intermediate_size", true, &config.intermediate_size));
  PVLLM_RETURN_IF_ERROR(json_int(c, path, "num_hidden_layers", true, &config.num_layers));
  PVLLM_RETURN_IF_ERROR(json_int(c, path, "num_attention_heads", true, &config.num_heads));
  PVLLM_RETURN_IF_ERROR(json_int(c, path, "vocab_size", true, &config.vocab_size));
  if (config.num_heads <= 0) return CorruptModel(path + ": num_attention_heads must be positive");
  if (config.num_layers <= 0) return CorruptModel(path + ": num_hidden_layers must be positive");
  config.num_kv_heads =
      arch.default_num_kv_heads > 0 ? arch.default_num_kv_heads : config.num_heads;
  PVLLM_RETURN_IF_ERROR(json_int(c, path, "num_key_value_heads", false, &config.num_kv_heads));
  config.head_dim =
      arch.default_head_dim > 0 ? arch.default_head_dim : config.hidden_size / config.num_heads;
  PVLLM_RETURN_IF_ERROR(json_int(c, path, "head_dim", false, &config.head_dim));
  config.max_position_embeddings = arch.default_max_position_embeddings;
  PVLLM_RETURN_IF_ERROR(
      json_int(c, path, "max_position_embeddings", false, &config.max_position_embeddings));
  config.rms_norm_eps = 1e-6f;
  PVLLM_RETURN_IF_ERROR(json_float(c, path, "rms_norm_eps", false, &config.rms_norm_eps));
  config.rope_theta = 10000.0f;
  config.rope_style = RopeStyle::kRotateHalf;
  PVLLM_RETURN_IF_ERROR(parse_hf_rope(c, path, arch.model_type, &config));
  PVLLM_RETURN_IF_ERROR(read_bool(c, path, "tie_word_embeddings", &config.tie_word_embeddings));

  bool attention_bias = false;
  if (hf_arch_reads(arch, "attention_bias")) {
    PVLLM_RETURN_IF_ERROR(read_bool(c, path, "attention_bias", &attention_bias));
  }
  config.qkv_bias = arch.always_qkv_bias || attention_bias;
  config.o_bias = attention_bias;
  config.qk_norm = arch.always_qk_norm;
  PVLLM_RETURN_IF_ERROR(parse_sliding_window(c, path, arch, &config));

  PVLLM_RETURN_IF_ERROR(json_int(c, path, "bos_token_id", false, &config.bos_token_id));
  if (c.contains("eos_token_id")) {
    PVLLM_RETURN_IF_ERROR(add_eos_ids(c["eos_token_id"], path, true, &config));
  }
  Status valid = config.validate();
  if (!valid.ok()) return CorruptModel(path + ": " + valid.message());
  *out = std::move(config);
  return Status::Ok();
}

Status apply_hf_generation_config(const json& g, const std::string& path, bool replace_eos,
                                  ModelConfig* config) {
  if (!g.contains("eos_token_id")) return Status::Ok();
  PVLLM_RETURN_IF_ERROR(add_eos_ids(g["eos_token_id"], path, replace_eos, config));
  Status valid = config->validate();
  if (!valid.ok()) return CorruptModel(path + ": " + valid.message());
  return Status::Ok();
}

Status read_hf_config(const std::string& dir, ModelConfig* out) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  json config_json;
  PVLLM_RETURN_IF_ERROR(read_json_file(config_path, &config_json));
  ModelConfig config;
  PVLLM_RETURN_IF_ERROR(parse_hf_config(config_json, config_path, &config));
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  std::error_code ec;
  if (fs::is_regular_file(gen_path, ec)) {
    json gen;
    PVLLM_RETURN_IF_ERROR(read_json_file(gen_path, &gen));
    PVLLM_RETURN_IF_ERROR(apply_hf_generation_config(
        gen, gen_path, !config_has(config_json, "eos_token_id"), &config));
  }
  *out = std::move(config);
  return Status::Ok();
}

}  // namespace pvllm
