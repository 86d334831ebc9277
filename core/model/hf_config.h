// The ModelConfig of a Hugging Face folder. Every key of config.json is
// classified against its architecture's table (core/model/hf_arch.h): a key
// pvllm does not implement, or a value outside what it implements, is
// Unsupported with a message naming the file, the field and its value —
// never silently ignored. generation_config.json, when present, adds its
// end-of-sequence ids.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/base/status.h"
#include "core/model/model_config.h"

namespace pvllm {

// Reads dir/config.json and, if present, dir/generation_config.json.
Status read_hf_config(const std::string& dir, ModelConfig* out);

// Whether config.json sets `key` (present and not null).
bool config_has(const nlohmann::json& config, const char* key);

// The parts, for tests: `path` names the file in messages.
Status parse_hf_config(const nlohmann::json& config, const std::string& path, ModelConfig* out);
// Adds generation_config.json's eos ids as stop ids; with `replace_eos`
// (config.json named none) its first becomes eos_token_id.
Status apply_hf_generation_config(const nlohmann::json& generation, const std::string& path,
                                  bool replace_eos, ModelConfig* config);

// RoPE from either spelling (rope_theta + rope_scaling, or rope_parameters)
// into config->rope_theta and config->rope_scaling; needs
// config->max_position_embeddings and config->rope_theta (the default) set.
Status parse_hf_rope(const nlohmann::json& config, const std::string& path, const std::string& arch,
                     ModelConfig* out);

// The message every refusal carries:
//   <path>: field "<field>" = <value> is not supported for <arch><why>
Status unsupported_field(const std::string& path, const std::string& field,
                         const nlohmann::json& value, const std::string& arch,
                         const std::string& why = "");

}  // namespace pvllm
