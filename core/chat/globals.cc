// The template's global functions, and the argument helpers every builtin
// uses.
#include <ctime>
#include <string>

#include "core/chat/builtins.h"
#include "core/chat/error.h"

namespace pvllm::chat {
namespace {

// range() longer than this is a runaway template, not a chat prompt.
constexpr int64_t kMaxRange = 1 << 20;

Value range(const CallArgs& args) {
  check_args(args, 3, {}, "range");
  if (args.positional.empty()) invalid("range expected at least 1 argument, got 0");
  for (const Value& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) invalid("range() takes integers, not '" + v.type_name() + "'");
  }
  auto at = [&](size_t i) {
    const Value& v = args.positional[i];
    return v.is_bool() ? int64_t{v.as_bool() ? 1 : 0} : v.as_int();
  };
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = at(0);
  } else {
    start = at(0);
    stop = at(1);
    if (args.positional.size() == 3) step = at(2);
  }
  if (step == 0) invalid("range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) {
      invalid("range() of more than " + std::to_string(kMaxRange) + " items");
    }
    out.push_back(Value::integer(i));
  }
  return Value::list(std::move(out));
}

// namespace(), namespace(dict), namespace(key=value, ...).
Value make_namespace(const CallArgs& args) {
  Dict attributes;
  if (args.positional.size() > 1) invalid("namespace() takes at most one positional argument");
  if (args.positional.size() == 1) {
    if (!args.positional[0].is_dict())
      invalid("namespace() takes a dict, not '" + args.positional[0].type_name() + "'");
    attributes = args.positional[0].as_dict();
  }
  for (const auto& [k, v] : args.keywords) attributes.set(k, v);
  return Value::ns(std::move(attributes));
}

Value raise_exception(const CallArgs& args) {
  const std::string message = args.positional.empty() ? "" : args.positional[0].str();
  TemplateError error(StatusCode::kInvalidArgument, message);
  error.raised_by_template = true;
  throw error;
}

Value strftime_now(const CallArgs& args) {
  check_args(args, 1, {}, "strftime_now");
  const std::string format = string_arg(args, 0, "", "", "strftime_now");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &local);
  if (n == 0 && !format.empty()) invalid("strftime_now: the format gives no text or too much");
  return Value::string(std::string(buf, n));
}

}  // namespace

Dict make_globals() {
  Dict g;
  g.set("range", Value::callable("range", [](Renderer&, const CallArgs& a) { return range(a); }));
  g.set("namespace", Value::callable("namespace", [](Renderer&, const CallArgs& a) {
          return make_namespace(a);
        }));
  g.set("dict", Value::callable("dict", [](Renderer&, const CallArgs& a) {
          // Keywords only: dict(a=1, b=2).
          if (!a.positional.empty()) invalid("dict() takes keyword arguments only");
          Dict d;
          for (const auto& [k, v] : a.keywords) d.set(k, v);
          return Value::dict(std::move(d));
        }));
  g.set("raise_exception", Value::callable("raise_exception", [](Renderer&, const CallArgs& a) {
          return raise_exception(a);
        }));
  g.set("strftime_now", Value::callable("strftime_now", [](Renderer&, const CallArgs& a) {
          return strftime_now(a);
        }));
  return g;
}

void check_args(const CallArgs& args, size_t max_positional,
                std::initializer_list<const char*> allowed, const std::string& fn) {
  if (args.positional.size() > max_positional) {
    invalid(fn + "() takes at most " + std::to_string(max_positional) + " positional arguments, " +
            std::to_string(args.positional.size()) + " given");
  }
  for (const auto& [name, unused] : args.keywords) {
    bool known = false;
    for (const char* a : allowed) known = known || name == a;
    if (!known) unsupported(fn + "() got an unsupported keyword argument '" + name + "'");
  }
}

int64_t int_arg(const CallArgs& args, size_t index, const std::string& name, int64_t def,
                const std::string& fn) {
  const Value* v = args.get(index, name);
  if (v == nullptr || v->is_none()) return def;
  if (v->is_bool()) return v->as_bool() ? 1 : 0;
  if (!v->is_int())
    invalid(fn + "(): '" + name + "' must be an integer, not '" + v->type_name() + "'");
  return v->as_int();
}

bool bool_arg(const CallArgs& args, size_t index, const std::string& name, bool def) {
  const Value* v = args.get(index, name);
  return v == nullptr ? def : v->truthy();
}

std::string string_arg(const CallArgs& args, size_t index, const std::string& name,
                       const std::string& def, const std::string& fn) {
  const Value* v = args.get(index, name);
  if (v == nullptr || v->is_none()) return def;
  if (!v->is_string())
    invalid(fn + "(): '" + name + "' must be a string, not '" + v->type_name() + "'");
  return v->as_string();
}

}  // namespace pvllm::chat
