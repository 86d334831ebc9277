// Operators and lookups (see operators.h).
#include "core/chat/operators.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/chat/error.h"
#include "core/chat/limits.h"

namespace pvllm::chat {
namespace {

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b) {
  invalid("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
          b.type_name() + "'");
}

int64_t int_of(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }
bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }

// a op b for + - *, failing on overflow (Python's ints do not overflow;
// a prompt never needs 64 bits).
int64_t checked(const std::string& op, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflow = op == "+"   ? __builtin_add_overflow(a, b, &r)
                        : op == "-" ? __builtin_sub_overflow(a, b, &r)
                                    : __builtin_mul_overflow(a, b, &r);
  if (overflow) invalid("integer overflow in " + op);
  return r;
}

Value repeat(const Value& seq, int64_t n) {
  n = std::max<int64_t>(n, 0);
  const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
  if (unit > 0 && static_cast<uint64_t>(n) > kMaxStringBytes) {
    seq.is_string() ? check_string_size(kMaxStringBytes + 1) : check_list_size(kMaxListItems + 1);
  }
  seq.is_string() ? check_string_size(unit * n) : check_list_size(unit * n);
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(out));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_string_size(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      check_list_size(a.as_list().size() + b.as_list().size());
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, int_of(b));
    if (is_integral(a) && (b.is_string() || b.is_list())) return repeat(b, int_of(a));
  }
  if (op == "%" && a.is_string()) {
    unsupported("string formatting with % is not supported");
  }
  if (!a.is_number() || !b.is_number()) type_error(op, a, b);
  const bool ints = is_integral(a) && is_integral(b);
  if (ints && op != "/") {
    const int64_t x = int_of(a);
    const int64_t y = int_of(b);
    if (op == "+" || op == "-" || op == "*") return Value::integer(checked(op, x, y));
    if (op == "//" || op == "%") {
      if (y == 0) invalid("integer division or modulo by zero");
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y >= 0) {
        int64_t result = 1;
        for (int64_t i = 0; i < y; ++i) result = checked("*", result, x);
        return Value::integer(result);
      }
      return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
  }
  const double x = a.as_double();
  const double y = b.as_double();
  if (op == "+") return Value::floating(x + y);
  if (op == "-") return Value::floating(x - y);
  if (op == "*") return Value::floating(x * y);
  if (op == "**") return Value::floating(std::pow(x, y));
  if (y == 0.0) invalid(op == "/" ? "division by zero" : "float modulo or floor division by zero");
  if (op == "/") return Value::floating(x / y);
  if (op == "//") return Value::floating(std::floor(x / y));
  if (op == "%") {
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value::floating(m);
  }
  unsupported("unknown operator '" + op + "'");
}

bool contains(const Value& container, const Value& item) {
  if (container.is_undefined()) fail_undefined(container);
  if (container.is_string()) {
    if (!item.is_string()) {
      invalid("'in <string>' requires string as left operand, not " + item.type_name());
    }
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.as_list()) {
      if (v.equals(item)) return true;
    }
    return false;
  }
  if (container.is_dict() || container.is_namespace()) {
    return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
  }
  invalid("argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace

void fail_undefined(const Value& v) {
  invalid(v.undefined_name().empty() ? "a value is undefined" : v.undefined_name());
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return int_of(a) < int_of(b);
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].equals(y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  invalid("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() +
          "'");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value::boolean(a.equals(b));
  if (op == "!=") return Value::boolean(!a.equals(b));
  if (op == "<") return Value::boolean(less_than(a, b));
  if (op == ">") return Value::boolean(less_than(b, a));
  if (op == "<=") return Value::boolean(!less_than(b, a));
  if (op == ">=") return Value::boolean(!less_than(a, b));
  if (op == "in") return Value::boolean(contains(b, a));
  if (op == "not in") return Value::boolean(!contains(b, a));
  if (op == "~") {
    std::string joined = a.str();
    const std::string right = b.str();
    check_string_size(joined.size() + right.size());
    return Value::string(joined + right);
  }
  return arithmetic(op, a, b);
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
  }
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t raw = int_of(key);
    if (obj.is_list()) {
      const int64_t n = static_cast<int64_t>(obj.as_list().size());
      const int64_t i = raw < 0 ? raw + n : raw;
      if (i >= 0 && i < n) return obj.as_list()[static_cast<size_t>(i)];
    } else {
      const std::vector<std::string> chars = split_code_points(obj.as_string());
      const int64_t n = static_cast<int64_t>(chars.size());
      const int64_t i = raw < 0 ? raw + n : raw;
      if (i >= 0 && i < n) return Value::string(chars[static_cast<size_t>(i)]);
    }
    return Value::undefined("'" + obj.type_name() + " object' has no element " +
                            std::to_string(raw));
  }
  if ((obj.is_dict() || obj.is_namespace()) && key.is_string())
    return get_attr(obj, key.as_string());
  return Value::undefined("'" + obj.type_name() + " object' has no element " + key.repr());
}

