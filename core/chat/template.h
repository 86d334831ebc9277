// Template: one parsed chat template, rendered as many times as wanted.
//
//   std::unique_ptr<Template> t;
//   PVLLM_RETURN_IF_ERROR(Template::parse(source, &t));
//   std::string prompt;
//   PVLLM_RETURN_IF_ERROR(t->render(context, &prompt));
//
// Failures are Statuses whose message names the line and column:
// UNSUPPORTED for a construct outside the subset this renderer implements
// (a tag, filter, test, method or piece of syntax), INVALID_ARGUMENT when
// the variables do not fit the template (Python's TypeError or
// UndefinedError, or the template's own raise_exception(), whose message
// comes through as it is).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/chat/ast.h"
#include "core/chat/value.h"

namespace pvllm::chat {

class Template {
 public:
  static Status parse(std::string_view source, std::unique_ptr<Template>* out);

  // `context`: the template's variables.
  Status render(const Dict& context, std::string* out) const;
  // `context`: a JSON object of variables.
  Status render(const nlohmann::ordered_json& context, std::string* out) const;

 private:
  Template() = default;
  StmtList body_;
};

}  // namespace pvllm::chat
