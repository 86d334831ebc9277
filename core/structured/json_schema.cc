// JSON schema -> GBNF. Each schema that is more than a bare reference
// becomes a rule named after its path ("root-address-city"); definitions
// reached through $ref become "def-NAME" rules, generated once from a work
// list, so recursive schemas refer to themselves instead of expanding.
// The grammar matches compact JSON, or with JsonGrammarOptions::whitespace
// JSON with whitespace between its tokens: "WS" in a primitive's body and
// ws_ in the converter's rules stand for json-ws or for nothing.
#include "core/structured/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/integer_range.h"
#include "core/structured/json_formats.h"
#include "core/structured/json_schema_merge.h"
#include "core/structured/number_range.h"
#include "core/structured/regex_grammar.h"
#include "core/structured/utf8_decoder.h"

namespace pvllm::structured {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 128;
constexpr size_t kMaxOneOf = 256;  // alternatives compared pairwise
constexpr size_t kMaxNameBase = 48;

// Primitive rules, emitted only when used. Each lists the primitives its
// body refers to.
struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> table = {
      {"json-value",
       "json-object | json-array | json-string | json-number | \"true\" | \"false\" | \"null\"",
       {"json-object", "json-array", "json-string", "json-number"}},
      {"json-object",
       "\"{\" WS ( json-string WS \":\" WS json-value WS ( \",\" WS json-string WS \":\" WS "
       "json-value WS )* )? \"}\"",
       {"json-string", "json-value"}},
      {"json-array",
       "\"[\" WS ( json-value WS ( \",\" WS json-value WS )* )? \"]\"",
       {"json-value"}},
      // Member names as JSON writers spell them: only ", \ and control
      // characters escaped, each one way. What a name that must differ from
      // the listed ones (string_except) is made of, so that no other
      // spelling of a listed name gets through.
      {"json-key-escape",
       "\"\\\\\" ( [\\\"\\\\bfnrt] | \"u000\" [0-7bef] | \"u001\" [0-9a-f] )",
       {}},
      {"json-key-char", "[^\\\"\\\\\\x00-\\x1F] | json-key-escape", {"json-key-escape"}},
      {"json-key-rest", "json-key-char* \"\\\"\"", {"json-key-char"}},
      // JSON's whitespace; unbounded as JSON has it (max_tokens bounds a
      // model that would go on with it).
      {"json-ws", "[ \\t\\n\\r]*", {}},
      {"json-string", "\"\\\"\" json-char* \"\\\"\"", {"json-char"}},
      {"json-char",
       // \\u escapes of UTF-16 surrogates (D800-DFFF) are left out: alone
       // they are no character, and strict parsers refuse them.
       "[^\\\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\\\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CefEF] "
       "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )",
       {}},
      {"json-number",
       // Exponents of two digits keep every number finite in doubles.
       "json-integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?",
       {"json-integer"}},
      {"json-integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )", {}},
      {"json-boolean", "\"true\" | \"false\"", {}},
  };
  return table;
}

// Keyword families: a keyword of a type family constrains only instances
// of that type, so it is ignored when the schema's type excludes it.
enum Family : uint8_t { kAny, kObject, kArray, kString, kNumber, kAnnotation };

struct KeywordInfo {
  Family family;
  bool supported;
};

const std::map<std::string, KeywordInfo, std::less<>>& keyword_table() {
  static const std::map<std::string, KeywordInfo, std::less<>> table = {
      {"type", {kAny, true}},
      {"enum", {kAny, true}},
      {"const", {kAny, true}},
      {"anyOf", {kAny, true}},
      {"$ref", {kAny, true}},
      {"allOf", {kAny, true}},
      {"oneOf", {kAny, true}},
      {"not", {kAny, true}},
      {"if", {kAny, true}},
      {"then", {kAny, true}},
      {"else", {kAny, true}},
      {"$dynamicRef", {kAny, false}},
      {"$recursiveRef", {kAny, false}},
      {"properties", {kObject, true}},
      {"required", {kObject, true}},
      {"additionalProperties", {kObject, true}},
      {"patternProperties", {kObject, true}},
      {"propertyNames", {kObject, true}},
      {"minProperties", {kObject, true}},
      {"maxProperties", {kObject, true}},
      {"dependentRequired", {kObject, true}},
      {"dependentSchemas", {kObject, false}},
      {"dependencies", {kObject, true}},
      {"unevaluatedProperties", {kObject, false}},
      {"items", {kArray, true}},
      {"minItems", {kArray, true}},
      {"maxItems", {kArray, true}},
      {"prefixItems", {kArray, true}},
      {"additionalItems", {kArray, true}},
      {"uniqueItems", {kArray, true}},
      {"contains", {kArray, false}},
      {"minContains", {kArray, false}},
      {"maxContains", {kArray, false}},
      {"unevaluatedItems", {kArray, false}},
      {"minLength", {kString, true}},
      {"maxLength", {kString, true}},
      {"format", {kString, true}},
      {"pattern", {kString, true}},
      {"minimum", {kNumber, true}},
      {"maximum", {kNumber, true}},
      {"exclusiveMinimum", {kNumber, true}},
      {"exclusiveMaximum", {kNumber, true}},
      {"multipleOf", {kNumber, true}},
      {"title", {kAnnotation, true}},
      {"description", {kAnnotation, true}},
      {"default", {kAnnotation, true}},
      {"examples", {kAnnotation, true}},
      {"$schema", {kAnnotation, true}},
      {"$id", {kAnnotation, true}},
      {"$comment", {kAnnotation, true}},
      {"deprecated", {kAnnotation, true}},
      {"readOnly", {kAnnotation, true}},
      {"writeOnly", {kAnnotation, true}},
      {"$defs", {kAnnotation, true}},
      {"definitions", {kAnnotation, true}},
      {"id", {kAnnotation, true}},  // draft 4's $id
      {"$anchor", {kAnnotation, true}},
      {"$dynamicAnchor", {kAnnotation, true}},
      {"$recursiveAnchor", {kAnnotation, true}},
      {"$vocabulary", {kAnnotation, true}},
      {"contentEncoding", {kAnnotation, true}},
      {"contentMediaType", {kAnnotation, true}},
      {"contentSchema", {kAnnotation, true}},
  };
  return table;
}

// Keywords of no JSON Schema draft (4 to 2020-12) are annotations, as the
// specification has validators treat them ("x-kubernetes-...", "javaType",
// a misspelt "minimun"): they constrain nothing, so ignoring them honours
// the schema.
KeywordInfo keyword_info(std::string_view key) {
  const auto& table = keyword_table();
  auto it = table.find(key);
  return it == table.end() ? KeywordInfo{kAnnotation, true} : it->second;
}

// The instance types, in the order their alternatives are emitted.
enum TypeBit : uint8_t {
  kTObject = 1,
  kTArray = 2,
  kTString = 4,
  kTNumber = 8,
  kTInteger = 16,
  kTBoolean = 32,
  kTNull = 64,
};
constexpr uint8_t kAllTypes = 127;

const std::vector<std::pair<std::string_view, uint8_t>>& type_names() {
  static const std::vector<std::pair<std::string_view, uint8_t>> names = {
      {"object", kTObject},   {"array", kTArray},     {"string", kTString}, {"number", kTNumber},
      {"integer", kTInteger}, {"boolean", kTBoolean}, {"null", kTNull},
  };
  return names;
}

uint8_t family_types(Family f) {
  switch (f) {
    case kObject:
      return kTObject;
    case kArray:
      return kTArray;
    case kString:
      return kTString;
    case kNumber:
      return kTNumber | kTInteger;
    default:
      return 0;
  }
}

// Whether `v` is an instance of one of `types`.
bool value_has_type(const Json& v, uint8_t types) {
  if (v.is_object()) return types & kTObject;
  if (v.is_array()) return types & kTArray;
  if (v.is_string()) return types & kTString;
  if (v.is_boolean()) return types & kTBoolean;
  if (v.is_null()) return types & kTNull;
  if (types & kTNumber) return true;
  if (!(types & kTInteger)) return false;
  if (!v.is_number_float()) return true;
  double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

// Whether `v` nests deeper than `limit` (serializing it recurses).
bool nests_deeper_than(const Json& v, int limit) {
  if (!v.is_structured()) return false;
  if (limit <= 0) return true;
  for (const auto& child : v) {
    if (nests_deeper_than(child, limit - 1)) return true;
  }
  return false;
}

// A JSON pointer token: ~ -> ~0, / -> ~1.
std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Inverse of pointer_token; false on a stray ~.
bool unescape_pointer_token(std::string_view token, std::string* out) {
  out->clear();
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] != '~') {
      *out += token[i];
      continue;
    }
    if (i + 1 == token.size() || (token[i + 1] != '0' && token[i + 1] != '1')) return false;
    *out += token[++i] == '0' ? '~' : '/';
  }
  return true;
}

std::string where(const std::string& ptr) { return ptr.empty() ? "the root" : ptr; }

Status unsupported_keyword(std::string_view key, const std::string& ptr,
                           std::string_view detail = "") {
  return Unsupported("json schema: unsupported keyword \"" + std::string(key) + "\"" +
                     std::string(detail) + " at " + where(ptr));
}

Status bad_keyword(std::string_view key, const std::string& ptr, std::string_view what) {
  return InvalidArgument("json schema: keyword \"" + std::string(key) + "\" at " + where(ptr) +
                         ": " + std::string(what));
}

Status matches_nothing(const std::string& ptr, std::string_view why) {
  return InvalidArgument("json schema: nothing can match the schema at " + where(ptr) + " (" +
                         std::string(why) + ")");
}

bool is_matches_nothing(const Status& st) {
  return st.code() == StatusCode::kInvalidArgument &&
         st.message().rfind("json schema: nothing can match", 0) == 0;
}

