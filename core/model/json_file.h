// Reading the JSON files of a Hugging Face folder (config.json,
// generation_config.json, the shard index) and typed fields of them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/base/status.h"

namespace pvllm {

// Parses `path` as one JSON object. NotFound / IoError from opening it,
// CorruptModel naming the file when it is not a JSON object.
Status read_json_file(const std::string& path, nlohmann::json* out);

// Field readers: absent (or null) keeps *out unless the field is required;
// a value of the wrong type is CorruptModel naming `where` and the key.
Status json_int(const nlohmann::json& j, const std::string& where, const char* key, bool required,
                int32_t* out);
Status json_float(const nlohmann::json& j, const std::string& where, const char* key, bool required,
                  float* out);

// A value as it reads in the file, cut to about 80 characters, for messages.
std::string json_value_text(const nlohmann::json& value);

}  // namespace pvllm
