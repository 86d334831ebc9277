// Regular expression -> GBNF grammar text (grammar.h's dialect) whose root
// rule matches exactly the strings the regex matches in full; and JSON
// Schema's "pattern" -> GBNF rules for the inside of a JSON string whose
// value contains a match.
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

// JSON Schema's "pattern": GBNF rules matching the inside of a JSON string
// literal (the text between the quotes) whose value contains a match of
// `pattern`, read as ECMA-262 reads it with the `u` flag (regex_grammar.cc
// says where that differs from regex_to_gbnf's dialect). The match is a
// search: "abc" is found in "xxabcxx"; `^` and `$` anchor a top-level
// alternative at the start and end of the value.
//
// The text is matched as JSON writes it canonically (JSON.stringify,
// json.dumps(ensure_ascii=False), nlohmann::json::dump()): `"` and `\` as
// \" and \\, U+0008 U+000C U+000A U+000D U+0009 as \b \f \n \r \t, the
// other code points below U+0020 as \u00xx (lower-case hex), everything
// else, U+007F and non-ASCII included, as itself in UTF-8. Other spellings
// of the same value are refused.
//
// \param[in] rule_prefix a GBNF rule name ([a-zA-Z_][a-zA-Z0-9_-]*); every
//   rule written starts with it, and the rule named exactly `rule_prefix`
//   is the entry.
// \param[out] rules "name ::= body" lines, set only on success.
// Errors are regex_to_gbnf's, and InvalidArgument for a bad `rule_prefix`.
Status regex_to_json_string_gbnf(std::string_view pattern, std::string_view rule_prefix,
                                 std::string* rules);

}  // namespace pvllm::structured
