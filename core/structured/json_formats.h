// JSON schema string formats as grammar: for each supported "format", GBNF
// rules matching the inside of a JSON string literal (the text between the
// quotes, as JSON spells it) whose decoded value is valid for the format.
//
// The reference is ajv-formats' "full" mode (scripts/reference, checked by
// tests/data/structured/format_goldens.json): every string a rule set
// accepts is valid there. Where a compact grammar cannot follow it exactly
// the grammar is stricter, never looser; json_formats.cc lists each place.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pvllm::structured {

// The formats json_format_gbnf implements: "date-time", "date", "time",
// "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference",
// "uuid".
const std::vector<std::string_view>& json_format_names();

// Appends to `*rules` the GBNF rules (one "name ::= body" per line) of
// `format` and sets `*entry` to the name of its entry rule, "fmt-" and the
// format's name. The other rules are named "fmt-FORMAT-PART"; no two formats
// share a rule name, so the rules of several formats can sit in one grammar
// (each format's rules at most once). The rules refer to no rule outside
// them. ("uri-reference" matches the empty string: it is one.) Unsupported for a format not in
// json_format_names();
// `*rules` and `*entry` are then unchanged.
Status json_format_gbnf(std::string_view format, std::string* rules, std::string* entry);

}  // namespace pvllm::structured
