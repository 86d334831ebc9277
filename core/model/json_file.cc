#include "core/model/json_file.h"

#include <memory>

#include "core/base/mapped_file.h"

namespace pvllm {

using nlohmann::json;

Status read_json_file(const std::string& path, json* out) {
  std::shared_ptr<MappedFile> file;
  PVLLM_RETURN_IF_ERROR(MappedFile::open(path, &file));
  const char* text = reinterpret_cast<const char*>(file->data());
  *out = json::parse(text, text + file->size(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded() || !out->is_object()) {
    return CorruptModel(path + ": not a valid JSON object");
  }
  return Status::Ok();
}

Status json_int(const json& j, const std::string& where, const char* key, bool required,
                int32_t* out) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) return CorruptModel(where + ": missing " + key);
    return Status::Ok();
  }
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX) {
    return CorruptModel(where + ": " + key + " is not a 32-bit integer");
  }
  *out = v.get<int32_t>();
  return Status::Ok();
}

Status json_float(const json& j, const std::string& where, const char* key, bool required,
                  float* out) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) return CorruptModel(where + ": missing " + key);
    return Status::Ok();
  }
  if (!j[key].is_number()) return CorruptModel(where + ": " + key + " is not a number");
  *out = j[key].get<float>();
  return Status::Ok();
}

std::string json_value_text(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace pvllm
