// What the template's operators and lookups do to values, with Python's
// rules: arithmetic (int stays int, / gives a float, // and % floor),
// comparisons, `in`, ~, attribute and item lookup, slicing, iteration.
// Throws TemplateError (INVALID_ARGUMENT) where Python raises, e.g.
// 'a' + 1 or a lookup on an undefined value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/chat/value.h"

namespace pvllm::chat {

// op: + - * / // % ** ~ == != < <= > >= in "not in".
Value binary_op(const std::string& op, const Value& a, const Value& b);
// Python's a < b (numbers, strings, lists); throws for other types.
bool less_than(const Value& a, const Value& b);

// obj.name: a dict's item or a namespace's attribute; undefined when
// missing (also on None, strings and lists). Throws on an undefined obj.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: list and string indexes (negative from the end), dict keys;
// undefined when missing. Throws on an undefined obj.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on a list or string; each bound may be absent.
Value slice(const Value& obj, const std::optional<int64_t>& start,
            const std::optional<int64_t>& stop, const std::optional<int64_t>& step);
// The items a for loop visits: a list's items, a dict's keys, a string's
// characters, nothing for undefined. Throws for anything else.
std::vector<Value> iterate(const Value& v);
// Throws the "is undefined" error an undefined value carries.
[[noreturn]] void fail_undefined(const Value& v);

// Python's str.strip/lstrip/rstrip: `chars` null = whitespace.
std::string strip(const std::string& s, const Value* chars, bool left, bool right);

}  // namespace pvllm::chat
