// Value: what a chat template computes with. The model follows Python, as
// templates are written for Python's Jinja: undefined, None, bools, ints
// (64-bit) and floats kept apart, strings (UTF-8, indexed by code point),
// lists, dicts with string keys in insertion order, namespace() objects and
// callables (builtins and macros). Lists, dicts and namespaces are shared
// by reference, as in Python, so `set ns.x = ...` changes the namespace
// every scope sees.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pvllm::chat {

class Value;
class Renderer;  // core/chat/renderer.h

using List = std::vector<Value>;

// A dict (or a namespace's attributes): string keys in insertion order.
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  // Replaces the value of an existing key, else appends.
  void set(const std::string& key, Value value);
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // The argument `name` at position `index`, else the keyword, else null.
  const Value* get(size_t index, const std::string& name) const;
};

// Something a template can call: a builtin global or a macro.
struct Callable {
  std::string name;
  std::function<Value(Renderer&, const CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() = default;  // undefined
  static Value undefined(std::string name = "");
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value list(List items = {});
  static Value dict(Dict d = {});
  static Value ns(Dict attributes);
  static Value callable(std::string name, std::function<Value(Renderer&, const CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (Python's numbers.Number counts bools).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  // An int, float or bool as a double.
  double as_double() const;
  const std::string& as_string() const { return *string_; }
  // Lists, dicts and namespaces: the shared object itself.
  List& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }
  const Callable& as_callable() const { return *callable_; }
  // The name an undefined value was looked up by ("" when unknown).
  const std::string& undefined_name() const { return *string_; }

  // Python's truth value: undefined, None, False, 0, 0.0, "" and empty
  // containers are false.
  bool truthy() const;
  // Python's == (1 == 1.0 == True); undefined equals only undefined.
  bool equals(const Value& other) const;
  // What {{ value }} prints: str() in Python ("None", "True", "1.0",
  // "['a', 1]"); undefined prints "".
  std::string str() const;
  // Python's repr(): strings quoted, containers as str() shows them.
  std::string repr() const;
  // The Python type name for messages ("str", "int", "dict", "undefined").
  std::string type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0.0;
  std::shared_ptr<std::string> string_ = std::make_shared<std::string>();
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> callable_;
};

// Python's repr() of a float: the shortest text that reads back as the same
// double, with ".0" on integral values and an exponent outside [1e-4, 1e16).
std::string format_float(double d);

// UTF-8 strings by code point, for len(), indexing and slicing.
std::vector<std::string> split_code_points(const std::string& s);

}  // namespace pvllm::chat
