#include "core/structured/json_schema_merge.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

namespace pvllm::structured {
namespace {

using Json = SchemaJson;

constexpr int kMaxFlattenDepth = 32;
constexpr size_t kMaxAlternatives = 64;

Status unsupported(const std::string& ptr, const std::string& what) {
  return Unsupported("json schema: unsupported keyword \"allOf\" (" + what + ") at " +
                     (ptr.empty() ? "the root" : ptr));
}

Status unsupported_in(const char* keyword, const std::string& ptr, const std::string& what) {
  return Unsupported("json schema: unsupported keyword \"" + std::string(keyword) + "\" (" + what +
                     ") at " + (ptr.empty() ? "the root" : ptr));
}

bool is_annotation(std::string_view key);

// The bound that refuses what `key` (a bound of `family`'s instances)
// accepts: minLength 3 -> maxLength 2, maximum 5 -> exclusiveMinimum 5.
// false when `key` is no such bound.
bool opposite_bound(const std::string& key, const Json& value, Json* type, Json* bound) {
  static const std::map<std::string, std::pair<const char*, const char*>, std::less<>> counts = {
      {"minLength", {"string", "maxLength"}},
      {"maxLength", {"string", "minLength"}},
      {"minItems", {"array", "maxItems"}},
      {"maxItems", {"array", "minItems"}},
      {"minProperties", {"object", "maxProperties"}},
      {"maxProperties", {"object", "minProperties"}}};
  static const std::map<std::string, const char*, std::less<>> numbers = {
      {"minimum", "exclusiveMaximum"},
      {"maximum", "exclusiveMinimum"},
      {"exclusiveMinimum", "maximum"},
      {"exclusiveMaximum", "minimum"}};
  if (auto it = counts.find(key); it != counts.end() && value.is_number()) {
    const double n = value.get<double>();
    if (!(n >= 0) || std::floor(n) != n) return false;
    const bool min = key.rfind("min", 0) == 0;
    *type = it->second.first;
    if (min && n == 0) {
      *bound = nullptr;  // every instance of the type has it: none refuses it
    } else {
      *bound = Json{{it->second.second, min ? n - 1 : n + 1}};
    }
    return true;
  }
  if (auto it = numbers.find(key); it != numbers.end() && value.is_number()) {
    *type = "number";
    *bound = Json{{it->second, value}};
    return true;
  }
  return false;
}

// Schemas whose union is exactly the instances `s` refuses. A schema's
// keywords all hold (a conjunction), so it fails where one keyword fails:
// `type` and `enum` / `const` through `not`; `required` (objects lacking
// one name); `properties` (objects with the member, its value refused by
// its schema, recursively); length, count and numeric bounds (instances of
// their type past the opposite bound); `allOf` (one part refused);
// `anyOf` (every alternative refused); `not` (its schema); `$ref` (its
// target). Other keywords: Unsupported, naming `keyword` (the "if" or
// "not" being read).
Status negate(const Json& s, const RefResolver& resolve, const char* keyword,
              const std::string& ptr, int depth, std::vector<Json>* out) {
  if (depth > kMaxFlattenDepth) return unsupported_in(keyword, ptr, "nested too deep");
  if (s.is_boolean()) {
    if (!s.get<bool>()) out->push_back(true);
    return Status::Ok();
  }
  if (!s.is_object()) {
    return InvalidArgument("json schema: \"" + std::string(keyword) + "\" at " + ptr +
                           " is not a schema");
  }
  const Json object = Json{{"type", "object"}};
  for (const auto& [key, value] : s.items()) {
    if (is_annotation(key)) continue;
    Json type, bound;
    if (key == "$ref" && value.is_string()) {
      const Json* target = nullptr;
      PVLLM_RETURN_IF_ERROR(resolve(value.get<std::string>(), &target));
      PVLLM_RETURN_IF_ERROR(negate(*target, resolve, keyword, ptr, depth + 1, out));
    } else if (key == "type") {
      out->push_back(Json{{"not", Json{{"type", value}}}});
    } else if (key == "enum" || key == "const") {
      out->push_back(Json{{"not", Json{{key, value}}}});
    } else if (key == "not") {
      out->push_back(value);
    } else if (key == "required" && value.is_array()) {
      for (const Json& name : value) {
        Json alt = object;
        alt["not"] = Json{{"required", Json::array({name})}};
        out->push_back(std::move(alt));
      }
    } else if (key == "properties" && value.is_object()) {
      for (const auto& [name, sub] : value.items()) {
        std::vector<Json> refused;
        PVLLM_RETURN_IF_ERROR(negate(sub, resolve, keyword, ptr, depth + 1, &refused));
        for (Json& r : refused) {
          Json alt = object;
          alt["required"] = Json::array({name});
          alt["properties"] = Json{{name, std::move(r)}};
          out->push_back(std::move(alt));
        }
      }
    } else if (opposite_bound(key, value, &type, &bound)) {
      if (bound.is_null()) continue;
      bound["type"] = type;
      out->push_back(std::move(bound));
    } else if (key == "allOf" && value.is_array()) {
      for (const Json& part : value) {
        PVLLM_RETURN_IF_ERROR(negate(part, resolve, keyword, ptr, depth + 1, out));
      }
    } else if (key == "anyOf" && value.is_array()) {
      // Every alternative refused: one part per alternative, each the
      // alternatives that refuse it (none: that alternative takes all).
      Json parts = Json::array();
      bool none = false;
      for (const Json& alt : value) {
        std::vector<Json> refused;
        PVLLM_RETURN_IF_ERROR(negate(alt, resolve, keyword, ptr, depth + 1, &refused));
        if (refused.empty()) none = true;
        parts.push_back(Json{{"anyOf", Json(std::move(refused))}});
      }
      if (!none && !parts.empty()) out->push_back(Json{{"allOf", std::move(parts)}});
    } else {
      return unsupported_in(keyword, ptr, "\"" + key + "\" in its schema");
    }
  }
  return Status::Ok();
}

// The forms of `not` merge_flat reads keyword by keyword: a boolean, {},
// one `type`, `enum` or `const`, `required` of one name.
bool direct_not(const Json& n) {
  if (!n.is_object()) return true;
  std::vector<std::string> keys;
  for (const auto& [key, value] : n.items()) {
    if (!is_annotation(key)) keys.push_back(key);
  }
  if (keys.empty()) return true;
  if (keys.size() > 1) return false;
  const std::string& k = keys[0];
  if (k == "type" || k == "enum" || k == "const") return true;
  return k == "required" && n[k].is_array() && n[k].size() == 1 && n[k][0].is_string();
}

// if / then / else as alternatives: (if and then) or (not if and else),
// "not if" spelled by negate. *out: {"anyOf": [...]}, or true where the
// part says nothing (no "if": then and else are ignored).
Status conditional(const Json& s, const RefResolver& resolve, const std::string& ptr, Json* out) {
  *out = true;
  if (!s.contains("if")) return Status::Ok();
  const Json& cond = s["if"];
  const Json then_part = s.contains("then") ? s["then"] : Json(true);
  const Json else_part = s.contains("else") ? s["else"] : Json(true);
  std::vector<Json> refused;
  PVLLM_RETURN_IF_ERROR(negate(cond, resolve, "if", ptr, 0, &refused));
  Json alts = Json::array({Json{{"allOf", Json::array({cond, then_part})}}});
  for (Json& r : refused) alts.push_back(Json{{"allOf", Json::array({std::move(r), else_part})}});
  *out = Json{{"anyOf", std::move(alts)}};
  return Status::Ok();
}

// Spreads $ref and nested allOf: the schema objects whose conjunction the
// parts are (if / then / else becoming a part of alternatives). false:
// some part is the schema false.
Status flatten(const Json& s, const RefResolver& resolve, const std::string& ptr, int depth,
               std::vector<Json>* out, bool* is_false, bool conditionals) {
  if (depth > kMaxFlattenDepth) return unsupported(ptr, "$ref or allOf nested too deep");
  if (s.is_boolean()) {
    if (!s.get<bool>()) *is_false = true;
    return Status::Ok();
  }
  if (!s.is_object()) {
    return InvalidArgument("json schema: an allOf part at " + ptr + " is not a schema");
  }
  Json rest = s;
  if (rest.contains("$ref")) {
    const Json& ref = rest["$ref"];
    if (!ref.is_string())
      return InvalidArgument("json schema: \"$ref\" at " + ptr + " is not a string");
    const Json* target = nullptr;
    PVLLM_RETURN_IF_ERROR(resolve(ref.get<std::string>(), &target));
    PVLLM_RETURN_IF_ERROR(flatten(*target, resolve, ptr, depth + 1, out, is_false, conditionals));
    rest.erase("$ref");
  }
  if (rest.contains("allOf")) {
    const Json& all = rest["allOf"];
    if (!all.is_array() || all.empty()) {
      return InvalidArgument("json schema: keyword \"allOf\" at " + ptr +
                             ": not a non-empty array");
    }
    for (const Json& part : all) {
      PVLLM_RETURN_IF_ERROR(flatten(part, resolve, ptr, depth + 1, out, is_false, conditionals));
    }
    rest.erase("allOf");
  }
  if (rest.contains("not")) {
    // The forms merge_flat reads keyword by keyword stay; others become
    // the alternatives that refuse their schema (negate).
    const Json* n = &rest["not"];
    if (n->is_object() && n->size() == 1 && n->contains("$ref") && (*n)["$ref"].is_string()) {
      PVLLM_RETURN_IF_ERROR(resolve((*n)["$ref"].get<std::string>(), &n));
    }
    if (!direct_not(*n)) {
      std::vector<Json> refused;
      PVLLM_RETURN_IF_ERROR(negate(*n, resolve, "not", ptr, depth + 1, &refused));
      rest.erase("not");
      if (refused.empty()) {
        *is_false = true;
        return Status::Ok();
      }
      out->push_back(Json{{"anyOf", Json(std::move(refused))}});
    }
  }
  if (rest.contains("if") || rest.contains("then") || rest.contains("else")) {
    Json cond = true;
    if (conditionals) PVLLM_RETURN_IF_ERROR(conditional(rest, resolve, ptr, &cond));
    for (const char* key : {"if", "then", "else"}) rest.erase(key);
    if (cond.is_object()) out->push_back(std::move(cond));
  }
  out->push_back(std::move(rest));
  return Status::Ok();
}

// Type names as a set, "integer" inside "number".
std::set<std::string> type_set(const Json& t) {
  std::set<std::string> out;
  if (t.is_string()) out.insert(t.get<std::string>());
  if (t.is_array()) {
    for (const auto& n : t) {
      if (n.is_string()) out.insert(n.get<std::string>());
    }
  }
  return out;
}

std::set<std::string> intersect_types(const std::set<std::string>& a,
                                      const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const auto& t : a) {
    if (b.count(t)) {
      out.insert(t);
    } else if (t == "integer" && b.count("number")) {
      out.insert("integer");
    } else if (t == "number" && b.count("integer")) {
      out.insert("integer");
    }
  }
  return out;
}

bool is_annotation(std::string_view key) {
  static const std::set<std::string, std::less<>> keys = {
      "title",     "description", "default", "examples", "$comment", "deprecated",  "readOnly",
      "writeOnly", "$schema",     "$id",     "id",       "$anchor",  "definitions", "$defs"};
  return keys.count(key) > 0;
}

Status unsupported_not(const std::string& ptr, const std::string& what) {
  return Unsupported("json schema: unsupported keyword \"not\" (" + what + ") at " +
                     (ptr.empty() ? "the root" : ptr));
}

// `not` of enum / const values on the merged schema `m`: an enum loses
// them; else a type whose every value is left out goes (null, both
// booleans), strings are left out by kNotStrings (json_schema.cc writes
// the strings but those), and values no grammar rule can leave out of a
// type it keeps (numbers, objects, arrays, one boolean beside other types)
// are Unsupported.
Status exclude_values(const std::vector<Json>& excluded, const std::string& ptr, Json* m,
                      bool* is_false) {
  if (m->contains("enum")) {
    Json kept = Json::array();
    for (const auto& v : (*m)["enum"]) {
      if (std::find(excluded.begin(), excluded.end(), v) == excluded.end()) kept.push_back(v);
    }
    (*m)["enum"] = kept;
    m->erase(kNotStrings);
    return Status::Ok();
  }
  std::set<std::string> types =
      m->contains("type")
          ? type_set((*m)["type"])
          : std::set<std::string>{"object", "array", "string", "number", "boolean", "null"};
  auto has = [&types](const char* t) { return types.count(t) > 0; };
  Json strings = Json::array();
  bool no_true = false, no_false = false;
  for (const Json& v : excluded) {
    if (v.is_null()) {
      types.erase("null");
    } else if (v.is_boolean()) {
      (v.get<bool>() ? no_true : no_false) = true;
    } else if (v.is_string()) {
      if (has("string") && std::find(strings.begin(), strings.end(), v) == strings.end()) {
        strings.push_back(v);
      }
    } else if (v.is_number()) {
      if (has("number") || has("integer")) return unsupported_not(ptr, "of a number");
    } else if (v.is_object() ? has("object") : has("array")) {
      return unsupported_not(ptr, v.is_object() ? "of an object" : "of an array");
    }
  }
  if (has("boolean") && (no_true || no_false)) {
    if (no_true && no_false) {
      types.erase("boolean");
    } else if (types.size() == 1) {
      (*m)["enum"] = Json::array({Json(no_false)});
    } else {
      return unsupported_not(ptr, "of one boolean beside other types");
    }
  }
  if (types.empty()) {
    *is_false = true;
    return Status::Ok();
  }
  (*m)["type"] = Json(std::vector<std::string>(types.begin(), types.end()));
  if (strings.empty()) {
    m->erase(kNotStrings);
  } else {
    (*m)[kNotStrings] = strings;
  }
  return Status::Ok();
}

// Whether `key` is a keyword of some draft (4 to 2020-12) that constrains
// instances. Others ("x-...", "javaType", "help") are annotations, which
// validators ignore: two parts may give them different values (the first
// is kept, and constrains nothing either way).
bool is_assertion(std::string_view key) {
  static const std::set<std::string, std::less<>> keys = {"type",
                                                          "enum",
                                                          "const",
                                                          "multipleOf",
                                                          "maximum",
                                                          "exclusiveMaximum",
                                                          "minimum",
                                                          "exclusiveMinimum",
                                                          "maxLength",
                                                          "minLength",
                                                          "pattern",
                                                          "format",
                                                          "items",
                                                          "additionalItems",
                                                          "prefixItems",
                                                          "maxItems",
                                                          "minItems",
                                                          "uniqueItems",
                                                          "contains",
                                                          "maxContains",
                                                          "minContains",
                                                          "maxProperties",
                                                          "minProperties",
                                                          "required",
                                                          "properties",
                                                          "patternProperties",
                                                          "additionalProperties",
                                                          "dependencies",
                                                          "dependentRequired",
                                                          "dependentSchemas",
                                                          "propertyNames",
                                                          "if",
                                                          "then",
                                                          "else",
                                                          "allOf",
                                                          "anyOf",
                                                          "oneOf",
                                                          "not",
                                                          "$ref",
                                                          "$dynamicRef",
                                                          "$recursiveRef",
                                                          "unevaluatedItems",
                                                          "unevaluatedProperties",
                                                          kNotStrings};
  return keys.count(key) > 0;
}

// Merges keyword by keyword `parts` (flattened, none with allOf or $ref,
// at most one with anyOf or oneOf spread already).
Status merge_flat(const std::vector<Json>& parts, const RefResolver& resolve,
                  const std::string& ptr, Json* out) {
  Json m = Json::object();
  // Properties: every part's schema for each name, in first-seen order.
  std::vector<std::string> names;
  std::map<std::string, Json> prop_parts;
  bool has_props = false;
  std::set<std::string> required;
  std::vector<std::string> required_order;
  // Lists of alternatives the parts still hold: one stays in place; more
  // are an allOf of them, spread when the result is merged again.
  std::vector<Json> alternatives;
  for (const Json& p : parts) {
    for (const auto& [key, value] : p.items()) {
      if (is_annotation(key) || key == "not" || key == kNotStrings) continue;
      if (key == "anyOf" || key == "oneOf") {  // not spread yet (a part's own alternatives)
        alternatives.push_back(Json{{key, value}});
        continue;
      }
      if (key == "type") {
        std::set<std::string> t = type_set(value);
        if (m.contains("type")) t = intersect_types(type_set(m["type"]), t);
        if (t.empty()) {
          *out = false;
          return Status::Ok();
        }
        m["type"] = Json(std::vector<std::string>(t.begin(), t.end()));
      } else if (key == "properties") {
        if (!value.is_object())
          return InvalidArgument("json schema: \"properties\" at " + ptr + " is not an object");
        has_props = true;
        for (const auto& [name, sub] : value.items()) {
          if (!prop_parts.count(name)) {
            names.push_back(name);
            prop_parts[name] = Json::array();
          }
          prop_parts[name].push_back(sub);
        }
      } else if (key == "required") {
        if (!value.is_array())
          return InvalidArgument("json schema: \"required\" at " + ptr + " is not an array");
        for (const auto& n : value) {
          if (n.is_string() && required.insert(n.get<std::string>()).second) {
            required_order.push_back(n.get<std::string>());
          }
        }
      } else if (key == "additionalProperties" || (key == "items" && value.is_object()) ||
                 key == "propertyNames" || (key == "additionalItems" && value.is_object())) {
        // Applies to the same members or items in each part: their
        // conjunction. (additionalProperties is settled below per name.)
        if (!m.contains(key)) {
          m[key] = value;
        } else if (m[key] != value) {
          m[key] = Json{{"allOf", Json::array({m[key], value})}};
        }
      } else if (key == "minItems" || key == "minLength" || key == "minProperties" ||
                 (key == "minimum" && value.is_number()) ||
                 (key == "exclusiveMinimum" && value.is_number())) {
        if (!value.is_number())
          return InvalidArgument("json schema: \"" + key + "\" at " + ptr + " is not a number");
        if (!m.contains(key) || value.get<double>() > m[key].get<double>()) m[key] = value;
      } else if (key == "maxItems" || key == "maxLength" || key == "maxProperties" ||
                 (key == "maximum" && value.is_number()) ||
                 (key == "exclusiveMaximum" && value.is_number())) {
        if (!value.is_number())
          return InvalidArgument("json schema: \"" + key + "\" at " + ptr + " is not a number");
        if (!m.contains(key) || value.get<double>() < m[key].get<double>()) m[key] = value;
      } else if (key == "enum" || key == "const") {
        Json values = key == "const" ? Json::array({value}) : value;
        if (!values.is_array())
          return InvalidArgument("json schema: \"enum\" at " + ptr + " is not an array");
        if (!m.contains("enum")) {
          m["enum"] = values;
        } else {
          Json kept = Json::array();
          for (const auto& v : m["enum"]) {
            if (std::find(values.begin(), values.end(), v) != values.end()) kept.push_back(v);
          }
          m["enum"] = kept;
        }
      } else if (!m.contains(key)) {
        m[key] = value;
      } else if (m[key] != value && is_assertion(key)) {
        return unsupported(ptr, "parts give \"" + key + "\" different values");
      }
    }
  }
  // not: the forms that say something keyword by keyword: nothing ({},
  // true), anything (false), types left out, one member left out, values
  // left out (`excluded`, settled below).
  std::vector<Json> excluded;
  for (const Json& p : parts) {
    if (p.contains(kNotStrings) && p[kNotStrings].is_array()) {
      excluded.insert(excluded.end(), p[kNotStrings].begin(), p[kNotStrings].end());
    }
  }
  for (const Json& p : parts) {
    if (!p.contains("not")) continue;
    const Json* n = &p["not"];
    if (n->is_object() && n->contains("$ref") && (*n)["$ref"].is_string()) {
      PVLLM_RETURN_IF_ERROR(resolve((*n)["$ref"].get<std::string>(), &n));
    }
    std::vector<std::string> keys;
    if (n->is_object()) {
      for (const auto& [key, value] : n->items()) {
        if (!is_annotation(key)) keys.push_back(key);
      }
    }
    if (n->is_boolean() ? n->get<bool>() : keys.empty()) {
      *out = false;
      return Status::Ok();
    }
    if (n->is_boolean()) continue;  // not false: anything
    if (keys.size() == 1 && keys[0] == "type") {
      std::set<std::string> drop = type_set((*n)["type"]);
      std::set<std::string> kept;
      for (const char* t : {"object", "array", "string", "number", "integer", "boolean", "null"}) {
        if (!drop.count(t) && !(drop.count("number") && std::string_view(t) == "integer")) {
          kept.insert(t);
        }
      }
      if (drop.count("integer") && !drop.count("number")) {
        kept.erase("number");  // numbers that are not integers: not a type of their own
        kept.insert("number-not-integer");
      }
      // Where the schema takes no fractions anyway, they need no rule.
      if (kept.count("number-not-integer") && m.contains("type") &&
          !type_set(m["type"]).count("number")) {
        kept.erase("number-not-integer");
      }
      if (kept.count("number-not-integer")) {
        return Unsupported(
            "json schema: unsupported keyword \"not\" (numbers that are not "
            "integers) at " +
            (ptr.empty() ? std::string("the root") : ptr));
      }
      std::set<std::string> t =
          m.contains("type") ? intersect_types(type_set(m["type"]), kept) : kept;
      if (t.empty()) {
        *out = false;
        return Status::Ok();
      }
      m["type"] = Json(std::vector<std::string>(t.begin(), t.end()));
      continue;
    }
    if (keys.size() == 1 && (keys[0] == "enum" || keys[0] == "const")) {
      const Json& v = (*n)[keys[0]];
      if (keys[0] == "const") {
        excluded.push_back(v);
      } else if (v.is_array()) {
        excluded.insert(excluded.end(), v.begin(), v.end());
      } else {
        return InvalidArgument("json schema: \"enum\" at " + ptr + " is not an array");
      }
      continue;
    }
    if (keys.size() == 1 && keys[0] == "required" && (*n)["required"].is_array() &&
        (*n)["required"].size() == 1 && (*n)["required"][0].is_string()) {
      const std::string name = (*n)["required"][0].get<std::string>();
      if (required.count(name)) {
        *out = false;
        return Status::Ok();
      }
      // Every non-object has every member JSON Schema's `required` asks
      // for (it constrains objects only): `not` of it takes objects only.
      const std::set<std::string> object = {"object"};
      const std::set<std::string> t =
          m.contains("type") ? intersect_types(type_set(m["type"]), object) : object;
      if (t.empty()) {
        *out = false;
        return Status::Ok();
      }
      m["type"] = Json(std::vector<std::string>(t.begin(), t.end()));
      if (!prop_parts.count(name)) {
        names.push_back(name);
        prop_parts[name] = Json::array();
      }
      prop_parts[name].push_back(false);
      has_props = true;
      continue;
    }
    return Unsupported("json schema: unsupported keyword \"not\" at " +
                       (ptr.empty() ? std::string("the root") : ptr));
  }
  if (!excluded.empty()) {
    bool is_false = false;
    PVLLM_RETURN_IF_ERROR(exclude_values(excluded, ptr, &m, &is_false));
    if (is_false) {
      *out = false;
      return Status::Ok();
    }
  }
  if (m.contains("enum") && m["enum"].empty()) {
    *out = false;
    return Status::Ok();
  }
  // A name some part lists gets, from each part that does not list it,
  // that part's additionalProperties (false: the name may not appear).
  for (const Json& p : parts) {
    if (!p.contains("additionalProperties")) continue;
    if (p.contains("patternProperties")) {
      return unsupported(ptr, "additionalProperties beside patternProperties in a part");
    }
    const Json& extra = p["additionalProperties"];
    for (const auto& name : names) {
      bool listed =
          p.contains("properties") && p["properties"].is_object() && p["properties"].contains(name);
      if (!listed) prop_parts[name].push_back(extra);
    }
  }
  if (has_props) {
    Json props = Json::object();
    for (const auto& name : names) {
      Json& list = prop_parts[name];
      const bool forbidden = std::find(list.begin(), list.end(), Json(false)) != list.end();
      props[name] = forbidden ? Json(false) : list.size() == 1 ? list[0] : Json{{"allOf", list}};
    }
    m["properties"] = props;
  }
  if (!required_order.empty()) m["required"] = required_order;
  if (alternatives.size() == 1) {
    for (const auto& [key, value] : alternatives[0].items()) m[key] = value;
  } else if (alternatives.size() > 1) {
    m["allOf"] = Json(std::move(alternatives));
  }
  *out = std::move(m);
  return Status::Ok();
}

constexpr uint8_t kEveryType = 127;

uint8_t type_bit(const std::string& t) {
  static const std::map<std::string, uint8_t, std::less<>> bits = {
      {"object", 1},   {"array", 2},    {"string", 4}, {"number", 8 | 16},
      {"integer", 16}, {"boolean", 32}, {"null", 64}};
  auto it = bits.find(t);
  return it == bits.end() ? 0 : it->second;
}

uint8_t value_types(const Json& v) {
  if (v.is_object()) return 1;
  if (v.is_array()) return 2;
  if (v.is_string()) return 4;
  if (v.is_boolean()) return 32;
  if (v.is_null()) return 64;
  if (v.is_number_float() && std::floor(v.get<double>()) != v.get<double>()) return 8;
  return 16;  // a whole number: both integer and number (bit 16 stands for it)
}

// The types `s` allows, as bits (number = 8 | 16: fractional and whole).
uint8_t allowed_types(const Json& s) {
  uint8_t t = kEveryType;
  if (s.contains("type")) {
    t = 0;
    for (const auto& name : type_set(s["type"])) t |= type_bit(name);
  }
  if (s.contains("const")) t &= value_types(s["const"]);
  if (s.contains("enum") && s["enum"].is_array()) {
    uint8_t e = 0;
    for (const auto& v : s["enum"]) e |= value_types(v);
    t &= e;
  }
  return t;
}

const Json* values_of(const Json& s, Json* scratch) {
  if (s.contains("const")) {
    *scratch = Json::array({s["const"]});
    return scratch;
  }
  if (s.contains("enum") && s["enum"].is_array()) return &s["enum"];
  return nullptr;
}

bool lists_property(const Json& s, const std::string& name) {
  return s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name);
}

