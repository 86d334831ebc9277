// Filters: `value | name(args)`, as Jinja defines them, plus tojson as
// transformers adds it. Anything not here is UNSUPPORTED by name.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/chat/builtins.h"
#include "core/chat/error.h"
#include "core/chat/json_value.h"
#include "core/chat/limits.h"
#include "core/chat/operators.h"
#include "core/chat/renderer.h"

namespace pvllm::chat {
namespace {

// "a.b.0": attribute (or, for digits, index) lookups one after another.
Value get_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos) {
      cur = get_item(cur, Value::integer(std::atoll(part.c_str())));
    } else {
      cur = get_attr(cur, part);
    }
    start = dot + 1;
  }
  return cur;
}

// The sort key of the sort-like filters: strings lowered unless case matters.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(ascii_lower(v.as_string()));
  return v;
}

std::vector<Value> sorted(std::vector<Value> items, bool reverse, bool case_sensitive,
                          const std::string& attribute) {
  auto key = [&](const Value& v) {
    return sort_key(attribute.empty() ? v : get_path(v, attribute), case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? less_than(key(b), key(a)) : less_than(key(a), key(b));
  });
  return items;
}

Value trim(const Value& input, const CallArgs& args) {
  check_args(args, 1, {"chars"}, "trim");
  return Value::string(strip(input.str(), args.get(0, "chars"), true, true));
}

Value tojson(const Value& input, const CallArgs& args) {
  check_args(args, 1, {"indent", "sort_keys", "ensure_ascii"}, "tojson");
  if (bool_arg(args, 99, "ensure_ascii", false))
    unsupported("tojson(ensure_ascii=true) is not supported");
  const int64_t indent = int_arg(args, 0, "indent", -1, "tojson");
  return Value::string(
      to_json(input, static_cast<int>(indent), bool_arg(args, 99, "sort_keys", false)));
}

Value length(const Value& input) {
  switch (input.kind()) {
    case Value::Kind::kUndefined:
      return Value::integer(0);
    case Value::Kind::kString:
      return Value::integer(static_cast<int64_t>(split_code_points(input.as_string()).size()));
    case Value::Kind::kList:
      return Value::integer(static_cast<int64_t>(input.as_list().size()));
    case Value::Kind::kDict:
      return Value::integer(static_cast<int64_t>(input.as_dict().entries.size()));
    default:
      invalid("object of type '" + input.type_name() + "' has no len()");
  }
}

Value first_or_last(const Value& input, bool first) {
  const std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("the sequence is empty");
  return first ? items.front() : items.back();
}

Value join(const Value& input, const CallArgs& args) {
  check_args(args, 2, {"d", "attribute"}, "join");
  const std::string sep = string_arg(args, 0, "d", "", "join");
  const std::string attribute = string_arg(args, 1, "attribute", "", "join");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    const std::string text = (attribute.empty() ? item : get_path(item, attribute)).str();
    check_string_size(out.size() + (first ? 0 : sep.size()) + text.size());
    if (!first) out += sep;
    out += text;
    first = false;
  }
  return Value::string(out);
}

Value title(const std::string& s) {
  // Words begin after whitespace, '-', '(', '{', '[' or '<'.
  std::string out = s;
  bool at_word_start = true;
  for (char& c : out) {
    const bool boundary = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' ||
                          c == '{' || c == '[' || c == '<';
    if (boundary) {
      at_word_start = true;
      continue;
    }
    c = static_cast<char>(at_word_start ? std::toupper(static_cast<unsigned char>(c))
                                        : std::tolower(static_cast<unsigned char>(c)));
    at_word_start = false;
  }
  return Value::string(out);
}

