// Renderer (see renderer.h): statements write text, expressions compute
// values. Each node that fails without a position gets its own attached.
#include "core/chat/renderer.h"

#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/chat/builtins.h"
#include "core/chat/error.h"
#include "core/chat/limits.h"
#include "core/chat/operators.h"

namespace pvllm::chat {
namespace {

// Deeper macro recursion than this is a runaway template.
constexpr int kMaxMacroDepth = 64;

void unpack(const std::vector<std::string>& targets, const Value& item,
            std::unordered_map<std::string, Value>* frame) {
  if (targets.size() == 1) {
    (*frame)[targets[0]] = item;
    return;
  }
  if (!item.is_list()) {
    invalid("cannot unpack a value of type '" + item.type_name() + "' into " +
            std::to_string(targets.size()) + " variables");
  }
  const List& parts = item.as_list();
  if (parts.size() != targets.size()) {
    invalid(std::string(parts.size() > targets.size() ? "too many" : "not enough") +
            " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
            std::to_string(parts.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) (*frame)[targets[i]] = parts[i];
}

// Re-throws `e` positioned at `pos` when it has no position yet.
[[noreturn]] void rethrow_at(const TemplateError& e, SourcePos pos) {
  if (e.has_pos()) throw e;
  TemplateError positioned(e.code(), e.message(), pos);
  positioned.raised_by_template = e.raised_by_template;
  throw positioned;
}

// Whether `v` is or holds (through lists, dicts and namespaces) the
// container `target`. Visits each container once.
bool holds(const Value& v, const Dict* target) {
  std::vector<const Value*> todo = {&v};
  std::unordered_set<const void*> seen;
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    if (x->is_list()) {
      if (!seen.insert(&x->as_list()).second) continue;
      for (const Value& item : x->as_list()) todo.push_back(&item);
    } else if (x->is_dict() || x->is_namespace()) {
      if (&x->as_dict() == target) return true;
      if (!seen.insert(&x->as_dict()).second) continue;
      for (const auto& [key, item] : x->as_dict().entries) todo.push_back(&item);
    }
  }
  return false;
}

}  // namespace

Renderer::Renderer(const Dict& context) {
  auto root = std::make_shared<Frame>();
  for (auto& [name, value] : make_globals().entries) (*root)[name] = value;
  for (const auto& [name, value] : context.entries) (*root)[name] = value;
  frames_.push_back(std::move(root));
}

std::string Renderer::render(const StmtList& body) {
  std::string out;
  if (exec(body, &out) != Flow::kNormal)
    unsupported("{% break %} or {% continue %} outside a loop");
  return out;
}

Value Renderer::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    auto found = (*it)->find(name);
    if (found != (*it)->end()) return found->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

void Renderer::assign(const std::string& name, Value v) { (*frames_.back())[name] = std::move(v); }

void Renderer::tick() {
  if (++steps_ > kMaxRenderSteps) {
    invalid("the template ran more than " + std::to_string(kMaxRenderSteps) +
            " steps (a runaway loop)");
  }
}

void Renderer::emit(std::string* out, const std::string& text) {
  check_string_size(out->size() + text.size());
  *out += text;
}

Renderer::Flow Renderer::exec(const StmtList& body, std::string* out) {
  for (const auto& s : body) {
    const Flow flow = exec(*s, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Stmt& s, std::string* out) {
  try {
    tick();
    switch (s.kind) {
      case StmtKind::kText:
        emit(out, s.text);
        return Flow::kNormal;
      case StmtKind::kPrint:
        emit(out, eval(*s.expr).str());
        return Flow::kNormal;
      case StmtKind::kIf:
        return exec(eval(*s.expr).truthy() ? s.body : s.else_body, out);
      case StmtKind::kFor:
        return exec_for(s, out);
      case StmtKind::kSet:
        exec_set(s, out);
        return Flow::kNormal;
      case StmtKind::kMacro:
        assign(s.text, make_macro(s));
        return Flow::kNormal;
      case StmtKind::kBlock: {
        if (!s.expr) return exec(s.body, out);
        std::string inner;
        if (exec(s.body, &inner) != Flow::kNormal) {
          unsupported("{% break %} or {% continue %} inside a filter block");
        }
        emit(out, eval_filter_chain(*s.expr, Value::string(std::move(inner))).str());
        return Flow::kNormal;
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
    }
  } catch (const TemplateError& e) {
    rethrow_at(e, s.pos);
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec_for(const Stmt& s, std::string* out) {
  std::vector<Value> items = iterate(eval(*s.expr));
  if (s.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      frames_.push_back(std::make_shared<Frame>());
      unpack(s.targets, item, frames_.back().get());
      const bool keep = eval(*s.filter).truthy();
      frames_.pop_back();
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    tick();
    Dict loop;
    loop.set("index", Value::integer(i + 1));
    loop.set("index0", Value::integer(i));
    loop.set("revindex", Value::integer(n - i));
    loop.set("revindex0", Value::integer(n - i - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == n - 1));
    loop.set("length", Value::integer(n));
    loop.set("depth", Value::integer(1));
    loop.set("depth0", Value::integer(0));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    loop.set("cycle", Value::callable("loop.cycle", [i](Renderer&, const CallArgs& args) {
               if (args.positional.empty()) invalid("loop.cycle() needs at least one argument");
               return args.positional[static_cast<size_t>(i) % args.positional.size()];
             }));
    auto frame = std::make_shared<Frame>();
    (*frame)["loop"] = Value::dict(std::move(loop));
    unpack(s.targets, items[i], frame.get());
    frames_.push_back(std::move(frame));
    Flow flow;
    try {
      flow = exec(s.body, out);
    } catch (...) {
      frames_.pop_back();
      throw;
    }
    frames_.pop_back();
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Renderer::exec_set(const Stmt& s, std::string* out) {
  Value value;
  if (s.expr) {
    value = eval(*s.expr);
  } else {
    std::string inner;
    if (exec(s.body, &inner) != Flow::kNormal) {
      unsupported("{% break %} or {% continue %} inside a block set");
    }
    value = Value::string(std::move(inner));
  }
  if (!s.text.empty()) {  // set ns.attr = value
    const Value target = lookup(s.targets[0]);
    if (!target.is_namespace()) {
      invalid("cannot assign attribute '" + s.text + "' of '" + s.targets[0] +
              "': it is not a namespace()");
    }
    // Values are shared, reference-counted: a namespace holding itself
    // would never be freed (found by fuzz_chat_template as a leak).
    if (holds(value, &target.as_dict())) {
      unsupported("'" + s.targets[0] + "." + s.text + "' would make namespace '" + s.targets[0] +
                  "' hold itself");
    }
    target.as_dict().set(s.text, std::move(value));
    return;
  }
  if (s.targets.size() == 1) {
    assign(s.targets[0], std::move(value));
    return;
  }
  Frame unpacked;
  unpack(s.targets, value, &unpacked);
  for (auto& [name, v] : unpacked) assign(name, std::move(v));
}

Value Renderer::make_macro(const Stmt& s) {
  const Stmt* macro = &s;  // the tree outlives every render
  return Value::callable(
      s.text, [macro](Renderer& r, const CallArgs& args) { return r.call_macro(*macro, args); });
}

// A macro runs in a frame of its own over the root frame.
Value Renderer::call_macro(const Stmt& macro, const CallArgs& args) {
  if (args.positional.size() > macro.params.size()) {
    invalid("macro '" + macro.text + "' takes " + std::to_string(macro.params.size()) +
            " arguments, " + std::to_string(args.positional.size()) + " given");
  }
  for (const auto& [name, value] : args.keywords) {
    bool known = false;
    for (const auto& p : macro.params) known = known || p.first == name;
    if (!known) invalid("macro '" + macro.text + "' has no parameter '" + name + "'");
  }
  if (macro_depth_ >= kMaxMacroDepth) invalid("macro '" + macro.text + "' recurses too deeply");
  std::vector<std::shared_ptr<Frame>> saved = {frames_.front(), std::make_shared<Frame>()};
  saved.swap(frames_);
  ++macro_depth_;
  std::string out;
  try {
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [name, def] = macro.params[i];
      const Value* given = args.get(i, name);
      assign(name, given != nullptr ? *given
                   : def            ? eval(*def)
                                    : Value::undefined("'" + name + "' is undefined"));
    }
    if (exec(macro.body, &out) != Flow::kNormal) {
      unsupported("{% break %} or {% continue %} outside a loop");
    }
  } catch (...) {
    --macro_depth_;
    frames_.swap(saved);
    throw;
  }
  --macro_depth_;
  frames_.swap(saved);
  return Value::string(std::move(out));
}

Value Renderer::call(const Value& callee, const CallArgs& args) {
  if (!callee.is_callable()) invalid("'" + callee.type_name() + "' object is not callable");
  return callee.as_callable().fn(*this, args);
}

Value Renderer::filter(const std::string& name, const Value& input, const CallArgs& args) {
  return apply_filter(*this, name, input, args);
}

bool Renderer::test(const std::string& name, const Value& input, const CallArgs& args) {
  return apply_test(*this, name, input, args);
}

CallArgs Renderer::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.items.size(); ++i) args.positional.push_back(eval(*e.items[i]));
  for (const auto& [name, value] : e.kwargs) args.keywords.emplace_back(name, eval(*value));
  return args;
}

Value Renderer::eval_filter_chain(const Expr& e, const Value& input) {
  const Expr& inner = *e.items[0];
  const Value value = inner.kind == ExprKind::kFilter ? eval_filter_chain(inner, input) : input;
  return filter(e.name, value, eval_args(e, 1));
}

Value Renderer::eval_call(const Expr& e) {
  const Expr& callee = *e.items[0];
  if (callee.kind == ExprKind::kAttr) {
    const Value obj = eval(*callee.items[0]);
    if (obj.is_undefined()) fail_undefined(obj);
    // A function the dict holds (loop.cycle) before the dict's methods.
    const Value* member = obj.is_dict() ? obj.as_dict().find(callee.name) : nullptr;
    if (member != nullptr && member->is_callable()) return call(*member, eval_args(e, 1));
    if (obj.is_string() || obj.is_list() || obj.is_dict()) {
      return call_method(obj, callee.name, eval_args(e, 1));
    }
    const Value fn = get_attr(obj, callee.name);
    if (fn.is_undefined()) {
      invalid("'" + obj.type_name() + "' object has no method '" + callee.name + "'");
    }
    return call(fn, eval_args(e, 1));
  }
  const Value fn = eval(callee);
  if (fn.is_undefined() && callee.kind == ExprKind::kName) {
    unsupported("unknown function '" + callee.name + "'");
  }
  if (fn.is_undefined()) fail_undefined(fn);
  return call(fn, eval_args(e, 1));
}

Value Renderer::eval(const Expr& e) {
  try {
    tick();
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName:
        return lookup(e.name);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        List items;
        for (const auto& item : e.items) items.push_back(eval(*item));
        return Value::list(std::move(items));
      }
      case ExprKind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value key = eval(*e.items[i]);
          if (!key.is_string()) unsupported("dict keys other than strings are not supported");
          d.set(key.as_string(), eval(*e.items[i + 1]));
        }
        return Value::dict(std::move(d));
      }
      case ExprKind::kAttr:
        return get_attr(eval(*e.items[0]), e.name);
      case ExprKind::kSubscript: {
        const Value obj = eval(*e.items[0]);
        return get_item(obj, eval(*e.items[1]));
      }
      case ExprKind::kSlice: {
        const Value obj = eval(*e.items[0]);
        std::optional<int64_t> bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (!e.items[i + 1]) continue;
          const Value b = eval(*e.items[i + 1]);
          if (b.is_none()) continue;
          if (!b.is_int()) invalid("slice indices must be integers or None");
          bounds[i] = b.as_int();
        }
        return slice(obj, bounds[0], bounds[1], bounds[2]);
      }
      case ExprKind::kCall:
        return eval_call(e);
      case ExprKind::kFilter: {
        const Value input = eval(*e.items[0]);
        return filter(e.name, input, eval_args(e, 1));
      }
      case ExprKind::kTest: {
        const Value input = eval(*e.items[0]);
        return Value::boolean(test(e.name, input, eval_args(e, 1)) != e.negated);
      }
      case ExprKind::kUnary: {
        const Value v = eval(*e.items[0]);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.is_undefined()) fail_undefined(v);
        if (!v.is_number())
          invalid("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v.is_bool() ? Value::integer(v.as_bool() ? 1 : 0) : v;
        if (v.is_float()) return Value::floating(-v.as_double());
        return Value::integer(-(v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int()));
      }
      case ExprKind::kBinary: {
        const Value left = eval(*e.items[0]);
        if (e.name == "and") return left.truthy() ? eval(*e.items[1]) : left;
        if (e.name == "or") return left.truthy() ? left : eval(*e.items[1]);
        return binary_op(e.name, left, eval(*e.items[1]));
      }
      case ExprKind::kTernary:
        if (eval(*e.items[1]).truthy()) return eval(*e.items[0]);
        return e.items[2] ? eval(*e.items[2]) : Value::undefined("the ternary has no else");
    }
  } catch (const TemplateError& err) {
    rethrow_at(err, e.pos);
  }
  unsupported("unknown expression");
}

}  // namespace pvllm::chat
