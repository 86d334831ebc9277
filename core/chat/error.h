// TemplateError: how the lexer, parser and renderer report a failure. It
// never leaves core/chat: Template::parse and Template::render catch it and
// return a Status whose message names the line and column.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "core/base/status.h"

namespace pvllm::chat {

// A position in the template source, 1-based; 0 when unknown.
struct SourcePos {
  int line = 0;
  int column = 0;
};

class TemplateError : public std::exception {
 public:
  TemplateError(StatusCode code, std::string message, SourcePos pos = {})
      : code_(code), message_(std::move(message)), pos_(pos) {}
  const char* what() const noexcept override { return message_.c_str(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  SourcePos pos() const { return pos_; }
  bool has_pos() const { return pos_.line > 0; }
  // From raise_exception(): the template's own message, passed on as is.
  bool raised_by_template = false;

 private:
  StatusCode code_;
  std::string message_;
  SourcePos pos_;
};

// A construct this renderer does not implement (a tag, filter, test,
// method or syntax): UNSUPPORTED, never a wrong prompt.
[[noreturn]] inline void unsupported(std::string message, SourcePos pos = {}) {
  throw TemplateError(StatusCode::kUnsupported, std::move(message), pos);
}

// A value the template cannot use (Python's TypeError, ValueError or
// UndefinedError): the messages or variables do not fit the template.
[[noreturn]] inline void invalid(std::string message, SourcePos pos = {}) {
  throw TemplateError(StatusCode::kInvalidArgument, std::move(message), pos);
}

}  // namespace pvllm::chat