// A non-negative integer keyword value, at most kMaxRepetition.
Status count_keyword(const Json& s, const char* key, const std::string& ptr, uint32_t* out,
                     bool* present) {
  *present = s.contains(key);
  if (!*present) return Status::Ok();
  const Json& v = s[key];
  if (!v.is_number()) return bad_keyword(key, ptr, "not a number");
  double d = v.get<double>();
  if (!(d >= 0) || std::floor(d) != d) return bad_keyword(key, ptr, "not a non-negative integer");
  if (d > kMaxRepetition) {
    return unsupported_keyword(key, ptr, " above " + std::to_string(kMaxRepetition));
  }
  *out = static_cast<uint32_t>(d);
  return Status::Ok();
}

// `term` repeated lo..hi times (hi < 0: unbounded); "" when it cannot occur.
std::string repeat(const std::string& term, uint32_t lo, int64_t hi) {
  if (hi == 0) return "";
  if (hi < 0) {
    if (lo == 0) return term + "*";
    if (lo == 1) return term + "+";
    return term + "{" + std::to_string(lo) + ",}";
  }
  if (lo == 0 && hi == 1) return term + "?";
  if (lo == 1 && hi == 1) return term;
  if (lo == hi) return term + "{" + std::to_string(lo) + "}";
  return term + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

bool is_rule_name(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

std::string sanitize(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, kMaxNameBase)) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    out += ok ? c : '-';
  }
  return out;
}

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (const auto& a : alts) {
    if (!out.empty()) out += " | ";
    out += a;
  }
  return out;
}

// A definition reached through $ref, waiting for its rule body.
struct PendingDef {
  const Json* schema;
  std::string ptr;
  std::string rule;
};

class Converter {
 public:
  // `nesting`: how many converters this one is inside (each checks enum
  // values or member names with a grammar of its own); bounded, since a
  // recursive schema could otherwise nest them without end.
  Converter(const Json* root, const JsonGrammarOptions& options, int nesting = 0)
      : nesting_(nesting),
        root_(root),
        whitespace_(options.whitespace),
        unlisted_(options.unlisted_properties),
        any_order_(options.any_order),
        conditionals_(defines_conditionals(*root)) {}

  // if / then / else came with draft 7: a document that names draft 3, 4
  // or 6 in "$schema" has validators ignore them (as annotations).
  static bool defines_conditionals(const Json& root) {
    if (!root.is_object() || !root.contains("$schema") || !root["$schema"].is_string()) {
      return true;
    }
    const std::string& uri = root["$schema"].get_ref<const std::string&>();
    for (const char* old : {"draft-03", "draft-04", "draft-06"}) {
      if (uri.find(old) != std::string::npos) return false;
    }
    return true;
  }

  Status convert(std::string* gbnf) { return convert_at(*root_, "", gbnf); }

  // A grammar whose root matches `s`, a subschema of the document at
  // `ptr` ("$ref": "#" still names the document).
  Status convert_at(const Json& s, const std::string& ptr, std::string* gbnf) {
    root_is_document_ = &s == root_;
    rules_.emplace_back("root", "");
    taken_.insert("root");
    std::string body;
    PVLLM_RETURN_IF_ERROR(schema_body(s, ptr, "root", 0, &body));
    rules_[0].second = body;
    while (!pending_.empty()) {
      PendingDef def = pending_.front();
      pending_.pop_front();
      PVLLM_RETURN_IF_ERROR(schema_body(*def.schema, def.ptr, def.rule, 1, &body));
      rules_[rule_index_[def.rule]].second = body;
    }
    *gbnf = render();
    return Status::Ok();
  }

  // Marks a primitive (and what it uses) for output; returns its name.
  std::string use(const std::string& name) {
    if (!used_.insert(name).second) return name;
    for (const auto& p : primitives()) {
      if (name != p.name) continue;
      for (const char* dep : p.uses) use(dep);
      if (whitespace_ && std::string_view(p.body).find(" WS") != std::string_view::npos) {
        use("json-ws");
      }
    }
    return name;
  }

  std::string render() const {
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    for (const auto& p : primitives()) {
      if (!used_.count(p.name)) continue;
      std::string body = p.body;
      for (size_t at; (at = body.find(" WS")) != std::string::npos;) {
        body.replace(at, 3, whitespace_ ? " json-ws" : "");
      }
      out += std::string(p.name) + " ::= " + body + "\n";
    }
    return out + raw_rules_;
  }

 private:
  // " json-ws" where whitespace may come, "" in compact JSON.
  std::string ws() { return whitespace_ ? " " + use("json-ws") : ""; }
  // A punctuation literal ("{", ",", ...) and the whitespace after it.
  std::string punct(char c) { return gbnf_literal(std::string(1, c)) + ws(); }
  // An object or array with nothing in it.
  std::string empty_container(char open, char close) {
    return whitespace_ ? punct(open) + " " + gbnf_literal(std::string(1, close))
                       : gbnf_literal(std::string{open, close});
  }

  // The spellings of JSON value `v`: its compact text, and in whitespace
  // mode its containers' members with whitespace between them.
  std::string value_gbnf(const Json& v) {
    if (!whitespace_ || !v.is_structured() || v.empty()) {
      if (whitespace_ && v.is_structured()) {
        return v.is_object() ? empty_container('{', '}') : empty_container('[', ']');
      }
      return gbnf_literal(v.dump());
    }
    std::string out = punct(v.is_object() ? '{' : '[');
    bool first = true;
    for (const auto& [key, child] : v.items()) {
      if (!first) out += " " + punct(',');
      first = false;
      if (v.is_object()) out += " " + gbnf_literal(Json(key).dump()) + ws() + " " + punct(':');
      out += " " + value_gbnf(child) + ws();
    }
    return out + " " + gbnf_literal(v.is_object() ? "}" : "]");
  }

  std::string unique_name(const std::string& hint) {
    std::string base = sanitize(hint);
    if (taken_.insert(base).second) return base;
    for (uint32_t& n = next_suffix_[base];;) {
      std::string name = base + "-" + std::to_string(++n);
      if (taken_.insert(name).second) return name;
    }
  }

  // A rule with `body` (reusing an identical one); returns its name. A
  // body that is already a single rule name is returned as is.
  std::string add_rule(const std::string& hint, const std::string& body) {
    if (is_rule_name(body)) return body;
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    std::string name = unique_name(hint);
    rule_index_[name] = rules_.size();
    rules_.emplace_back(name, body);
    by_body_[body] = name;
    return name;
  }

  // A term (rule name) matching `s`.
  Status check_nesting(const std::string& ptr) const {
    if (nesting_ < kMaxNesting) return Status::Ok();
    return Unsupported("json schema: enum values or propertyNames checked against schemas nested " +
                       std::to_string(kMaxNesting) + " deep (through $ref) at " + where(ptr));
  }

  Status schema_term(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                     std::string* term) {
    std::string body;
    PVLLM_RETURN_IF_ERROR(schema_body(s, ptr, hint, depth, &body));
    *term = add_rule(hint, body);
    return Status::Ok();
  }

