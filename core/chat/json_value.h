// JSON in and out of template values: the caller's messages, tools and
// extra variables become Values (JSON ints stay ints, 1.0 stays a float), and
// the tojson filter writes Values back the way transformers' tojson does
// (json.dumps with ensure_ascii=False): ", " and ": " between items, or
// newlines and `indent` spaces when an indent is given.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/chat/value.h"

namespace pvllm::chat {

Value from_json(const nlohmann::ordered_json& j);

// indent < 0: on one line. Throws TemplateError for values JSON cannot hold
// (undefined, functions, namespaces).
std::string to_json(const Value& v, int indent = -1, bool sort_keys = false);

}  // namespace pvllm::chat
