// allOf, merged: one schema that an instance matches exactly when it
// matches every part, so that the grammar writer (json_schema.cc) never
// has to intersect two grammars. Parts are flattened ($ref resolved, nested
// allOf spread), then merged keyword by keyword: types intersect,
// properties merge by name (a name in several parts gets an allOf of its
// schemas), required lists join, bounds tighten, enums intersect, and one
// part's anyOf is spread over the rest (anyOf of each alternative merged
// with the others). A keyword two parts give differently where no exact
// merge exists (two patterns, two formats) is Unsupported by name.
// if / then / else become alternatives: (if and then) or (not if and
// else), "not if" spelled in the `not` forms merged here (type, enum and
// const values, a missing member); an "if" of other keywords is
// Unsupported.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pvllm::structured {

using SchemaJson = nlohmann::ordered_json;
// The keyword a merged schema carries for `not` of string values: the
// strings (a JSON array) that json_schema.cc's grammar leaves out.
inline constexpr const char* kNotStrings = "$pvllm-not-strings";
// Finds the schema a "$ref" value names (json_schema.cc's resolver).
using RefResolver = std::function<Status(const std::string& ref, const SchemaJson** out)>;

// `parts`: the schemas to intersect; `ptr`: where (for messages). `*out`
// is a schema object without allOf at its top (false when the parts
// cannot all hold, e.g. disjoint types; the caller reports that).
// `conditionals` false: if / then / else are ignored, as drafts 4 and 6
// (which do not define them) have validators do.
Status merge_schemas(const std::vector<const SchemaJson*>& parts, const RefResolver& resolve,
                     const std::string& ptr, SchemaJson* out, bool conditionals = true);

// Whether no instance matches both `a` and `b`, as far as types, enum and
// const values, and object members that one requires and the other forbids
// or types apart (a discriminator) show it; false when unsure. What makes
// a oneOf an anyOf: alternatives that exclude each other pairwise.
bool schemas_disjoint(const SchemaJson& a, const SchemaJson& b, const RefResolver& resolve);

}  // namespace pvllm::structured
