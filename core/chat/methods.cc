// Methods of strings, lists and dicts, as Python has them. Methods that
// would change a list or dict are refused: transformers renders chat
// templates in Jinja's immutable sandbox, which refuses them too.
#include <cctype>
#include <string>
#include <vector>

#include "core/chat/builtins.h"
#include "core/chat/error.h"
#include "core/chat/limits.h"
#include "core/chat/operators.h"

namespace pvllm::chat {

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string replace_all(const std::string& s, const std::string& old, const std::string& with,
                        int64_t count) {
  if (old.empty()) {
    // Python inserts `with` around every character.
    std::string out;
    int64_t done = 0;
    for (const std::string& c : split_code_points(s)) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out += c;
      check_string_size(out.size());
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += with;
    check_string_size(out.size());
    pos = hit + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::vector<std::string> split_lines(const std::string& s, bool keep_ends) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    size_t end = i + 1;
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') end = i + 2;
    lines.push_back(s.substr(start, (keep_ends ? end : i) - start));
    start = end;
    i = end - 1;
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return lines;
}

namespace {

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

Value string_list(const std::vector<std::string>& parts) {
  List out;
  for (const std::string& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

Value split(const std::string& s, const CallArgs& args, bool from_right) {
  const std::string fn = from_right ? "rsplit" : "split";
  check_args(args, 2, {"sep", "maxsplit"}, fn);
  const Value* sep = args.get(0, "sep");
  const int64_t maxsplit = int_arg(args, 1, "maxsplit", -1, fn);
  std::vector<std::string> parts;
  if (sep == nullptr || sep->is_none()) {
    // Runs of whitespace; no empty strings.
    std::vector<std::pair<size_t, size_t>> words;
    for (size_t i = 0; i < s.size();) {
      while (i < s.size() && is_ascii_space(s[i])) ++i;
      if (i >= s.size()) break;
      size_t j = i;
      while (j < s.size() && !is_ascii_space(s[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
      for (auto [b, e] : words) parts.push_back(s.substr(b, e - b));
    } else if (!from_right) {
      for (int64_t k = 0; k < maxsplit; ++k)
        parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      // Python keeps the remainder's trailing whitespace ...
      parts.push_back(s.substr(words[maxsplit].first));
    } else {
      // ... and, splitting from the right, its leading whitespace.
      const size_t first_kept = words.size() - static_cast<size_t>(maxsplit);
      parts.push_back(s.substr(0, words[first_kept - 1].second));
      for (size_t k = first_kept; k < words.size(); ++k)
        parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
    return string_list(parts);
  }
  if (!sep->is_string()) invalid(fn + "(): sep must be a string or None");
  const std::string& d = sep->as_string();
  if (d.empty()) invalid("empty separator");
  std::vector<size_t> hits;
  for (size_t pos = s.find(d); pos != std::string::npos; pos = s.find(d, pos + d.size()))
    hits.push_back(pos);
  if (maxsplit >= 0 && hits.size() > static_cast<size_t>(maxsplit)) {
    if (from_right) {
      // The rightmost hits, found from the right (they may differ when d overlaps itself; rare).
      hits.erase(hits.begin(), hits.end() - maxsplit);
    } else {
      hits.resize(static_cast<size_t>(maxsplit));
    }
  }
  size_t start = 0;
  for (size_t h : hits) {
    parts.push_back(s.substr(start, h - start));
    start = h + d.size();
  }
  parts.push_back(s.substr(start));
  return string_list(parts);
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix, const std::string& fn) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      invalid(fn + "() takes a string or a tuple of strings, not '" + a.type_name() + "'");
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

// The argument a method cannot do without.
const Value& required(const CallArgs& args, size_t index, const std::string& name,
                      const std::string& fn) {
  const Value* v = args.get(index, name);
  if (v == nullptr) invalid(fn + "() is missing its argument '" + name + "'");
  return *v;
}

template <typename Pred>
Value all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return Value::boolean(false);
  for (char c : s) {
    if (!pred(static_cast<unsigned char>(c))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

Value string_method(const std::string& s, const std::string& name, const CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    check_args(args, 1, {"chars"}, name);
    return Value::string(strip(s, args.get(0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split") return split(s, args, false);
  if (name == "rsplit") return split(s, args, true);
  if (name == "splitlines") {
    check_args(args, 1, {"keepends"}, name);
    return string_list(split_lines(s, bool_arg(args, 0, "keepends", false)));
  }
  if (name == "startswith" || name == "endswith") {
    check_args(args, 1, {}, name);
    return Value::boolean(
        affix_matches(s, required(args, 0, "prefix", name), name == "startswith", name));
  }
  if (name == "upper") return Value::string(ascii_upper(s));
  if (name == "lower") return Value::string(ascii_lower(s));
  if (name == "capitalize") return Value::string(capitalize(s));
  if (name == "title") {
    std::string out = s;
    bool previous_is_letter = false;
    for (char& c : out) {
      const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0;
      if (letter) c = static_cast<char>(previous_is_letter ? std::tolower(c) : std::toupper(c));
      previous_is_letter = letter;
    }
    return Value::string(out);
  }
  if (name == "replace") {
    check_args(args, 3, {"count"}, name);
    const std::string old = string_arg(args, 0, "old", "", name);
    const std::string with = string_arg(args, 1, "new", "", name);
    required(args, 1, "new", name);
    return Value::string(replace_all(s, old, with, int_arg(args, 2, "count", -1, name)));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    check_args(args, 1, {}, name);
    const Value& sub = required(args, 0, "sub", name);
    if (!sub.is_string()) invalid(name + "() takes a string, not '" + sub.type_name() + "'");
    const std::string& x = sub.as_string();
    if (name == "count") {
      if (x.empty()) return Value::integer(static_cast<int64_t>(split_code_points(s).size()) + 1);
      int64_t n = 0;
      for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
      return Value::integer(n);
    }
    const size_t byte = name[0] == 'r' ? s.rfind(x) : s.find(x);
    if (byte == std::string::npos) {
      if (name == "index" || name == "rindex") invalid("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(split_code_points(s.substr(0, byte)).size()));
  }
  if (name == "join") {
    check_args(args, 1, {}, name);
    std::string out;
    bool first = true;
    for (const Value& item : iterate(required(args, 0, "iterable", name))) {
      if (!item.is_string()) invalid("join() expects strings, found '" + item.type_name() + "'");
      if (!first) out += s;
      out += item.as_string();
      first = false;
    }
    return Value::string(out);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    check_args(args, 1, {}, name);
    const std::string x = string_arg(args, 0, "affix", "", name);
    const bool prefix = name == "removeprefix";
    if (affix_matches(s, Value::string(x), prefix, name)) {
      return Value::string(prefix ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    }
    return Value::string(s);
  }
  if (name == "isdigit") return all_chars(s, [](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all_chars(s, [](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all_chars(s, [](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "isspace")
    return all_chars(s, [](unsigned char c) { return is_ascii_space(static_cast<char>(c)); });
  if (name == "isupper" || name == "islower") {
    bool cased = false;
    for (char c : s) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (std::isupper(u) || std::islower(u)) cased = true;
      if (name == "isupper" ? std::islower(u) : std::isupper(u)) return Value::boolean(false);
    }
    return Value::boolean(cased);
  }
  unsupported("string method '" + name + "' is not supported");
}

Value list_method(const List& list, const std::string& name, const CallArgs& args) {
  if (name == "index" || name == "count") {
    check_args(args, 1, {}, name);
    const Value& x = required(args, 0, "value", name);
    int64_t n = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].equals(x)) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") invalid(x.repr() + " is not in list");
    return Value::integer(n);
  }
  static const char* const kMutating[] = {"append", "extend", "insert", "pop",
                                          "remove", "clear",  "sort",   "reverse"};
  for (const char* m : kMutating) {
    if (name == m) {
      unsupported("list method '" + name +
                  "' would change a value; chat templates render immutably");
    }
  }
  unsupported("list method '" + name + "' is not supported");
}

Value dict_method(const Dict& dict, const std::string& name, const CallArgs& args) {
  if (name == "items" || name == "keys" || name == "values") {
    check_args(args, 0, {}, name);
    List out;
    for (const auto& [k, v] : dict.entries) {
      if (name == "items") out.push_back(Value::list({Value::string(k), v}));
      if (name == "keys") out.push_back(Value::string(k));
      if (name == "values") out.push_back(v);
    }
    return Value::list(std::move(out));
  }
  if (name == "get") {
    check_args(args, 2, {}, name);
    const Value& key = required(args, 0, "key", name);
    const Value* def = args.get(1, "default");
    const Value* found = key.is_string() ? dict.find(key.as_string()) : nullptr;
    if (found != nullptr) return *found;
    return def != nullptr ? *def : Value::none();
  }
  static const char* const kMutating[] = {"update", "pop", "popitem", "setdefault", "clear"};
  for (const char* m : kMutating) {
    if (name == m) {
      unsupported("dict method '" + name +
                  "' would change a value; chat templates render immutably");
    }
  }
  unsupported("dict method '" + name + "' is not supported");
}

}  // namespace

Value call_method(const Value& obj, const std::string& name, const CallArgs& args) {
  if (obj.is_string()) return string_method(obj.as_string(), name, args);
  if (obj.is_list()) return list_method(obj.as_list(), name, args);
  if (obj.is_dict()) return dict_method(obj.as_dict(), name, args);
  invalid("'" + obj.type_name() + "' object has no method '" + name + "'");
}

}  // namespace pvllm::chat
