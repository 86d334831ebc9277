// Reading tokenizer.json: every field is read through these helpers, so a
// missing field is a TokenizerError and a value this build does not
// implement is Unsupported, both naming the field by its path
// ("pre_tokenizer.pretokenizers[1].behavior").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/base/status.h"

namespace pvllm::tokenizer_json {

using nlohmann::json;

// `path` + "." + key, or key alone at the top level.
std::string field_path(const std::string& path, const std::string& key);
// `path` + "[i]".
std::string index_path(const std::string& path, size_t i);

// The file is malformed at `path`.
Status malformed(const std::string& path, const std::string& what);
// `path` holds `value`, which this build does not implement.
Status unsupported(const std::string& path, const json& value);

// obj[key] as a string; missing or not a string is malformed.
Status read_string(const json& obj, const std::string& path, const char* key, std::string* out);
// obj[key] as a bool; `fallback` when missing or null.
Status read_bool(const json& obj, const std::string& path, const char* key, bool fallback,
                 bool* out);
// obj[key] as an int; `fallback` when missing or null.
Status read_int(const json& obj, const std::string& path, const char* key, int64_t fallback,
                int64_t* out);
// obj[key] as an array (missing is malformed).
Status read_array(const json& obj, const std::string& path, const char* key, const json** out);

// Refuses obj[key] unless it is missing, null, or one of `accepted`.
Status require_one_of(const json& obj, const std::string& path, const char* key,
                      std::initializer_list<json> accepted);

// A {"String": s} or {"Regex": r} pattern: *is_regex tells which.
Status read_pattern(const json& obj, const std::string& path, std::string* pattern, bool* is_regex);

}  // namespace pvllm::tokenizer_json