// Whether `s` forbids member `name`: not listed, no patternProperties, and
// additionalProperties false.
bool forbids_property(const Json& s, const std::string& name) {
  if (lists_property(s, name)) return s["properties"][name] == Json(false);
  return !s.contains("patternProperties") && s.contains("additionalProperties") &&
         s["additionalProperties"] == Json(false);
}

bool disjoint(const Json& a0, const Json& b0, const RefResolver& resolve, int depth);

// `a` requires a member that `b` forbids, or whose value `b` types apart.
bool members_disjoint(const Json& a, const Json& b, const RefResolver& resolve, int depth) {
  if (!a.contains("required") || !a["required"].is_array()) return false;
  for (const auto& n : a["required"]) {
    if (!n.is_string()) continue;
    const std::string name = n.get<std::string>();
    if (forbids_property(b, name)) return true;
    if (lists_property(a, name) && lists_property(b, name) &&
        disjoint(a["properties"][name], b["properties"][name], resolve, depth + 1)) {
      return true;
    }
  }
  return false;
}

bool disjoint(const Json& a0, const Json& b0, const RefResolver& resolve, int depth) {
  if (depth > kMaxFlattenDepth) return false;
  const Json* a = &a0;
  const Json* b = &b0;
  for (const Json** s : {&a, &b}) {
    if ((*s)->is_object() && (*s)->contains("$ref") && (*(*s))["$ref"].is_string()) {
      const Json* target = nullptr;
      if (!resolve((*(*s))["$ref"].get<std::string>(), &target).ok()) return false;
      if ((*s)->size() == 1)
        *s = target;
      else
        return false;  // $ref beside other keywords: not looked into
    }
  }
  if (a->is_boolean()) return !a->get<bool>();
  if (b->is_boolean()) return !b->get<bool>();
  if (!a->is_object() || !b->is_object()) return false;
  for (const Json* s : {a, b}) {
    const Json* other = s == a ? b : a;
    if (s->contains("anyOf") && (*s)["anyOf"].is_array()) {
      bool all = true;
      for (const auto& alt : (*s)["anyOf"]) all = all && disjoint(alt, *other, resolve, depth + 1);
      if (all) return true;
    }
  }
  uint8_t common = allowed_types(*a) & allowed_types(*b);
  if (common == 0) return true;
  Json sa, sb;
  const Json* va = values_of(*a, &sa);
  const Json* vb = values_of(*b, &sb);
  if (va && vb) {
    bool shared = false;
    for (const auto& v : *va) shared = shared || std::find(vb->begin(), vb->end(), v) != vb->end();
    if (!shared) return true;
  }
  if (common == 1) {  // both only objects
    return members_disjoint(*a, *b, resolve, depth) || members_disjoint(*b, *a, resolve, depth);
  }
  return false;
}

}  // namespace

