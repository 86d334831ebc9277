// The post-processors of tokenizer.json.
#include "core/tokenizer/post_processor.h"

namespace pvllm {
namespace {

using namespace tokenizer_json;

// The ids of SpecialToken `name` in the template's special_tokens table.
Status special_ids(const json& config, const std::string& path, const std::string& name,
                   std::vector<int32_t>* out) {
  const std::string where = field_path(field_path(path, "special_tokens"), name);
  const auto table = config.find("special_tokens");
  if (table == config.end() || !table->is_object() || !table->contains(name)) {
    return malformed(where, "is missing");
  }
  const json* ids = nullptr;
  PVLLM_RETURN_IF_ERROR(read_array((*table)[name], where, "ids", &ids));
  for (const json& id : *ids) {
    if (!id.is_number_integer()) return malformed(field_path(where, "ids"), "holds a non-integer");
    out->push_back(id.get<int32_t>());
  }
  return Status::Ok();
}

Status parse_template(const json& config, const std::string& path, PostProcessor* out) {
  const json* single = nullptr;
  PVLLM_RETURN_IF_ERROR(read_array(config, path, "single", &single));
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    const std::string where = index_path(field_path(path, "single"), i);
    if (item.contains("Sequence")) {
      std::string id;
      PVLLM_RETURN_IF_ERROR(
          read_string(item["Sequence"], field_path(where, "Sequence"), "id", &id));
      if (id != "A" || seen_sequence) return unsupported(field_path(where, "Sequence"), item);
      seen_sequence = true;
    } else if (item.contains("SpecialToken")) {
      std::string name;
      PVLLM_RETURN_IF_ERROR(
          read_string(item["SpecialToken"], field_path(where, "SpecialToken"), "id", &name));
      PVLLM_RETURN_IF_ERROR(
          special_ids(config, path, name, seen_sequence ? &out->suffix : &out->prefix));
    } else {
      return unsupported(where, item);
    }
  }
  if (!seen_sequence) return malformed(field_path(path, "single"), "has no Sequence A");
  return Status::Ok();
}

// RobertaProcessing / BertProcessing: "cls": [token, id], "sep": [token, id].
Status parse_cls_sep(const json& config, const std::string& path, PostProcessor* out) {
  for (const char* key : {"cls", "sep"}) {
    const auto it = config.find(key);
    if (it == config.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
      return malformed(field_path(path, key), "is not a [token, id] pair");
    }
    (std::string(key) == "cls" ? out->prefix : out->suffix).push_back((*it)[1].get<int32_t>());
  }
  return Status::Ok();
}

}  // namespace

Status parse_post_processor(const json& config, const std::string& path, PostProcessor* out) {
  *out = PostProcessor();
  if (config.is_null()) return Status::Ok();
  if (!config.is_object()) return malformed(path, "is not an object");
  std::string type;
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "type", &type));
  if (type == "ByteLevel") return Status::Ok();
  if (type == "TemplateProcessing") return parse_template(config, path, out);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    return parse_cls_sep(config, path, out);
  }
  if (type == "Sequence") {
    const json* items = nullptr;
    PVLLM_RETURN_IF_ERROR(read_array(config, path, "processors", &items));
    for (size_t i = 0; i < items->size(); ++i) {
      PostProcessor inner;
      PVLLM_RETURN_IF_ERROR(
          parse_post_processor((*items)[i], index_path(field_path(path, "processors"), i), &inner));
      // A later processor wraps what the earlier ones produced.
      out->prefix.insert(out->prefix.begin(), inner.prefix.begin(), inner.prefix.end());
      out->suffix.insert(out->suffix.end(), inner.suffix.begin(), inner.suffix.end());
    }
    return Status::Ok();
  }
  return unsupported(field_path(path, "type"), type);
}

}  // namespace pvllm
