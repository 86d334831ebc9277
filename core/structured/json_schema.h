// JSON schema -> GBNF grammar text (grammar.h's dialect) whose root rule
// matches compact JSON documents that validate against the schema.
#pragma once

#include <string>
#include <string_view>

#include "core/base/status.h"

namespace pvllm::structured {

// `schema_json`: the schema as JSON text. Malformed JSON is InvalidArgument
// with the byte offset; a keyword or value this converter does not
// implement is Unsupported, naming it and its JSON pointer.
struct JsonGrammarOptions {
  // JSON's whitespace between tokens (ConstraintSpec::json_whitespace);
  // false = compact.
  bool whitespace = false;
  // Unlisted members beside listed ones (ConstraintSpec::
  // json_unlisted_properties); false = listed members only.
  bool unlisted_properties = false;
  // Members in any order (ConstraintSpec::json_any_order); false = in the
  // order the schema lists them.
  bool any_order = false;
};

Status json_schema_to_gbnf(std::string_view schema_json, std::string* gbnf,
                           const JsonGrammarOptions& options = {});

// Any JSON object (response_format "json_object").
std::string json_object_gbnf(const JsonGrammarOptions& options = {});

}  // namespace pvllm::structured