// Python's float() of a string: strict, surrounding whitespace allowed.
bool parse_float(const std::string& text, double* out) {
  const std::string s = strip(text, nullptr, true, true);
  // strtod also reads hexadecimal ("0x1A"), which Python's float() refuses.
  if (s.empty() || s.find_first_of("xX") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

Value to_int(const Value& input, const CallArgs& args) {
  check_args(args, 2, {"default", "base"}, "int");
  const Value* def = args.get(0, "default");
  const Value fallback = def != nullptr ? *def : Value::integer(0);
  const int64_t base = int_arg(args, 1, "base", 10, "int");
  if (input.is_int()) return input;
  if (input.is_bool()) return Value::integer(input.as_bool() ? 1 : 0);
  if (input.is_float()) {
    if (!std::isfinite(input.as_double())) return fallback;
    return Value::integer(static_cast<int64_t>(std::trunc(input.as_double())));
  }
  if (!input.is_string()) return fallback;
  std::string s = strip(input.as_string(), nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (!s.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, static_cast<int>(base));
    if (end == s.c_str() + s.size() && errno == 0) return Value::integer(v);
  }
  double d = 0.0;
  if (parse_float(input.as_string(), &d) && std::isfinite(d)) {
    return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  return fallback;
}

Value to_float(const Value& input, const CallArgs& args) {
  check_args(args, 1, {"default"}, "float");
  const Value* def = args.get(0, "default");
  const Value fallback = def != nullptr ? *def : Value::floating(0.0);
  if (input.is_number()) return Value::floating(input.as_double());
  double d = 0.0;
  if (input.is_string() && parse_float(input.as_string(), &d)) return Value::floating(d);
  return fallback;
}

Value round(const Value& input, const CallArgs& args) {
  check_args(args, 2, {"precision", "method"}, "round");
  const int64_t precision = int_arg(args, 0, "precision", 0, "round");
  const std::string method = string_arg(args, 1, "method", "common", "round");
  if (!input.is_number()) invalid("round: expected a number, not '" + input.type_name() + "'");
  if (method == "common" && !input.is_float())
    return input.is_bool() ? Value::integer(input.as_bool()) : input;
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = input.as_double() * scale;
  double r = 0.0;
  if (method == "common") {
    r = std::nearbyint(x);  // half to even, as Python's round()
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    invalid("round: method must be 'common', 'ceil' or 'floor'");
  }
  return Value::floating(r / scale);
}

Value indent(const Value& input, const CallArgs& args) {
  check_args(args, 3, {"width", "first", "blank"}, "indent");
  const Value* width = args.get(0, "width");
  std::string pad(4, ' ');
  if (width != nullptr && width->is_string()) {
    pad = width->as_string();
  } else if (width != nullptr) {
    const int64_t n = std::max<int64_t>(0, int_arg(args, 0, "width", 4, "indent"));
    check_string_size(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 40)));
    pad = std::string(static_cast<size_t>(n), ' ');
  }
  const bool first = bool_arg(args, 1, "first", false);
  const bool blank = bool_arg(args, 2, "blank", false);
  const std::vector<std::string> lines = split_lines(input.str() + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool indent_line = (i > 0 || first) && (blank || !lines[i].empty());
    out += (indent_line ? pad : "") + lines[i];
  }
  return Value::string(out);
}

Value escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::string(out);
}

Value unique(const Value& input, const CallArgs& args) {
  check_args(args, 2, {"case_sensitive", "attribute"}, "unique");
  const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
  const std::string attribute = string_arg(args, 1, "attribute", "", "unique");
  List out;
  std::vector<Value> seen;
  for (const Value& item : iterate(input)) {
    const Value key =
        sort_key(attribute.empty() ? item : get_path(item, attribute), case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); }))
      continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value dictsort(const Value& input, const CallArgs& args) {
  check_args(args, 3, {"case_sensitive", "by", "reverse"}, "dictsort");
  if (!input.is_dict()) invalid("dictsort: expected a dict, not '" + input.type_name() + "'");
  const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
  const std::string by = string_arg(args, 1, "by", "key", "dictsort");
  if (by != "key" && by != "value") invalid("dictsort: 'by' must be 'key' or 'value'");
  std::vector<Value> pairs;
  for (const auto& [k, v] : input.as_dict().entries)
    pairs.push_back(Value::list({Value::string(k), v}));
  return Value::list(sorted(std::move(pairs), bool_arg(args, 2, "reverse", false), case_sensitive,
                            by == "key" ? "0" : "1"));
}