Value slice(const Value& obj, const std::optional<int64_t>& start,
            const std::optional<int64_t>& stop, const std::optional<int64_t>& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_list() && !obj.is_string())
    invalid("'" + obj.type_name() + "' object is not subscriptable");
  const int64_t s = step.value_or(1);
  if (s == 0) invalid("slice step cannot be zero");
  std::vector<std::string> chars;
  if (obj.is_string()) chars = split_code_points(obj.as_string());
  const int64_t n = obj.is_string() ? static_cast<int64_t>(chars.size())
                                    : static_cast<int64_t>(obj.as_list().size());
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v < 0 ? *v + n : *v;
    if (s > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t lo = clamp(start, s > 0 ? 0 : n - 1);
  const int64_t hi = clamp(stop, s > 0 ? n : -1);
  std::string out_string;
  List out_list;
  for (int64_t i = lo; s > 0 ? i < hi : i > hi; i += s) {
    if (obj.is_string()) {
      out_string += chars[static_cast<size_t>(i)];
    } else {
      out_list.push_back(obj.as_list()[static_cast<size_t>(i)]);
    }
  }
  return obj.is_string() ? Value::string(std::move(out_string)) : Value::list(std::move(out_list));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, unused] : v.as_dict().entries) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (std::string& c : split_code_points(v.as_string()))
        chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default:
      invalid("'" + v.type_name() + "' object is not iterable");
  }
}

namespace {

// Python's str.isspace() for one code point (as UTF-8).
bool is_python_space(const std::string& c) {
  static const char* const kSpaces[] = {" ",
                                        "\t",
                                        "\n",
                                        "\v",
                                        "\f",
                                        "\r",
                                        "\x1c",
                                        "\x1d",
                                        "\x1e",
                                        "\x1f",
                                        "\xc2\x85",
                                        "\xc2\xa0",
                                        "\xe1\x9a\x80",
                                        "\xe2\x80\xa8",
                                        "\xe2\x80\xa9",
                                        "\xe2\x80\xaf",
                                        "\xe2\x81\x9f",
                                        "\xe3\x80\x80"};
  for (const char* s : kSpaces) {
    if (c == s) return true;
  }
  // U+2000..U+200A
  return c.size() == 3 && static_cast<unsigned char>(c[0]) == 0xE2 &&
         static_cast<unsigned char>(c[1]) == 0x80 && static_cast<unsigned char>(c[2]) >= 0x80 &&
         static_cast<unsigned char>(c[2]) <= 0x8A;
}

}  // namespace

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<std::string> set;
  const bool whitespace = chars == nullptr || chars->is_none() || chars->is_undefined();
  if (!whitespace) {
    if (!chars->is_string()) invalid("strip arg must be None or str, not " + chars->type_name());
    set = split_code_points(chars->as_string());
  }
  auto strippable = [&](const std::string& c) {
    if (whitespace) return is_python_space(c);
    for (const std::string& x : set) {
      if (x == c) return true;
    }
    return false;
  };
  const std::vector<std::string> cps = split_code_points(s);
  size_t b = 0;
  size_t e = cps.size();
  if (left) {
    while (b < e && strippable(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strippable(cps[e - 1])) --e;
  }
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

}  // namespace pvllm::chat
