// The lexer: template source to tokens. Text between tags becomes kText;
// {{ }} and {% %} become open/close tokens around the expression tokens
// inside them; {# #} comments disappear. Whitespace is handled the way
// transformers configures Jinja: one trailing newline of the source is
// dropped, trim_blocks (the newline right after a %} or #} goes) and
// lstrip_blocks (spaces and tabs from a line's start up to a {% or {#
// go), and a '-' inside a delimiter strips all whitespace on that side.
// {% raw %}...{% endraw %} comes out as text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/error.h"

namespace pvllm::chat {

enum class TokenKind {
  kText,       // literal output
  kExprOpen,   // {{
  kExprClose,  // }}
  kStmtOpen,   // {%
  kStmtClose,  // %}
  kName,       // identifiers and keywords
  kString,     // a string literal, escapes resolved
  kInt,
  kFloat,
  kOp,  // an operator or punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } . , : |
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // the text, name, string value or operator
  int64_t int_value = 0;
  double float_value = 0.0;
  SourcePos pos;
};

// Throws TemplateError (UNSUPPORTED) for an unclosed tag, comment or
// string, or a character no token starts with.
std::vector<Token> tokenize(std::string_view source);

}  // namespace pvllm::chat
