// RoPE in a Hugging Face config: transformers v4 writes rope_theta and
// rope_scaling ({"rope_type" or "type", "factor", ...}); v5 writes
// rope_parameters ({"rope_type", "rope_theta", "factor", ...}). Types
// default, linear, llama3 and dynamic are honoured; any other type, or a key
// a type does not read, is refused.
#include <algorithm>
#include <cmath>

#include "core/model/hf_config.h"
#include "core/model/json_file.h"

namespace pvllm {

namespace {

using nlohmann::json;

struct RopeSpec {
  float theta = 0.0f;  // 0: not given here
  RopeScaling scaling;
};

// The keys each rope type reads, besides the type itself.
std::vector<std::string> keys_of(RopeScaling::Type type) {
  switch (type) {
    case RopeScaling::Type::kNone:
      return {};
    case RopeScaling::Type::kLinear:
      return {"factor"};
    case RopeScaling::Type::kDynamic:
      return {"factor", "original_max_position_embeddings"};
    case RopeScaling::Type::kLlama3:
      return {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
  }
  return {};
}

Status parse_object(const json& o, const char* field, const std::string& path,
                    const std::string& arch, const ModelConfig& base, RopeSpec* out) {
  if (!o.is_object()) return CorruptModel(path + ": " + field + " is not an object");
  const std::string where = path + " " + field;
  // Newer files write "rope_type", older ones "type"; both must agree.
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    if (!o.contains(k)) continue;
    if (!o[k].is_string()) return CorruptModel(where + ": " + k + " is not a string");
    if (!type.empty() && type != o[k].get<std::string>()) {
      return unsupported_field(path, std::string(field), o, arch, " (type and rope_type differ)");
    }
    type = o[k].get<std::string>();
  }
  if (type.empty()) return CorruptModel(where + " has no rope_type");
  RopeScaling& s = out->scaling;
  if (type == "default") {
    s.type = RopeScaling::Type::kNone;
  } else if (type == "linear") {
    s.type = RopeScaling::Type::kLinear;
  } else if (type == "llama3") {
    s.type = RopeScaling::Type::kLlama3;
  } else if (type == "dynamic") {
    s.type = RopeScaling::Type::kDynamic;
  } else {
    return unsupported_field(path, std::string(field) + ".rope_type",
                             o[o.contains("rope_type") ? "rope_type" : "type"], arch,
                             " (default, linear, llama3 and dynamic are)");
  }
  const std::vector<std::string> keys = keys_of(s.type);
  const bool v5 = std::string(field) == "rope_parameters";
  for (const auto& [key, value] : o.items()) {
    if (key == "rope_type" || key == "type") continue;
    if (v5 && key == "rope_theta") continue;
    if (key == "partial_rotary_factor") {
      if (value.is_number() && value.get<double>() == 1.0) continue;
      return unsupported_field(path, std::string(field) + "." + key, value, arch,
                               " (only 1: RoPE over the whole head)");
    }
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return unsupported_field(path, std::string(field) + "." + key, value, arch,
                               " (rope type \"" + type + "\" does not read it)");
    }
  }
  if (v5) PVLLM_RETURN_IF_ERROR(json_float(o, where, "rope_theta", false, &out->theta));
  if (s.type == RopeScaling::Type::kNone) return Status::Ok();
  PVLLM_RETURN_IF_ERROR(json_float(o, where, "factor", true, &s.factor));
  if (s.type == RopeScaling::Type::kLlama3) {
    PVLLM_RETURN_IF_ERROR(json_float(o, where, "low_freq_factor", true, &s.low_freq_factor));
    PVLLM_RETURN_IF_ERROR(json_float(o, where, "high_freq_factor", true, &s.high_freq_factor));
    return json_int(o, where, "original_max_position_embeddings", true,
                    &s.original_max_position_embeddings);
  }
  if (s.type == RopeScaling::Type::kDynamic) {
    // transformers grows the base past the model's context unless the
    // scaling names the original context itself.
    s.original_max_position_embeddings = base.max_position_embeddings;
    return json_int(o, where, "original_max_position_embeddings", false,
                    &s.original_max_position_embeddings);
  }
  return Status::Ok();
}

bool same(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

}  // namespace

Status parse_hf_rope(const json& c, const std::string& path, const std::string& arch,
                     ModelConfig* out) {
  PVLLM_RETURN_IF_ERROR(json_float(c, path, "rope_theta", false, &out->rope_theta));
  RopeSpec v4, v5;
  if (config_has(c, "rope_scaling")) {
    PVLLM_RETURN_IF_ERROR(parse_object(c["rope_scaling"], "rope_scaling", path, arch, *out, &v4));
    out->rope_scaling = v4.scaling;
  }
  if (config_has(c, "rope_parameters")) {
    PVLLM_RETURN_IF_ERROR(
        parse_object(c["rope_parameters"], "rope_parameters", path, arch, *out, &v5));
    // A file with both spellings must say one thing.
    if (config_has(c, "rope_scaling") && !same(v4.scaling, v5.scaling)) {
      return unsupported_field(path, "rope_parameters", c["rope_parameters"], arch,
                               " (it disagrees with rope_scaling)");
    }
    if (v5.theta > 0.0f) {
      if (config_has(c, "rope_theta") && c["rope_theta"].get<float>() != v5.theta) {
        return unsupported_field(path, "rope_parameters", c["rope_parameters"], arch,
                                 " (its rope_theta disagrees with rope_theta)");
      }
      out->rope_theta = v5.theta;
    }
    out->rope_scaling = v5.scaling;
  }
  return Status::Ok();
}

}  // namespace pvllm
