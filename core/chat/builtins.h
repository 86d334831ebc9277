// The builtin functions of the template language: filters (x | f),
// tests (x is t), methods of strings, lists and dicts (x.m()), and the
// globals. Each throws TemplateError (UNSUPPORTED naming it) for a name it
// does not know.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/chat/value.h"

namespace pvllm::chat {

class Renderer;

Value apply_filter(Renderer& r, const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(Renderer& r, const std::string& name, const Value& input, const CallArgs& args);
// obj is a string, list or dict.
Value call_method(const Value& obj, const std::string& name, const CallArgs& args);
// range, namespace, dict, raise_exception, strftime_now.
Dict make_globals();

// Argument helpers shared by the builtins: the argument at `index` or
// keyword `name`, type-checked, else `def`.
int64_t int_arg(const CallArgs& args, size_t index, const std::string& name, int64_t def,
                const std::string& fn);
bool bool_arg(const CallArgs& args, size_t index, const std::string& name, bool def);
std::string string_arg(const CallArgs& args, size_t index, const std::string& name,
                       const std::string& def, const std::string& fn);
// Refuses keywords outside `allowed` and more than `max_positional`.
void check_args(const CallArgs& args, size_t max_positional,
                std::initializer_list<const char*> allowed, const std::string& fn);

// String helpers shared by methods and filters (methods.cc). Case
// mapping covers ASCII letters only.
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
// First letter upper, the rest lower.
std::string capitalize(const std::string& s);
// Python's str.replace; count < 0 = all.
std::string replace_all(const std::string& s, const std::string& old, const std::string& with,
                        int64_t count);
// Python's str.splitlines for \n, \r\n and \r.
std::vector<std::string> split_lines(const std::string& s, bool keep_ends);

}  // namespace pvllm::chat