// select / reject: keep the items a test passes (or fails).
Value select(Renderer& r, const Value& input, const CallArgs& args, bool keep, bool by_attribute) {
  const std::string fn = std::string(keep ? "select" : "reject") + (by_attribute ? "attr" : "");
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      invalid(fn + "() needs an attribute name");
    }
    attribute = args.positional[next++].as_string();
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) invalid(fn + "(): the test name must be a string");
    test = args.positional[next++].as_string();
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next),
                              args.positional.end());
  test_args.keywords = args.keywords;
  List out;
  for (const Value& item : iterate(input)) {
    const Value subject = by_attribute ? get_path(item, attribute) : item;
    const bool passed = test.empty() ? subject.truthy() : r.test(test, subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map(Renderer& r, const Value& input, const CallArgs& args) {
  List out;
  for (const auto& [k, v] : args.keywords) {
    if (k != "attribute" && k != "default")
      unsupported("map() got an unsupported keyword argument '" + k + "'");
  }
  const Value* attribute = args.get(99, "attribute");
  if (attribute != nullptr) {
    const Value* def = args.get(99, "default");
    for (const Value& item : iterate(input)) {
      Value v = get_path(item, attribute->str());
      out.push_back(v.is_undefined() && def != nullptr ? *def : v);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    invalid("map() needs a filter name or attribute=");
  }
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  for (const Value& item : iterate(input))
    out.push_back(r.filter(args.positional[0].as_string(), item, filter_args));
  return Value::list(std::move(out));
}

Value sum(const Value& input, const CallArgs& args) {
  check_args(args, 2, {"attribute", "start"}, "sum");
  const std::string attribute = string_arg(args, 0, "attribute", "", "sum");
  const Value* start = args.get(1, "start");
  Value total = start != nullptr ? *start : Value::integer(0);
  for (const Value& item : iterate(input)) {
    total = binary_op("+", total, attribute.empty() ? item : get_path(item, attribute));
  }
  return total;
}

Value min_max(const Value& input, const CallArgs& args, bool want_max) {
  check_args(args, 2, {"case_sensitive", "attribute"}, want_max ? "max" : "min");
  const std::vector<Value> items =
      sorted(iterate(input), false, bool_arg(args, 0, "case_sensitive", false),
             string_arg(args, 1, "attribute", "", "max"));
  if (items.empty()) return Value::undefined("no items: the sequence is empty");
  return want_max ? items.back() : items.front();
}

}  // namespace

Value apply_filter(Renderer& r, const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "default" || name == "d") {
    check_args(args, 2, {"default_value", "boolean"}, name);
    const Value* def = args.get(0, "default_value");
    const bool use_default =
        input.is_undefined() || (bool_arg(args, 1, "boolean", false) && !input.truthy());
    if (!use_default) return input;
    return def != nullptr ? *def : Value::string("");
  }
  if (name == "length" || name == "count") return length(input);
  if (name == "items") {
    if (input.is_undefined()) return Value::list();
    if (!input.is_dict()) invalid("items: expected a dict, not '" + input.type_name() + "'");
    return call_method(input, "items", {});
  }
  if (name == "list") return Value::list(iterate(input));
  if (name == "first" || name == "last") return first_or_last(input, name == "first");
  if (name == "join") return join(input, args);
  if (name == "map") return map(r, input, args);
  if (name == "select" || name == "reject") return select(r, input, args, name == "select", false);
  if (name == "selectattr" || name == "rejectattr")
    return select(r, input, args, name == "selectattr", true);
  if (name == "unique") return unique(input, args);
  if (name == "sort") {
    check_args(args, 3, {"reverse", "case_sensitive", "attribute"}, name);
    return Value::list(sorted(iterate(input), bool_arg(args, 0, "reverse", false),
                              bool_arg(args, 1, "case_sensitive", false),
                              string_arg(args, 2, "attribute", "", name)));
  }
  if (name == "dictsort") return dictsort(input, args);
  if (name == "reverse") {
    if (input.is_string()) return slice(input, std::nullopt, std::nullopt, -1);
    std::vector<Value> items = iterate(input);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "sum") return sum(input, args);
  if (name == "max" || name == "min") return min_max(input, args, name == "max");
  if (name == "attr") {
    check_args(args, 1, {}, name);
    return get_attr(input, string_arg(args, 0, "name", "", name));
  }
  if (name == "tojson") return tojson(input, args);
  if (name == "int") return to_int(input, args);
  if (name == "float") return to_float(input, args);
  if (name == "abs") {
    if (input.is_float()) return Value::floating(std::fabs(input.as_double()));
    if (input.is_int() || input.is_bool()) {
      const int64_t v = input.is_bool() ? input.as_bool() : input.as_int();
      return Value::integer(v < 0 ? -v : v);
    }
    invalid("bad operand type for abs(): '" + input.type_name() + "'");
  }
  if (name == "round") return round(input, args);
  if (name == "safe") return input;
  // The string filters read str(), which is "" for undefined.
  if (name == "string") return Value::string(input.str());
  if (name == "trim") return trim(input, args);
  if (name == "upper") return Value::string(ascii_upper(input.str()));
  if (name == "lower") return Value::string(ascii_lower(input.str()));
  if (name == "capitalize") return Value::string(capitalize(input.str()));
  if (name == "title") return title(input.str());
  if (name == "replace") {
    check_args(args, 3, {"count"}, name);
    return Value::string(replace_all(input.str(), string_arg(args, 0, "old", "", name),
                                     string_arg(args, 1, "new", "", name),
                                     int_arg(args, 2, "count", -1, name)));
  }
  if (name == "indent") return indent(input, args);
  if (name == "escape" || name == "e") return escape(input.str());
  unsupported("unsupported filter '" + name + "'");
}

}  // namespace pvllm::chat
