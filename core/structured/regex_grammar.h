// Regular expression -> GBNF grammar text (grammar.h's dialect) whose root
// rule matches exactly the strings the regex matches in full.
#pragma once

#include <string>
#include <string_view>

#include "core/base/status.h"

namespace pvllm::structured {

// A syntax error is InvalidArgument naming the byte offset in `pattern`;
// a construct this converter does not implement (backreferences,
// look-around, possessive quantifiers, inline flags, Unicode properties) is
// Unsupported, naming it and its offset. Lazy quantifiers match the same
// whole strings as greedy ones and are taken as such.
Status regex_to_gbnf(std::string_view pattern, std::string* gbnf);

}  // namespace pvllm::structured
