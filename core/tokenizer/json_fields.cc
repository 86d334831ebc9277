// Field readers for tokenizer.json with path-naming errors.
#include "core/tokenizer/json_fields.h"

namespace pvllm::tokenizer_json {

std::string field_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string index_path(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

Status malformed(const std::string& path, const std::string& what) {
  return Status(StatusCode::kTokenizerError, "tokenizer.json: " + path + " " + what);
}

Status unsupported(const std::string& path, const json& value) {
  return Unsupported("tokenizer.json: " + path + " = " + value.dump() +
                     " is not supported by this tokenizer");
}

Status read_string(const json& obj, const std::string& path, const char* key, std::string* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return malformed(field_path(path, key), "is missing or not a string");
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

Status read_bool(const json& obj, const std::string& path, const char* key, bool fallback,
                 bool* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    *out = fallback;
    return Status::Ok();
  }
  if (!it->is_boolean()) return malformed(field_path(path, key), "is not a boolean");
  *out = it->get<bool>();
  return Status::Ok();
}

Status read_int(const json& obj, const std::string& path, const char* key, int64_t fallback,
                int64_t* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    *out = fallback;
    return Status::Ok();
  }
  if (!it->is_number_integer()) return malformed(field_path(path, key), "is not an integer");
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status read_array(const json& obj, const std::string& path, const char* key, const json** out) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) {
    return malformed(field_path(path, key), "is missing or not an array");
  }
  *out = &*it;
  return Status::Ok();
}

Status require_one_of(const json& obj, const std::string& path, const char* key,
                      std::initializer_list<json> accepted) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  for (const json& value : accepted) {
    if (*it == value) return Status::Ok();
  }
  return unsupported(field_path(path, key), *it);
}

Status read_pattern(const json& obj, const std::string& path, std::string* pattern,
                    bool* is_regex) {
  const std::string where = field_path(path, "pattern");
  const auto it = obj.find("pattern");
  if (it == obj.end() || !it->is_object()) return malformed(where, "is missing or not an object");
  if (it->contains("String")) {
    *is_regex = false;
    return read_string(*it, where, "String", pattern);
  }
  if (it->contains("Regex")) {
    *is_regex = true;
    return read_string(*it, where, "Regex", pattern);
  }
  return unsupported(where, *it);
}

}  // namespace pvllm::tokenizer_json