  Status schema_body(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                     std::string* body) {
    if (depth > kMaxDepth) {
      return Unsupported("json schema: nesting deeper than " + std::to_string(kMaxDepth) + " at " +
                         where(ptr));
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) return matches_nothing(ptr, "schema false");
      *body = use("json-value");
      return Status::Ok();
    }
    if (!s.is_object()) {
      return InvalidArgument("json schema: the schema at " + where(ptr) +
                             " is neither an object nor a boolean");
    }
    return object_schema_body(s, ptr, hint, depth, body);
  }

  Status object_schema_body(const Json& s, const std::string& ptr, const std::string& hint,
                            int depth, std::string* body) {
    if (!conditionals_ && (s.contains("if") || s.contains("then") || s.contains("else"))) {
      Json rest = s;
      for (const char* key : {"if", "then", "else"}) rest.erase(key);
      merged_.push_back(std::move(rest));
      return object_schema_body(merged_.back(), ptr, hint, depth, body);
    }
    uint8_t inferred = 0;
    std::vector<std::string> constraining;  // non-annotation keywords
    for (const auto& [key, value] : s.items()) {
      KeywordInfo info = keyword_info(key);
      if (info.family == kAny && !info.supported) {
        return unsupported_keyword(key, ptr);
      }
      if (info.family == kAnnotation) continue;
      constraining.push_back(key);
      inferred |= family_types(info.family);
    }
    uint8_t types = kAllTypes;
    if (s.contains("type")) PVLLM_RETURN_IF_ERROR(parse_type(s["type"], ptr, &types));
    for (const auto& key : constraining) {
      KeywordInfo info = keyword_info(key);
      if (!info.supported && (family_types(info.family) & types)) {
        return unsupported_keyword(key, ptr);
      }
    }
    // Keywords beside allOf, $ref, anyOf or oneOf hold together with them:
    // merged into one schema (json_schema_merge.h).
    const bool alternatives = s.contains("anyOf") || s.contains("oneOf");
    if (s.contains("allOf") || s.contains("not") || s.contains("if") || s.contains("then") ||
        s.contains("else") || ((s.contains("$ref") || alternatives) && constraining.size() > 1)) {
      return merged_body(s, ptr, hint, depth, body);
    }
    if (s.contains("$ref")) return ref_body(s, constraining, ptr, body);
    if (alternatives) return any_of_body(s, ptr, hint, depth, body);
    if (s.contains("enum") || s.contains("const"))
      return enum_body(s, constraining, ptr, types, body);
    if (!s.contains("type") && !inferred) {
      *body = use("json-value");
      return Status::Ok();
    }
    return typed_body(s, ptr, hint, depth, types, body);
  }

  Status parse_type(const Json& t, const std::string& ptr, uint8_t* types) {
    std::vector<const Json*> names;
    if (t.is_string()) {
      names.push_back(&t);
    } else if (t.is_array() && !t.empty()) {
      for (const auto& n : t) names.push_back(&n);
    } else {
      return bad_keyword("type", ptr, "not a type name or a non-empty array of them");
    }
    *types = 0;
    for (const Json* n : names) {
      uint8_t bit = 0;
      for (const auto& [name, b] : type_names()) {
        if (n->is_string() && n->get_ref<const std::string&>() == name) bit = b;
      }
      if (!bit) {
        std::string what =
            n->is_string() ? "unknown type " + n->dump() : "a type that is no string";
        return bad_keyword("type", ptr, what);
      }
      *types |= bit;
    }
    return Status::Ok();
  }

  Status ref_body(const Json& s, const std::vector<std::string>& constraining,
                  const std::string& ptr, std::string* body) {
    for (const auto& key : constraining) {
      if (key != "$ref") return unsupported_keyword(key, ptr, " beside \"$ref\"");
    }
    const Json& ref = s["$ref"];
    if (!ref.is_string()) return bad_keyword("$ref", ptr, "not a string");
    const std::string& target = ref.get_ref<const std::string&>();
    if (target == "#") return def_rule(root_, "", body);
    const Json* schema = nullptr;
    std::string def_ptr;
    PVLLM_RETURN_IF_ERROR(resolve_ref(target, ptr, &schema, &def_ptr));
    return def_rule(schema, def_ptr, body);
  }

  // The schema a "$ref" names inside this document: a JSON pointer
  // ("#/definitions/a", "#/properties/b/items", "#/$defs/x/$defs/y", with
  // ~0 ~1 and %XX escapes) or a plain-name fragment ("#node", an
  // "$anchor" or a draft-4 "id"). Other documents are refused.
  Status resolve_ref(const std::string& target, const std::string& ptr, const Json** out,
                     std::string* def_ptr) {
    if (target.empty() || target[0] != '#') {
      return unsupported_keyword("$ref", ptr, " to another document: " + Json(target).dump());
    }
    std::string fragment;
    if (!percent_decode(std::string_view(target).substr(1), &fragment)) {
      return bad_keyword("$ref", ptr, "malformed %-escape in " + Json(target).dump());
    }
    if (!fragment.empty() && fragment[0] != '/') {
      const Json* found = find_anchor(*root_, fragment, 0);
      if (!found) return bad_keyword("$ref", ptr, "no anchor " + Json(target).dump());
      *out = found;
      *def_ptr = "#" + fragment;
      return Status::Ok();
    }
    const Json* node = root_;
    size_t at = 1;
    while (at <= fragment.size()) {
      size_t end = std::min(fragment.find('/', at), fragment.size());
      std::string token;
      if (!unescape_pointer_token(std::string_view(fragment).substr(at, end - at), &token)) {
        return bad_keyword("$ref", ptr, "malformed pointer " + Json(target).dump());
      }
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() &&
                 std::all_of(token.begin(), token.end(), ::isdigit) && token.size() < 9 &&
                 std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        return bad_keyword("$ref", ptr, "nothing at " + Json(target).dump());
      }
      at = end + 1;
    }
    *out = node;
    *def_ptr = fragment;
    return Status::Ok();
  }

  static bool percent_decode(std::string_view in, std::string* out) {
    out->clear();
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] != '%') {
        *out += in[i];
        continue;
      }
      if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
        return false;
      }
      *out += static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    }
    return true;
  }

  // The subschema whose "$anchor" is `name`, or whose draft-4 "id" (or
  // "$id") is "#name"; depth-bounded.
  static const Json* find_anchor(const Json& s, const std::string& name, int depth) {
    if (depth > kMaxDepth || !s.is_structured()) return nullptr;
    if (s.is_object()) {
      auto is = [&](const char* key, const std::string& value) {
        auto it = s.find(key);
        return it != s.end() && it->is_string() && it->get_ref<const std::string&>() == value;
      };
      if (is("$anchor", name) || is("id", "#" + name) || is("$id", "#" + name)) return &s;
      for (const auto& [key, child] : s.items()) {
        if (key == "enum" || key == "const" || key == "default" || key == "examples") continue;
        if (const Json* f = find_anchor(child, name, depth + 1)) return f;
      }
      return nullptr;
    }
    for (const auto& child : s) {
      if (const Json* f = find_anchor(child, name, depth + 1)) return f;
    }
    return nullptr;
  }

  // The rule for the schema at `def_ptr`, queued for generation on first use.
  Status def_rule(const Json* schema, const std::string& def_ptr, std::string* rule) {
    if (def_ptr.empty() && root_is_document_) {
      *rule = "root";
      return Status::Ok();
    }
    auto known = def_rules_.find(def_ptr);
    if (known != def_rules_.end()) {
      *rule = known->second;
      return Status::Ok();
    }
    std::string rule_name = unique_name(
        def_ptr.empty() ? "def-document" : "def-" + def_ptr.substr(def_ptr.find_last_of("/#") + 1));
    def_rules_[def_ptr] = rule_name;
    rule_index_[rule_name] = rules_.size();
    rules_.emplace_back(rule_name, "");
    pending_.push_back({schema, def_ptr, rule_name});
    *rule = rule_name;
    return Status::Ok();
  }

  // enum and const: the values allowed, less those of a type `type` rules
  // out, less those the schema's other keywords refuse (each value checked
  // against the grammar of the schema without enum and const).
  Status enum_body(const Json& s, const std::vector<std::string>& constraining,
                   const std::string& ptr, uint8_t types, std::string* body) {
    bool others = false;
    for (const auto& key : constraining) {
      others = others || (family_types(keyword_info(key).family) & types);
    }
    Grammar others_grammar;
    if (others) {
      Json rest = s;
      rest.erase("enum");
      rest.erase("const");
      if (!rest.contains("type")) {
        // The values' own types: the others then constrain only their
        // family, as they do in JSON Schema.
        std::set<std::string> names;
        for (const char* key : {"enum", "const"}) {
          if (!s.contains(key)) continue;
          for (const Json& v :
               key == std::string("enum") && s[key].is_array() ? s[key] : Json::array({s[key]})) {
            names.insert(v.is_object()                  ? "object"
                         : v.is_array()                 ? "array"
                         : v.is_string()                ? "string"
                         : v.is_boolean()               ? "boolean"
                         : v.is_null()                  ? "null"
                         : value_has_type(v, kTInteger) ? "integer"
                                                        : "number");
          }
        }
        if (!names.empty()) rest["type"] = std::vector<std::string>(names.begin(), names.end());
      }
      PVLLM_RETURN_IF_ERROR(check_nesting(ptr));
      Converter sub(root_, {.unlisted_properties = unlisted_, .any_order = true}, nesting_ + 1);
      std::string gbnf;
      PVLLM_RETURN_IF_ERROR(sub.convert_at(rest, ptr, &gbnf));
      PVLLM_RETURN_IF_ERROR(parse_gbnf(gbnf, &others_grammar));
    }
    if (!s.contains("type")) types = kAllTypes;
    std::vector<const Json*> values;
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array()) return bad_keyword("enum", ptr, "not an array");
      for (const auto& v : e) values.push_back(&v);
    }
    // Comparing and serializing values recurse.
    for (const char* key : {"enum", "const"}) {
      if (s.contains(key) && nests_deeper_than(s[key], kMaxDepth)) {
        return unsupported_keyword(key, ptr, " nesting deeper than " + std::to_string(kMaxDepth));
      }
    }
    if (s.contains("const")) {
      const Json& c = s["const"];
      if (!s.contains("enum")) {
        values.push_back(&c);
      } else {
        std::erase_if(values, [&](const Json* v) { return *v != c; });
      }
    }
    std::vector<std::string> alts;
    std::set<std::string> seen;
    for (const Json* v : values) {
      if (!value_has_type(*v, types)) continue;
      std::string text = v->dump();
      if (others && !grammar_accepts(others_grammar, text)) continue;
      if (seen.insert(text).second) alts.push_back(value_gbnf(*v));
    }
    if (alts.empty()) return matches_nothing(ptr, "no enum or const value is allowed");
    *body = join_alternatives(alts);
    return Status::Ok();
  }

  RefResolver resolver(const std::string& ptr) {
    return [this, ptr](const std::string& ref, const Json** out) {
      if (ref == "#") {
        *out = root_;
        return Status::Ok();
      }
      std::string def_ptr;
      return resolve_ref(ref, ptr, out, &def_ptr);
    };
  }

  Status merged_body(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                     std::string* body) {
    Json merged;
    PVLLM_RETURN_IF_ERROR(merge_schemas({&s}, resolver(ptr), ptr, &merged, conditionals_));
    if (merged.is_boolean() && !merged.get<bool>()) {
      return matches_nothing(ptr, "its allOf parts or alternatives exclude each other");
    }
    // One rule per merged schema, named before its body is written: a
    // schema that reaches itself again through $ref beside other keywords
    // (each level merging to the same schema) is then a recursive rule,
    // not a nesting without end.
    std::string key = merged.dump();
    if (auto it = merged_rules_.find(key); it != merged_rules_.end()) {
      *body = it->second;
      return Status::Ok();
    }
    const std::string rule = unique_name(hint + "-m");
    const size_t index = rules_.size();
    rule_index_[rule] = index;
    rules_.emplace_back(rule, "");
    merged_rules_.emplace(key, rule);
    merged_.push_back(std::move(merged));
    std::string inner;
    const Status st = schema_body(merged_.back(), ptr, rule, depth + 1, &inner);
    if (!st.ok()) {
      // The callers may go on without it (an alternative nothing matches):
      // a rule that matches nothing for what referred to it meanwhile.
      rules_[index].second = "[^\\x00-\\U0010FFFF]";
      merged_rules_.erase(key);
      return st;
    }
    rules_[index].second = inner;
    *body = rule;
    return Status::Ok();
  }

  // anyOf, and oneOf whose alternatives exclude each other pairwise (then
  // "exactly one" is "at least one"); a oneOf that may match twice is
  // refused.
  Status any_of_body(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                     std::string* body) {
    const bool one_of = s.contains("oneOf");
    const char* key = one_of ? "oneOf" : "anyOf";
    const Json& list = s[key];
    if (!list.is_array() || list.empty()) return bad_keyword(key, ptr, "not a non-empty array");
    std::vector<const Json*> separated(list.size(), nullptr);
    if (one_of) {
      if (list.size() > kMaxOneOf) {
        return unsupported_keyword(
            key, ptr, " with more than " + std::to_string(kMaxOneOf) + " alternatives");
      }
      PVLLM_RETURN_IF_ERROR(separate_one_of(list, ptr, &separated));
    }
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      const Json& alt = one_of && separated[i] ? *separated[i] : list[i];
      if (alt.is_boolean() && !alt.get<bool>()) continue;
      std::string term;
      std::string index = std::to_string(i);
      const Status st =
          schema_term(alt, ptr + "/" + key + "/" + index, hint + "-" + index, depth + 1, &term);
      if (is_matches_nothing(st)) continue;  // an alternative nothing matches adds nothing
      PVLLM_RETURN_IF_ERROR(st);
      alts.push_back(term);
    }
    if (alts.empty()) {
      return matches_nothing(
          ptr, "every " + std::string(key) + " alternative is false or matches nothing");
    }
    *body = join_alternatives(alts);
    return Status::Ok();
  }

  // oneOf as anyOf: each pair of alternatives must exclude each other
  // (schemas_disjoint), or be objects that each require a member the other
  // does not: the alternative is then written without the other's member
  // (stricter, and no longer matching both). `separated[i]` is the
  // alternative so narrowed, null where it is kept as it is.
  Status separate_one_of(const Json& list, const std::string& ptr,
                         std::vector<const Json*>* separated) {
    RefResolver resolve = resolver(ptr);
    std::vector<std::set<std::string>> forbid(list.size());
    std::vector<Json> flat(list.size());
    std::vector<bool> flat_known(list.size(), false);
    auto flatten = [&](size_t i) -> bool {
      if (!flat_known[i]) {
        flat_known[i] = true;
        if (!merge_schemas({&list[i]}, resolve, ptr, &flat[i], conditionals_).ok() ||
            !flat[i].is_object() || flat[i].contains("anyOf") || flat[i].contains("oneOf")) {
          flat[i] = nullptr;
        }
      }
      return !flat[i].is_null();
    };
    // The first name `b` requires that `a` does not, "" when none.
    auto required_apart = [](const Json& a, const Json& b) -> std::string {
      if (!b.contains("required") || !b["required"].is_array()) return "";
      for (const auto& n : b["required"]) {
        if (!n.is_string()) continue;
        const bool in_a =
            a.contains("required") && a["required"].is_array() &&
            std::find(a["required"].begin(), a["required"].end(), n) != a["required"].end();
        if (!in_a) return n.get<std::string>();
      }
      return "";
    };
    // Objects only: a schema that lets other types through could match
    // both as, say, a string.
    auto objects_only = [](const Json& f) {
      if (!f.contains("type")) return false;
      const Json& t = f["type"];
      return (t.is_string() && t == "object") ||
             (t.is_array() && t.size() == 1 && t[0] == "object");
    };
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size(); ++j) {
        if (schemas_disjoint(list[i], list[j], resolve)) continue;
        std::string r_j, r_i;
        if (flatten(i) && flatten(j) && objects_only(flat[i]) && objects_only(flat[j])) {
          r_j = required_apart(flat[i], flat[j]);
          r_i = required_apart(flat[j], flat[i]);
        }
        if (r_i.empty() || r_j.empty()) {
          return unsupported_keyword("oneOf", ptr,
                                     " whose alternatives " + std::to_string(i) + " and " +
                                         std::to_string(j) + " may both match");
        }
        forbid[i].insert(r_j);
        forbid[j].insert(r_i);
      }
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (forbid[i].empty()) continue;
      Json parts = Json::array({flat[i]});
      for (const auto& name : forbid[i]) {
        parts.push_back(Json{{"not", Json{{"required", Json::array({name})}}}});
      }
      merged_.push_back(Json{{"allOf", parts}});
      (*separated)[i] = &merged_.back();
    }
    return Status::Ok();
  }

  Status typed_body(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                    uint8_t types, std::string* body) {
    if (types & kTNumber) types &= ~kTInteger;
    std::vector<std::string> alts;
    // A type whose keywords nothing matches drops out; the others stay
    // (an untyped schema whose object keywords contradict each other still
    // takes every array, string, ...).
    Status nothing = Status::Ok();
    auto add = [&](const Status& st, const std::string& alt) {
      if (is_matches_nothing(st)) {
        nothing = st;
        return Status::Ok();
      }
      if (st.ok()) alts.push_back(alt);
      return st;
    };
    std::string alt;
    if (types & kTObject) PVLLM_RETURN_IF_ERROR(add(object_body(s, ptr, hint, depth, &alt), alt));
    if (types & kTArray) PVLLM_RETURN_IF_ERROR(add(array_body(s, ptr, hint, depth, &alt), alt));
    if (types & kTString) {
      PVLLM_RETURN_IF_ERROR(add(s.contains(kNotStrings) ? strings_but_body(s, ptr, hint, &alt)
                                                        : string_body(s, ptr, &alt),
                                alt));
    }
    if (types & kTNumber) PVLLM_RETURN_IF_ERROR(add(number_body(s, ptr, hint, false, &alt), alt));
    if (types & kTInteger) PVLLM_RETURN_IF_ERROR(add(number_body(s, ptr, hint, true, &alt), alt));
    if (types & kTBoolean) alts.push_back(use("json-boolean"));
    if (types & kTNull) alts.push_back("\"null\"");
    if (alts.empty()) return nothing.ok() ? matches_nothing(ptr, "no type") : nothing;
    if (alts.size() == 1) {
      *body = alts[0];
      return Status::Ok();
    }
    for (auto& a : alts) {
      if (a.find(" | ") != std::string::npos) a = "( " + a + " )";
    }
    *body = join_alternatives(alts);
    return Status::Ok();
  }

  // A keyword's number read exactly (number_range.h).
  Status decimal_keyword(const char* key, const Json& v, const std::string& ptr, Decimal* out) {
    if (v.is_number_unsigned()) return parse_decimal(std::to_string(v.get<uint64_t>()), out);
    if (v.is_number_integer()) {
      *out = Decimal::from_int(v.get<int64_t>());
    } else if (v.is_number_float() && std::isfinite(v.get<double>())) {
      *out = decimal_from_double(v.get<double>());
    } else {
      return bad_keyword(key, ptr, "not a number");
    }
    return Status::Ok();
  }

  // minimum, maximum and their exclusive forms (numbers, or draft 4's
  // booleans that make minimum / maximum exclusive), the tighter of two
  // bounds on a side kept.
  Status number_bounds(const Json& s, const std::string& ptr, NumberBounds* b) {
    auto flag = [&](const char* key) {
      return s.contains(key) && s[key].is_boolean() && s[key].get<bool>();
    };
    auto tighten = [&](const char* key, bool lower, bool exclusive) -> Status {
      Decimal d;
      PVLLM_RETURN_IF_ERROR(decimal_keyword(key, s[key], ptr, &d));
      bool& has = lower ? b->has_lo : b->has_hi;
      Decimal& bound = lower ? b->lo : b->hi;
      bool& excl = lower ? b->lo_exclusive : b->hi_exclusive;
      int c = has ? compare_decimals(d, bound) : 0;
      if (!has || (lower ? c > 0 : c < 0) || (c == 0 && exclusive)) {
        has = true;
        bound = d;
        excl = exclusive;
      }
      return Status::Ok();
    };
    if (s.contains("minimum"))
      PVLLM_RETURN_IF_ERROR(tighten("minimum", true, flag("exclusiveMinimum")));
    if (s.contains("maximum"))
      PVLLM_RETURN_IF_ERROR(tighten("maximum", false, flag("exclusiveMaximum")));
    if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean()) {
      PVLLM_RETURN_IF_ERROR(tighten("exclusiveMinimum", true, true));
    }
    if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean()) {
      PVLLM_RETURN_IF_ERROR(tighten("exclusiveMaximum", false, true));
    }
    return Status::Ok();
  }

  // A number, or an integer, within its bounds and a multiple of
  // "multipleOf" (number_range.h); integers without multipleOf as
  // integer_range.h writes them.
  Status number_body(const Json& s, const std::string& ptr, const std::string& hint,
                     bool integers_only, std::string* body) {
    if (integers_only && !s.contains("multipleOf")) return integer_body(s, ptr, body);
    NumberBounds bounds;
    PVLLM_RETURN_IF_ERROR(number_bounds(s, ptr, &bounds));
    if (s.contains("multipleOf")) {
      Decimal step;
      PVLLM_RETURN_IF_ERROR(decimal_keyword("multipleOf", s["multipleOf"], ptr, &step));
      if (step.negative || step.is_zero()) {
        return bad_keyword("multipleOf", ptr, "not a number above 0");
      }
      GbnfFragment frag;
      std::string prefix = unique_name(hint + "-multiple");
      Status st = multiple_of_gbnf(step, integers_only, bounds, prefix, &frag);
      if (!st.ok()) {
        return Status(st.code(),
                      "json schema: keyword \"multipleOf\" at " + where(ptr) + ": " + st.message());
      }
      if (frag.expr.empty()) {
        return matches_nothing(ptr, "no multiple of multipleOf lies within the bounds");
      }
      for (auto& [name, rule] : frag.rules) {
        taken_.insert(name);
        rule_index_[name] = rules_.size();
        rules_.emplace_back(name, rule);
      }
      *body = frag.expr;
      return Status::Ok();
    }
    if (!bounds.has_lo && !bounds.has_hi) {
      *body = use("json-number");
      return Status::Ok();
    }
    *body = number_range_gbnf(bounds);
    if (body->empty()) return matches_nothing(ptr, "no number lies between the bounds");
    return Status::Ok();
  }

  // An integer, bounded by "minimum" / "maximum" and their exclusive
  // forms: numbers, or in draft 4 booleans that make minimum / maximum
  // exclusive.
  Status integer_body(const Json& s, const std::string& ptr, std::string* body) {
    constexpr int64_t kMax = kMaxGrammarInteger;
    int64_t lo = -kMax, hi = kMax;
    bool bounded = false;
    // The value rounded up (lower bounds) or down, clamped to one past the
    // grammar's integers on either side.
    auto bound = [&](const char* key, bool up, int64_t* out) -> Status {
      const Json& v = s[key];
      if (v.is_number_unsigned()) {
        *out = static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), kMax + 1));
      } else if (v.is_number_integer()) {
        *out = std::clamp<int64_t>(v.get<int64_t>(), -kMax - 1, kMax + 1);
      } else if (v.is_number_float() && std::isfinite(v.get<double>())) {
        const double d = up ? std::ceil(v.get<double>()) : std::floor(v.get<double>());
        *out = d >= 1e16 ? kMax + 1 : d <= -1e16 ? -kMax - 1 : static_cast<int64_t>(d);
      } else {
        return bad_keyword(key, ptr, "not a number");
      }
      bounded = true;
      return Status::Ok();
    };
    auto flag = [&](const char* key) { return s.contains(key) && s[key].is_boolean(); };
    const bool draft4_min = flag("exclusiveMinimum") && s["exclusiveMinimum"].get<bool>();
    const bool draft4_max = flag("exclusiveMaximum") && s["exclusiveMaximum"].get<bool>();
    int64_t v = 0;
    if (s.contains("minimum")) {
      PVLLM_RETURN_IF_ERROR(bound("minimum", !draft4_min, &v));
      lo = std::max(lo, draft4_min ? v + 1 : v);
    }
    if (s.contains("exclusiveMinimum") && !flag("exclusiveMinimum")) {
      PVLLM_RETURN_IF_ERROR(bound("exclusiveMinimum", false, &v));
      lo = std::max(lo, v + 1);
    }
    if (s.contains("maximum")) {
      PVLLM_RETURN_IF_ERROR(bound("maximum", draft4_max, &v));
      hi = std::min(hi, draft4_max ? v - 1 : v);
    }
    if (s.contains("exclusiveMaximum") && !flag("exclusiveMaximum")) {
      PVLLM_RETURN_IF_ERROR(bound("exclusiveMaximum", true, &v));
      hi = std::min(hi, v - 1);
    }
    if (!bounded) {
      *body = use("json-integer");
      return Status::Ok();
    }
    if (lo > hi) {
      return matches_nothing(ptr, "no integer of at most 16 digits lies between the bounds");
    }
    *body = integer_range_gbnf(lo, hi);
    return Status::Ok();
  }

  // dependentRequired: a member's name and the names it needs.
  using Dependencies = std::vector<std::pair<std::string, std::vector<std::string>>>;

  // One object member, listed in `properties` or `required`.
  struct Member {
    std::string key;
    std::string value;  // rule name; for `extras`, the rule of one whole member
    bool required;
    bool extras = false;  // any number of members not listed, after the listed ones
  };

  Status object_body(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                     std::string* body) {
    const Json* props = s.contains("properties") ? &s["properties"] : nullptr;
    if (props && !props->is_object()) return bad_keyword("properties", ptr, "not an object");
    std::vector<std::string> required;
    PVLLM_RETURN_IF_ERROR(required_names(s, ptr, &required));
    std::string extra;  // the rule for values of unlisted members; "" = none allowed
    PVLLM_RETURN_IF_ERROR(additional_rule(s, ptr, hint, depth, &extra));
    uint32_t lo = 0, hi = 0;
    bool has_lo = false, has_hi = false;
    PVLLM_RETURN_IF_ERROR(count_keyword(s, "minProperties", ptr, &lo, &has_lo));
    PVLLM_RETURN_IF_ERROR(count_keyword(s, "maxProperties", ptr, &hi, &has_hi));
    if (has_hi && lo > hi) return matches_nothing(ptr, "minProperties is above maxProperties");
    // propertyNames: the rule of the names members may have ("" = any),
    // and the grammar that checks listed names against it.
    std::string names;
    Grammar names_grammar;
    // Where propertyNames only leaves names out ({"not": {"enum": [...]}}),
    // those names: unlisted members are then any name but the listed and
    // these.
    std::optional<std::vector<std::string>> names_but;
    if (s.contains("propertyNames")) {
      bool none = false;
      PVLLM_RETURN_IF_ERROR(property_names(s["propertyNames"], ptr, hint, depth, &names,
                                           &names_grammar, &none, &names_but));
      if (none) {
        if (!required.empty() || lo > 0) {
          return matches_nothing(ptr, "propertyNames allows no name and a member must come");
        }
        *body = empty_container('{', '}');
        return Status::Ok();
      }
      if (!names.empty() && s.contains("patternProperties")) {
        return unsupported_keyword("propertyNames", ptr, " beside \"patternProperties\"");
      }
    }
    // Dependencies name members, so they take the listed members' way.
    const bool has_deps = (s.contains("dependentRequired") && !s["dependentRequired"].empty()) ||
                          (s.contains("dependencies") && !s["dependencies"].empty());
    bool listed = (props && !props->empty()) || !required.empty() || has_deps;
    if (!listed && s.contains("patternProperties")) {
      std::string pair;
      PVLLM_RETURN_IF_ERROR(pattern_member(s, {}, ptr, hint, depth, &pair));
      if (pair.empty() || (has_hi && hi == 0)) {
        if (lo > 0)
          return matches_nothing(ptr, "minProperties is above 0 and no member may appear");
        *body = empty_container('{', '}');
        return Status::Ok();
      }
      std::string more = repeat("( " + punct(',') + " " + pair + " )", lo > 0 ? lo - 1 : 0,
                                has_hi ? static_cast<int64_t>(hi) - 1 : -1);
      std::string list = pair + (more.empty() ? "" : " " + more);
      *body = punct('{') + (lo == 0 ? " ( " + list + " )?" : " " + list) + " \"}\"";
      return Status::Ok();
    }
    if (!listed) {
      if (extra.empty() || (has_hi && hi == 0)) {
        if (lo > 0)
          return matches_nothing(ptr, "minProperties is above 0 and no member may appear");
        *body = empty_container('{', '}');
      } else if (extra == "json-value" && !has_lo && !has_hi && names.empty()) {
        *body = use("json-object");
      } else {
        const std::string key = names.empty() ? use("json-string") : names;
        std::string pair = key + ws() + " " + punct(':') + " " + use(extra) + ws();
        std::string more = repeat("( " + punct(',') + " " + pair + " )", lo > 0 ? lo - 1 : 0,
                                  has_hi ? static_cast<int64_t>(hi) - 1 : -1);
        std::string list = pair + (more.empty() ? "" : " " + more);
        *body = punct('{') + (lo == 0 ? " ( " + list + " )?" : " " + list) + " \"}\"";
      }
      return Status::Ok();
    }
    std::vector<Member> members;
    PVLLM_RETURN_IF_ERROR(listed_members(props, required, extra, ptr, hint, depth, &members));
    if (!names.empty()) {
      // Listed names that propertyNames refuses may not come. Unlisted
      // members are left out (but where it only leaves names out): their
      // names would have to match propertyNames and be none of the listed
      // ones, which one grammar rule cannot say in general (stricter,
      // never looser).
      for (const Member& m : members) {
        if (m.required && !grammar_accepts(names_grammar, Json(m.key).dump())) {
          return matches_nothing(ptr, "propertyNames refuses the required \"" + m.key + "\"");
        }
      }
      std::erase_if(members, [&](const Member& m) {
        return !grammar_accepts(names_grammar, Json(m.key).dump());
      });
    }
    // dependentRequired (and draft 4-7's dependencies of names): each a
    // member that needs others (a term's dependencies); the names it
    // speaks of become members where unlisted members may come.
    Dependencies deps;
    PVLLM_RETURN_IF_ERROR(dependent_required(s, ptr, &deps));
    if (!deps.empty()) {
      PVLLM_RETURN_IF_ERROR(settle_dependencies(deps, extra, names, ptr, &members));
    }
    const bool counted = has_lo || has_hi;
    // In any order an %unordered term; in the listed order an %ordered one
    // where dependencies or property counts must hold (exactly, unlisted
    // members counted), else the plain rules of members_body.
    const bool term = !members.empty() && members.size() < kMaxUnorderedItems &&
                      (any_order_ || !deps.empty() || counted);
    if (!deps.empty() && !term && !members.empty()) {
      return unsupported_keyword(
          s.contains("dependentRequired") ? "dependentRequired" : "dependencies", ptr,
          " beside more than 255 members");
    }
    // With unlisted_, members not listed: with patternProperties those
    // whose names match the pattern (other names are left out), else any
    // name but the listed ones, valued by additionalProperties. In the
    // listed order they come after the listed ones (left out under
    // property counts beside more than 255 members).
    std::string pair;
    if (s.contains("patternProperties")) {
      // Checked either way: a listed name the pattern matches is refused.
      PVLLM_RETURN_IF_ERROR(pattern_member(s, members, ptr, hint, depth, &pair));
      if (!unlisted_ || (counted && !term)) pair.clear();
    } else if (unlisted_ && !extra.empty() && (!counted || term) && (names.empty() || names_but)) {
      std::vector<std::string> names = names_but.value_or(std::vector<std::string>{});
      for (const Member& m : members) names.push_back(m.key);
      if (props) {
        for (const auto& [key, sub] : props->items()) names.push_back(key);  // false ones too
      }
      std::string key;
      PVLLM_RETURN_IF_ERROR(string_except(names, hint, ptr, &key));
      pair = key + ws() + " " + punct(':') + " " + use(extra) + ws();
    }
    if (!pair.empty()) {
      members.push_back({"", add_rule(hint + "-extra", pair), false, true});
    }
    if (term) {
      return unordered_body(members, deps, ptr, lo, has_hi ? hi : kUnbounded, !any_order_, body);
    }
    // Only listed members are written, so the counts bound how many of the
    // optional ones come: nothing to do when every choice fits, at least
    // one when none is required and minProperties is 1; else refused.
    const uint32_t n_required = static_cast<uint32_t>(
        std::count_if(members.begin(), members.end(), [](const Member& m) { return m.required; }));
    const uint32_t n_all = static_cast<uint32_t>(members.size());
    if (has_hi && hi < n_required) {
      return matches_nothing(ptr, "maxProperties is below the required members");
    }
    bool nonempty = false;
    if (lo > n_required || (has_hi && hi < n_all)) {
      if (n_required == 0 && lo == 1 && (!has_hi || hi >= n_all)) {
        nonempty = true;
      } else {
        return unsupported_keyword(lo > n_required ? "minProperties" : "maxProperties", ptr,
                                   " between the required and the listed members' count");
      }
    }
    *body = members_body(members, hint, nonempty);
    return Status::Ok();
  }

  // propertyNames: a string schema every member's name matches. *rule
  // matches such a name (a JSON string) in this grammar, *g alone; *none
  // when no name can match.
  Status property_names(const Json& schema, const std::string& ptr, const std::string& hint,
                        int depth, std::string* rule, Grammar* g, bool* none,
                        std::optional<std::vector<std::string>>* but) {
    const std::string at = ptr + "/propertyNames";
    if (schema.is_boolean()) {
      *none = !schema.get<bool>();
      return Status::Ok();
    }
    if (!schema.is_object()) return bad_keyword("propertyNames", ptr, "not a schema");
    Json ns = schema;
    if (ns.contains("type")) {
      // Names are strings: other types match none.
      uint8_t types = 0;
      PVLLM_RETURN_IF_ERROR(parse_type(ns["type"], at, &types));
      if (!(types & kTString)) {
        *none = true;
        return Status::Ok();
      }
    }
    ns["type"] = "string";
    PVLLM_RETURN_IF_ERROR(check_nesting(ptr));
    Converter sub(root_, {.unlisted_properties = unlisted_, .any_order = true}, nesting_ + 1);
    std::string gbnf;
    Status st = sub.convert_at(ns, at, &gbnf);
    if (is_matches_nothing(st)) {
      *none = true;
      return Status::Ok();
    }
    PVLLM_RETURN_IF_ERROR(st);
    PVLLM_RETURN_IF_ERROR(parse_gbnf(gbnf, g));
    // Names left out and nothing else: the strings but those.
    Json merged;
    if (merge_schemas({&ns}, resolver(at), at, &merged, conditionals_).ok() && merged.is_object() &&
        merged.contains(kNotStrings)) {
      bool only = true;
      for (const auto& [key, value] : merged.items()) {
        only = only &&
               (key == kNotStrings || key == "type" || keyword_info(key).family == kAnnotation);
      }
      if (only) {
        but->emplace();
        for (const Json& v : merged[kNotStrings]) (*but)->push_back(v.get<std::string>());
      }
    }
    return schema_term(ns, at, hint + "-name", depth + 1, rule);
  }

  // A JSON string (its quotes included) that is none of `names`, spelled
  // as json-key-char has it: a rule per node of the names' trie, each
  // ending the string, leaving the trie with any other character, or
  // following a child.
  Status string_except(const std::vector<std::string>& names, const std::string& hint,
                       const std::string& ptr, std::string* rule) {
    struct Node {
      std::map<uint32_t, size_t> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : names) {
      size_t at = 0;
      Utf8Decoder d;
      for (char c : name) {
        uint32_t cp = 0;
        auto r = d.feed(static_cast<uint8_t>(c), &cp);
        if (r == Utf8Decoder::kInvalid)
          return bad_keyword("properties", ptr, "a name is not UTF-8");
        if (r != Utf8Decoder::kChar) continue;
        if (cp < 0x20 || cp == '"' || cp == '\\') {
          return unsupported_keyword("additionalProperties", ptr,
                                     " beside property names with quotes, backslashes or "
                                     "control characters");
        }
        auto it = trie[at].children.find(cp);
        if (it == trie[at].children.end()) {
          it = trie[at].children.emplace(cp, trie.size()).first;
          trie.emplace_back();
        }
        at = it->second;
      }
      trie[at].terminal = true;
    }
    std::vector<std::string> node_rules(trie.size());
    const std::string rest = use("json-key-rest");
    const std::string escape = use("json-key-escape");
    // Children come after their parents in `trie`, so from the back every
    // child's rule exists when its parent's is written.
    for (size_t i = trie.size(); i-- > 0;) {
      std::vector<std::string> alts;
      if (!trie[i].terminal) alts.push_back("\"\\\"\"");
      std::string others = "[^\\\"\\\\\\x00-\\x1F";
      for (const auto& [cp, child] : trie[i].children) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "\\U%08X", cp);
        others += buf;
      }
      alts.push_back(others + "] " + rest);
      alts.push_back(escape + " " + rest);
      for (const auto& [cp, child] : trie[i].children) {
        std::string utf8;
        append_utf8(cp, &utf8);
        alts.push_back(gbnf_literal(utf8) + " " + node_rules[child]);
      }
      node_rules[i] = add_rule(hint + "-name", join_alternatives(alts));
    }
    *rule = "\"\\\"\" " + node_rules[0];
    return Status::Ok();
  }

  // patternProperties: one member whose name matches the pattern (or one
  // of several whose schemas are all the same) and whose value matches its
  // schema. Names that match no pattern are left out, which
  // additionalProperties allows whatever it says; a listed or required name
  // that matches a pattern is refused (its two schemas would both apply,
  // and the member could come twice).
  Status pattern_member(const Json& s, const std::vector<Member>& members, const std::string& ptr,
                        const std::string& hint, int depth, std::string* pair) {
    const Json& pp = s["patternProperties"];
    if (!pp.is_object()) return bad_keyword("patternProperties", ptr, "not an object");
    if (pp.empty()) return Status::Ok();
    const Json* schema = nullptr;
    std::vector<std::string> keys;
    for (const auto& [pattern, sub] : pp.items()) {
      if (schema && sub != *schema) {
        return unsupported_keyword("patternProperties", ptr, " with patterns of different schemas");
      }
      schema = &sub;
      std::string key;
      PVLLM_RETURN_IF_ERROR(pattern_body(Json(pattern), ptr + "/patternProperties", &key));
      keys.push_back(key);
    }
    if (schema->is_boolean() && !schema->get<bool>()) return Status::Ok();
    std::string key = keys.size() == 1 ? keys[0] : "( " + join_alternatives(keys) + " )";
    std::string key_rule = add_rule(hint + "-pattern-name", key);
    if (!members.empty()) {
      // The pattern rules stand alone (regex_grammar.h).
      std::string gbnf = "root ::= " + key + "\n" + raw_rules_;
      Grammar g;
      PVLLM_RETURN_IF_ERROR(parse_gbnf(gbnf, &g));
      for (const Member& m : members) {
        if (grammar_accepts(g, Json(m.key).dump())) {
          return unsupported_keyword("patternProperties", ptr,
                                     " matching the listed property " + Json(m.key).dump());
        }
      }
    }
    std::string value;
    PVLLM_RETURN_IF_ERROR(schema_term(*schema,
                                      ptr + "/patternProperties/" + pointer_token(pp.begin().key()),
                                      hint + "-pattern-value", depth + 1, &value));
    *pair = key_rule + ws() + " " + punct(':') + " " + use(value) + ws();
    return Status::Ok();
  }

  Status required_names(const Json& s, const std::string& ptr, std::vector<std::string>* names) {
    if (!s.contains("required")) return Status::Ok();
    const Json& r = s["required"];
    if (!r.is_array()) return bad_keyword("required", ptr, "not an array");
    std::set<std::string> seen;
    for (const auto& n : r) {
      if (!n.is_string()) return bad_keyword("required", ptr, "holds a non-string");
      if (seen.insert(n.get<std::string>()).second) names->push_back(n.get<std::string>());
    }
    return Status::Ok();
  }

  Status additional_rule(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                         std::string* rule) {
    if (!s.contains("additionalProperties")) {
      *rule = "json-value";
      return Status::Ok();
    }
    const Json& a = s["additionalProperties"];
    if (a.is_boolean()) {
      *rule = a.get<bool>() ? "json-value" : "";
      return Status::Ok();
    }
    const Status st =
        schema_term(a, ptr + "/additionalProperties", hint + "-value", depth + 1, rule);
    if (is_matches_nothing(st)) {  // as false: no unlisted members
      rule->clear();
      return Status::Ok();
    }
    return st;
  }

  Status listed_members(const Json* props, const std::vector<std::string>& required,
                        const std::string& extra, const std::string& ptr, const std::string& hint,
                        int depth, std::vector<Member>* members) {
    std::set<std::string> required_set(required.begin(), required.end());
    std::set<std::string> listed;
    if (props) {
      for (const auto& [key, sub] : props->items()) {
        listed.insert(key);
        bool req = required_set.count(key) > 0;
        if (sub.is_boolean() && !sub.get<bool>()) {
          if (req) return matches_nothing(ptr, "required property \"" + key + "\" is false");
          continue;  // may not appear
        }
        std::string value;
        Status st = schema_term(sub, ptr + "/properties/" + pointer_token(key), hint + "-" + key,
                                depth + 1, &value);
        // A member whose schema nothing matches ({"not": {}}) may not appear.
        if (!st.ok() && !req && is_matches_nothing(st)) continue;
        PVLLM_RETURN_IF_ERROR(st);
        members->push_back({key, value, req});
      }
    }
    for (const auto& name : required) {
      if (listed.count(name)) continue;
      if (extra.empty()) {
        return matches_nothing(ptr, "required \"" + name + "\" is not an allowed property");
      }
      members->push_back({name, use(extra), true});
    }
    return Status::Ok();
  }

  // "{" members "}" with commas right for any subset of optional members:
  // head_i matches members i.. when none was emitted yet, tail_i when one
  // was (so each of its members starts with a comma).
  // `nonempty`: at least one member (all are optional then).
  std::string members_body(const std::vector<Member>& members, const std::string& hint,
                           bool nonempty = false) {
    bool all_required =
        std::all_of(members.begin(), members.end(), [](const Member& m) { return m.required; });
    if (all_required) {
      std::string body = punct('{');
      for (size_t i = 0; i < members.size(); ++i) {
        body += " " + member_term(members[i], i > 0);
      }
      return body + " \"}\"";
    }
    std::string head, tail;  // rules for members i.., "" past the end
    for (size_t i = members.size(); i-- > 0;) {
      const Member& m = members[i];
      std::string rest_tail = tail.empty() ? "" : " " + tail;
      std::string new_tail, new_head;
      if (m.required) {
        new_tail = member_term(m, true) + rest_tail;
        new_head = member_term(m, false) + rest_tail;
      } else {
        new_tail = "( " + member_term(m, true) + " )?" + rest_tail;
        std::string with = member_term(m, false) + rest_tail;
        new_head = !head.empty() ? with + " | " + head : nonempty ? with : "( " + with + " )?";
      }
      // tail_0 is never used; head_i only at the start or after an optional member.
      std::string index = std::to_string(i);
      if (i > 0) tail = add_rule(hint + "-tail" + index, new_tail);
      if (i == 0 || !members[i - 1].required) head = add_rule(hint + "-head" + index, new_head);
    }
    return punct('{') + " " + head + " \"}\"";
  }

  // "{" members "}" in any order (`ordered`: in the order of `members`):
  // the required members once, the optional ones at most once, unlisted
  // ones any number of times, lo..hi of them, dependencies held.
  Status unordered_body(const std::vector<Member>& members, const Dependencies& deps,
                        const std::string& ptr, uint32_t lo, uint32_t hi, bool ordered,
                        std::string* body) {
    size_t n_required = 0;
    bool extras = false;
    std::string items;
    for (const Member& m : members) {
      n_required += m.required;
      extras |= m.extras;
      items += m.extras     ? " " + m.value + "*"
               : m.required ? " ( " + member_term(m, false) + " )"
                            : " ( " + member_term(m, false) + " )?";
    }
    if (hi != kUnbounded && hi < n_required) {
      return matches_nothing(ptr, "maxProperties is below the required members");
    }
    if (!extras && lo > members.size()) {
      return matches_nothing(ptr, "minProperties is above the members allowed");
    }
    std::string bounds;
    if (lo > n_required || (hi != kUnbounded && (extras || hi < members.size()))) {
      bounds = "{" + std::to_string(lo) + "," + (hi == kUnbounded ? "" : std::to_string(hi)) + "}";
    }
    // Dependencies by item number (from 1), each member's key once.
    std::string needs;
    auto item_of = [&members](const std::string& key) {
      for (size_t i = 0; i < members.size(); ++i) {
        if (!members[i].extras && members[i].key == key) return i + 1;
      }
      return size_t{0};
    };
    for (const auto& [name, needed] : deps) {
      const size_t from = item_of(name);
      if (from == 0 || needed.empty()) continue;  // a member that may not come
      needs += (needs.empty() ? " ; " : ", ") + std::to_string(from) + " ->";
      for (const std::string& n : needed) needs += " " + std::to_string(item_of(n));
    }
    *body = punct('{') + (ordered ? " %ordered" : " %unordered") + bounds + "( " + punct(',') +
            " ;" + items + needs + " ) \"}\"";
    return Status::Ok();
  }

  // dependentRequired, and dependencies whose values are name lists, by
  // the member that needs the others.
  Status dependent_required(const Json& s, const std::string& ptr, Dependencies* deps) {
    for (const char* key : {"dependentRequired", "dependencies"}) {
      if (!s.contains(key)) continue;
      const Json& d = s[key];
      if (!d.is_object()) return bad_keyword(key, ptr, "not an object");
      for (const auto& [name, needed] : d.items()) {
        if (!needed.is_array()) {
          if (key == std::string("dependencies")) {
            return unsupported_keyword(key, ptr, " with a schema (\"" + name + "\")");
          }
          return bad_keyword(key, ptr, "a value that is not an array of names");
        }
        std::vector<std::string> names;
        for (const Json& n : needed) {
          if (!n.is_string()) return bad_keyword(key, ptr, "holds a non-string name");
          if (n.get<std::string>() != name &&
              std::find(names.begin(), names.end(), n.get<std::string>()) == names.end()) {
            names.push_back(n.get<std::string>());
          }
        }
        deps->emplace_back(name, std::move(names));
      }
    }
    return Status::Ok();
  }

  // Makes every name a dependency speaks of a member where unlisted members
  // may come (valued by additionalProperties), then leaves out the members
  // that need one that may not come (refusing a required one).
  Status settle_dependencies(const Dependencies& deps, const std::string& extra,
                             const std::string& names, const std::string& ptr,
                             std::vector<Member>* members) {
    auto has = [members](const std::string& key) {
      return std::any_of(members->begin(), members->end(),
                         [&key](const Member& m) { return !m.extras && m.key == key; });
    };
    if (unlisted_ && !extra.empty() && names.empty()) {
      for (const auto& [name, needed] : deps) {
        if (!has(name)) members->push_back({name, use(extra), false});
        for (const std::string& n : needed) {
          if (!has(n)) members->push_back({n, use(extra), false});
        }
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& [name, needed] : deps) {
        if (!has(name)) continue;
        for (const std::string& n : needed) {
          if (has(n)) continue;
          const std::string& key = name;  // a binding cannot be captured before C++20
          auto it = std::find_if(members->begin(), members->end(),
                                 [&key](const Member& m) { return !m.extras && m.key == key; });
          if (it->required) {
            return matches_nothing(
                ptr, "\"" + name + "\" is required and needs \"" + n + "\", which may not come");
          }
          members->erase(it);
          changed = true;
          break;
        }
      }
    }
    return Status::Ok();
  }

  std::string member_term(const Member& m, bool comma) {
    if (m.extras) {
      return comma ? "( " + punct(',') + " " + m.value + " )+"
                   : m.value + " ( " + punct(',') + " " + m.value + " )*";
    }
    if (!whitespace_) {
      std::string key = (comma ? "," : "") + Json(m.key).dump() + ":";
      return gbnf_literal(key) + " " + m.value;
    }
    return (comma ? punct(',') + " " : "") + gbnf_literal(Json(m.key).dump()) + ws() + " " +
           punct(':') + " " + m.value + ws();
  }

  // Arrays: "items" for every item, or a tuple ("prefixItems", or an
  // "items" array in drafts before 2020-12) whose later items follow
  // "items" (2020-12) or "additionalItems"; minItems and maxItems.
  Status array_body(const Json& s, const std::string& ptr, const std::string& hint, int depth,
                    std::string* body) {
    uint32_t lo = 0, hi = 0;
    bool has_lo = false, has_hi = false;
    PVLLM_RETURN_IF_ERROR(count_keyword(s, "minItems", ptr, &lo, &has_lo));
    PVLLM_RETURN_IF_ERROR(count_keyword(s, "maxItems", ptr, &hi, &has_hi));
    if (has_hi && lo > hi) return matches_nothing(ptr, "minItems is above maxItems");
    if (s.contains("uniqueItems")) {
      const Json& u = s["uniqueItems"];
      if (!u.is_boolean()) return bad_keyword("uniqueItems", ptr, "not a boolean");
      if (u.get<bool>() && !(has_hi && hi <= 1)) {
        return unsupported_keyword("uniqueItems", ptr, " true on arrays of more than one item");
      }
    }
    // The tuple's schemas and the schema of the items after it.
    const Json* tuple = nullptr;
    const char* tuple_key = nullptr;
    const Json* rest = nullptr;
    const char* rest_key = nullptr;
    if (s.contains("prefixItems")) {
      tuple = &s["prefixItems"];
      tuple_key = "prefixItems";
      if (s.contains("items")) {
        rest = &s["items"];
        rest_key = "items";
      }
    } else if (s.contains("items") && s["items"].is_array()) {
      tuple = &s["items"];
      tuple_key = "items";
      if (s.contains("additionalItems")) {
        rest = &s["additionalItems"];
        rest_key = "additionalItems";
      }
    } else if (s.contains("items")) {
      rest = &s["items"];
      rest_key = "items";
    }
    if (tuple && !tuple->is_array()) return bad_keyword(tuple_key, ptr, "not an array");
    std::vector<std::string> terms;  // the tuple's items
    if (tuple) {
      for (size_t i = 0; i < tuple->size() && (!has_hi || i < hi); ++i) {
        const Json& item = (*tuple)[i];
        if (item.is_boolean() && !item.get<bool>()) {
          if (lo > i) return matches_nothing(ptr, "a required tuple item is false");
          hi = static_cast<uint32_t>(i);  // nothing from here on
          has_hi = true;
          break;
        }
        std::string term;
        std::string index = std::to_string(i);
        PVLLM_RETURN_IF_ERROR(schema_term(item, ptr + "/" + tuple_key + "/" + index,
                                          hint + "-" + index, depth + 1, &term));
        terms.push_back(use(term));
      }
    }
    std::string item = "json-value";  // the items after the tuple; "" = none
    if (rest && rest->is_boolean()) {
      if (!rest->get<bool>()) item = "";
    } else if (rest) {
      PVLLM_RETURN_IF_ERROR(
          schema_term(*rest, ptr + "/" + rest_key, hint + "-item", depth + 1, &item));
    }
    if (!item.empty()) use(item);
    const uint32_t k = static_cast<uint32_t>(terms.size());
    if (item.empty() && lo > k) {
      return matches_nothing(ptr, tuple ? "minItems is above the items the tuple allows"
                                        : "items is false and minItems is above 0");
    }
    // Items k.. : `item` repeated, between max(lo - k, 0) and hi - k times.
    std::string more;
    if (!item.empty() && (!has_hi || hi > k)) {
      more = repeat("( " + punct(',') + " " + item + ws() + " )", lo > k ? lo - k : 0,
                    has_hi ? static_cast<int64_t>(hi - k) : -1);
    }
    if (k == 0) {
      // No tuple: the first item has no comma before it.
      if (item.empty() || (has_hi && hi == 0)) {
        *body = empty_container('[', ']');
        return Status::Ok();
      }
      std::string after = repeat("( " + punct(',') + " " + item + ws() + " )", lo > 0 ? lo - 1 : 0,
                                 has_hi ? static_cast<int64_t>(hi) - 1 : -1);
      std::string list = item + ws() + (after.empty() ? "" : " " + after);
      *body =
          lo == 0 ? punct('[') + " ( " + list + " )? \"]\"" : punct('[') + " " + list + " \"]\"";
      return Status::Ok();
    }
    // The tuple from the back: item i, then the rest, optional from minItems on.
    std::string seq = more;
    for (uint32_t i = k; i-- > 0;) {
      std::string term = (i > 0 ? punct(',') + " " : "") + terms[i] + ws();
      std::string with = term + (seq.empty() ? "" : " " + seq);
      seq = i >= lo ? "( " + with + " )?" : with;
    }
    *body = punct('[') + " " + seq + " \"]\"";
    return Status::Ok();
  }

  Status string_body(const Json& s, const std::string& ptr, std::string* body) {
    uint32_t lo = 0, hi = 0;
    bool has_lo = false, has_hi = false;
    PVLLM_RETURN_IF_ERROR(count_keyword(s, "minLength", ptr, &lo, &has_lo));
    PVLLM_RETURN_IF_ERROR(count_keyword(s, "maxLength", ptr, &hi, &has_hi));
    if (s.contains("format") && !s["format"].is_string()) {
      return bad_keyword("format", ptr, "not a string");
    }
    const bool format =
        s.contains("format") && is_standard_format(s["format"].get_ref<const std::string&>());
    if (s.contains("pattern")) {
      if (has_lo || has_hi || format) {
        return unsupported_keyword("pattern", ptr,
                                   format ? " beside \"format\"" : " beside a length bound");
      }
      return pattern_body(s["pattern"], ptr, body);
    }
    if (s.contains("format") && is_standard_format(s["format"].get_ref<const std::string&>())) {
      if (has_lo || has_hi) {
        return unsupported_keyword(has_lo ? "minLength" : "maxLength", ptr, " beside \"format\"");
      }
      return format_body(s["format"], ptr, body);
    }
    if (has_hi && lo > hi) return matches_nothing(ptr, "minLength is above maxLength");
    if (!has_lo && !has_hi) {
      *body = use("json-string");
      return Status::Ok();
    }
    std::string chars = repeat(use("json-char"), lo, has_hi ? static_cast<int64_t>(hi) : -1);
    *body = "\"\\\"\" " + (chars.empty() ? "" : chars + " ") + "\"\\\"\"";
    return Status::Ok();
  }

  // Strings but those `not` left out (json_schema_merge.h's kNotStrings),
  // as string_except spells them; refused beside other string keywords
  // (one rule cannot say both).
  Status strings_but_body(const Json& s, const std::string& ptr, const std::string& hint,
                          std::string* body) {
    for (const char* key : {"minLength", "maxLength", "pattern", "format"}) {
      if (s.contains(key) &&
          (std::string_view(key) != "format" ||
           (s[key].is_string() && is_standard_format(s[key].get<std::string>())))) {
        return unsupported_keyword("not", ptr, std::string(" of strings beside \"") + key + "\"");
      }
    }
    std::vector<std::string> names;
    for (const Json& v : s[kNotStrings]) names.push_back(v.get<std::string>());
    return string_except(names, hint + "-but", ptr, body);
  }

  // The formats JSON Schema defines (drafts 4 to 2020-12). Others
  // ("int32", "color", ...) are annotations, as validators treat them.
  static bool is_standard_format(std::string_view name) {
    static const std::set<std::string, std::less<>> names = {"date-time",
                                                             "date",
                                                             "time",
                                                             "duration",
                                                             "email",
                                                             "idn-email",
                                                             "hostname",
                                                             "idn-hostname",
                                                             "ipv4",
                                                             "ipv6",
                                                             "uri",
                                                             "uri-reference",
                                                             "iri",
                                                             "iri-reference",
                                                             "uuid",
                                                             "regex",
                                                             "json-pointer",
                                                             "uri-template",
                                                             "relative-json-pointer"};
    return names.count(name) > 0;
  }

  // A format json_formats.h implements, its rules emitted once.
  Status format_body(const Json& f, const std::string& ptr, std::string* body) {
    const std::string& name = f.get_ref<const std::string&>();
    auto known = format_entries_.find(name);
    if (known == format_entries_.end()) {
      std::string rules, entry;
      if (!json_format_gbnf(name, &rules, &entry).ok()) {
        return unsupported_keyword("format", ptr, " value " + f.dump());
      }
      raw_rules_ += rules;
      known = format_entries_.emplace(name, entry).first;
    }
    *body = "\"\\\"\" " + known->second + " \"\\\"\"";
    return Status::Ok();
  }

  // A string whose value has a match of "pattern" (ECMA-262, unanchored),
  // through regex_grammar.h; its rules are named "patternN...", which no
  // rule named after a schema path ("root-...", "def-...") can be.
  Status pattern_body(const Json& p, const std::string& ptr, std::string* body) {
    if (!p.is_string()) return bad_keyword("pattern", ptr, "not a string");
    const std::string& pattern = p.get_ref<const std::string&>();
    auto known = pattern_entries_.find(pattern);
    if (known == pattern_entries_.end()) {
      std::string prefix = "pattern" + std::to_string(pattern_entries_.size() + 1);
      std::string rules;
      Status st = regex_to_json_string_gbnf(pattern, prefix, &rules);
      if (!st.ok()) {
        return Status(st.code(),
                      "json schema: keyword \"pattern\" at " + where(ptr) + ": " + st.message());
      }
      raw_rules_ += rules;
      known = pattern_entries_.emplace(pattern, prefix).first;
    }
    *body = "\"\\\"\" " + known->second + " \"\\\"\"";
    return Status::Ok();
  }

  static constexpr int kMaxNesting = 8;
  int nesting_;
  const Json* root_;
  bool whitespace_;
  bool unlisted_;
  bool any_order_;
  bool conditionals_;                                  // if / then / else apply (drafts 7 on)
  std::string raw_rules_;                              // rules of formats and patterns, whole lines
  std::map<std::string, std::string> format_entries_;  // format -> entry rule
  std::map<std::string, std::string> pattern_entries_;  // pattern -> entry rule
  bool root_is_document_ = true;
  std::vector<std::pair<std::string, std::string>> rules_;  // root first
  std::unordered_map<std::string, size_t> rule_index_;
  std::unordered_map<std::string, std::string> by_body_;
  std::unordered_map<std::string, std::string> def_rules_;  // definition pointer -> rule
  std::unordered_map<std::string, uint32_t> next_suffix_;
  std::set<std::string> taken_;
  std::set<std::string> used_;
  std::deque<PendingDef> pending_;
  std::deque<Json> merged_;  // schemas merged_body made (pending_ may point into them)
  std::unordered_map<std::string, std::string> merged_rules_;  // merged schema (JSON) -> rule
};

