// Tests: `value is name(args)`, as Jinja defines them. Anything not here is
// UNSUPPORTED by name.
#include <cctype>
#include <string>

#include "core/chat/builtins.h"
#include "core/chat/error.h"
#include "core/chat/operators.h"

namespace pvllm::chat {
namespace {

const Value& operand(const CallArgs& args, const std::string& test) {
  if (args.positional.empty()) invalid("the test '" + test + "' needs an argument");
  return args.positional[0];
}

bool all_cased(const std::string& s, bool upper) {
  bool cased = false;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (upper ? std::islower(u) : std::isupper(u)) return false;
    cased = cased || std::isalpha(u);
  }
  return cased;
}

}  // namespace

bool apply_test(Renderer& r, const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "boolean") return input.is_bool();
  if (name == "true") return input.is_bool() && input.as_bool();
  if (name == "false") return input.is_bool() && !input.as_bool();
  if (name == "integer") return input.is_int();
  if (name == "float") return input.is_float();
  if (name == "number") return input.is_number();
  if (name == "string") return input.is_string();
  if (name == "mapping") return input.is_dict();
  if (name == "iterable")
    return input.is_string() || input.is_list() || input.is_dict() || input.is_undefined();
  if (name == "sequence") return input.is_string() || input.is_list() || input.is_dict();
  if (name == "callable") return input.is_callable();
  if (name == "lower" || name == "upper")
    return input.is_string() && all_cased(input.as_string(), name == "upper");
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (input.is_undefined()) fail_undefined(input);
    if (!input.is_int() && !input.is_bool()) invalid("the test '" + name + "' needs an integer");
    const int64_t v = input.is_bool() ? input.as_bool() : input.as_int();
    if (name == "even") return v % 2 == 0;
    if (name == "odd") return v % 2 != 0;
    const Value& d = operand(args, name);
    if (!d.is_int() || d.as_int() == 0) invalid("divisibleby needs a non-zero integer");
    return v % d.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return input.equals(operand(args, name));
  if (name == "ne" || name == "!=") return !input.equals(operand(args, name));
  if (name == "lt" || name == "lessthan" || name == "<")
    return less_than(input, operand(args, name));
  if (name == "gt" || name == "greaterthan" || name == ">")
    return less_than(operand(args, name), input);
  if (name == "le" || name == "<=") return !less_than(operand(args, name), input);
  if (name == "ge" || name == ">=") return !less_than(input, operand(args, name));
  if (name == "in") return binary_op("in", input, operand(args, name)).as_bool();
  if (name == "sameas") {
    const Value& other = operand(args, name);
    if (input.is_none() || input.is_bool() || other.is_none() || other.is_bool()) {
      return input.kind() == other.kind() && input.equals(other);
    }
    return input.equals(other);
  }
  unsupported("unsupported test '" + name + "'");
}

}  // namespace pvllm::chat
