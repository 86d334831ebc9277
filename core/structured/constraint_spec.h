// What a request asks its output text to match: the part of the sampling
// params that the structured-output library (constraint.h) compiles. A
// plain struct, so that the sampling params can hold one without linking
// the library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pvllm::structured {

enum class ConstraintKind : int32_t {
  kNone = 0,
  kJsonSchema = 1,  // text: the schema
  kJsonObject = 2,  // any JSON object; text unused
  kGrammar = 3,     // text: GBNF (grammar.h)
  kRegex = 4,       // text: the pattern, matched in full
  kChoice = 5,      // choices: the output is exactly one of them
};

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kNone;
  std::string text;
  std::vector<std::string> choices;
  // JSON kinds (schema, object): JSON's whitespace (space, tab, newline,
  // carriage return) allowed between tokens, as in pretty-printed or
  // ", "-separated JSON; false = compact JSON, nothing between tokens.
  bool json_whitespace = false;
  // JSON schemas: members a schema does not list, wherever its
  // additionalProperties (or patternProperties) allows them, as JSON Schema
  // has it. false = an object with listed properties gets only those
  // (stricter: what OpenAI's strict schemas and XGrammar's strict mode do).
  bool json_unlisted_properties = false;
  // JSON schemas: an object's members in any order (each at most once, the
  // required ones present), as JSON Schema allows; false = the order the
  // schema lists them in (properties, then required names it does not list).
  bool json_any_order = false;

  bool active() const { return kind != ConstraintKind::kNone; }
};

}  // namespace pvllm::structured