// nlohmann's message less its "[json.exception...] parse error at line L,
// column C: " prefix (its columns count from 1, our offsets from 0).
std::string parse_error_detail(std::string_view what) {
  size_t column = what.find("column ");
  size_t colon = column == std::string_view::npos ? column : what.find(": ", column);
  return std::string(colon == std::string_view::npos ? what : what.substr(colon + 2));
}

}  // namespace

Status json_schema_to_gbnf(std::string_view schema_json, std::string* gbnf,
                           const JsonGrammarOptions& options) {
  Json schema;
  try {
    schema = Json::parse(schema_json.begin(), schema_json.end());
  } catch (const Json::parse_error& e) {
    return InvalidArgument("json schema: malformed JSON at byte " +
                           std::to_string(e.byte > 0 ? e.byte - 1 : 0) + ": " +
                           parse_error_detail(e.what()));
  } catch (const Json::exception& e) {
    // A number beyond double's range (1e309) is out_of_range, not a
    // parse_error (found by fuzz_constraint).
    return InvalidArgument(std::string("json schema: ") + e.what());
  }
  try {
    Converter converter(&schema, options);
    return converter.convert(gbnf);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("json schema: ") + e.what());
  }
}

std::string json_object_gbnf(const JsonGrammarOptions& options) {
  Json any = Json::object();
  Converter converter(&any, options);
  std::string root = converter.use("json-object");
  return "root ::= " + root + "\n" + converter.render();
}

}  // namespace pvllm::structured