bool schemas_disjoint(const SchemaJson& a, const SchemaJson& b, const RefResolver& resolve) {
  return disjoint(a, b, resolve, 0);
}

Status merge_schemas(const std::vector<const SchemaJson*>& parts, const RefResolver& resolve,
                     const std::string& ptr, SchemaJson* out, bool conditionals) {
  std::vector<Json> flat;
  bool is_false = false;
  for (const Json* p : parts) {
    PVLLM_RETURN_IF_ERROR(flatten(*p, resolve, ptr, 0, &flat, &is_false, conditionals));
  }
  if (is_false) {
    *out = false;
    return Status::Ok();
  }
  // anyOf and oneOf spread over the rest: (A | B) & C = (A & C) | (B & C).
  // oneOf alternatives keep their own oneOf (json_schema.cc decides
  // whether they exclude each other); two lists of alternatives multiply.
  std::vector<std::vector<Json>> combos = {{}};
  bool spread_one_of = false;
  int spread_lists = 0;
  for (Json& p : flat) {
    const char* key = p.contains("anyOf") ? "anyOf" : p.contains("oneOf") ? "oneOf" : nullptr;
    if (key && p.contains("anyOf") && p.contains("oneOf")) {
      return unsupported(ptr, "anyOf and oneOf in one part");
    }
    if (!key) {
      for (auto& c : combos) c.push_back(p);
      continue;
    }
    // (exactly one of A, B) & C is exactly one of A & C, B & C; a oneOf
    // does not multiply with other alternatives that way.
    if (std::string_view(key) == "oneOf") spread_one_of = true;
    if (++spread_lists > 1 && spread_one_of) {
      return unsupported(ptr, "oneOf beside other anyOf or oneOf alternatives");
    }
    const Json alts = p[key];
    p.erase(key);
    if (!alts.is_array() || alts.empty()) {
      return InvalidArgument("json schema: keyword \"" + std::string(key) + "\" at " + ptr +
                             ": not a non-empty array");
    }
    if (combos.size() * alts.size() > kMaxAlternatives) {
      // Many lists of alternatives (if / then / else in each part of an
      // allOf): first drop the combinations that exclude themselves.
      std::erase_if(combos, [&](const std::vector<Json>& c) {
        Json merged;
        return merge_flat(c, resolve, ptr, &merged).ok() && merged.is_boolean() &&
               !merged.get<bool>();
      });
    }
    if (combos.size() * alts.size() > kMaxAlternatives) {
      return unsupported(ptr, "more than " + std::to_string(kMaxAlternatives) +
                                  " alternatives once anyOf and oneOf are spread");
    }
    std::vector<std::vector<Json>> next;
    for (const auto& c : combos) {
      for (const auto& a : alts) {
        std::vector<Json> sub;
        bool sub_false = false;
        PVLLM_RETURN_IF_ERROR(flatten(a, resolve, ptr, 0, &sub, &sub_false, conditionals));
        if (sub_false) continue;
        std::vector<Json> n = c;
        n.push_back(p);
        for (auto& s : sub) n.push_back(std::move(s));
        next.push_back(std::move(n));
      }
    }
    combos = std::move(next);
  }
  if (combos.empty()) {
    *out = false;
    return Status::Ok();
  }
  if (combos.size() == 1) return merge_flat(combos[0], resolve, ptr, out);
  Json alts = Json::array();
  for (const auto& c : combos) {
    Json merged;
    PVLLM_RETURN_IF_ERROR(merge_flat(c, resolve, ptr, &merged));
    if (!(merged.is_boolean() && !merged.get<bool>())) alts.push_back(std::move(merged));
  }
  if (alts.empty()) {
    *out = false;
    return Status::Ok();
  }
  *out = Json{{spread_one_of ? "oneOf" : "anyOf", alts}};
  return Status::Ok();
}

}  // namespace pvllm::structured
