// Template: the lexer, parser and renderer behind one Status boundary.
#include "core/chat/template.h"

#include <utility>

#include "core/chat/error.h"
#include "core/chat/json_value.h"
#include "core/chat/lexer.h"
#include "core/chat/parser.h"
#include "core/chat/renderer.h"

namespace pvllm::chat {
namespace {

Status to_status(const TemplateError& e) {
  if (e.raised_by_template) return Status(e.code(), e.message());
  std::string where = "chat template";
  if (e.has_pos()) {
    where += " line " + std::to_string(e.pos().line) + ", column " + std::to_string(e.pos().column);
  }
  return Status(e.code(), where + ": " + e.message());
}

}  // namespace

Status Template::parse(std::string_view source, std::unique_ptr<Template>* out) {
  std::unique_ptr<Template> t(new Template());
  try {
    t->body_ = chat::parse(tokenize(source));
  } catch (const TemplateError& e) {
    return to_status(e);
  }
  *out = std::move(t);
  return Status::Ok();
}

Status Template::render(const Dict& context, std::string* out) const {
  try {
    Renderer renderer(context);
    *out = renderer.render(body_);
  } catch (const TemplateError& e) {
    return to_status(e);
  }
  return Status::Ok();
}

Status Template::render(const nlohmann::ordered_json& context, std::string* out) const {
  if (!context.is_object()) return InvalidArgument("the template context must be a JSON object");
  Dict vars;
  try {
    vars = from_json(context).as_dict();
  } catch (const TemplateError& e) {
    return to_status(e);
  }
  return render(vars, out);
}

}  // namespace pvllm::chat
