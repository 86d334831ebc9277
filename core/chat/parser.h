// The parser: tokens to a statement list, with Jinja's precedence (lowest
// first): ternary `a if c else b`, or, and, not, comparisons and `in`,
// + -, ~, * / // %, **, unary - +, then primaries with their postfixes
// (.attr, [index], [a:b:c], (call)) and filters and tests (| f, is t),
// which bind tightest. Tags: if/elif/else, for (with else, an `if` filter
// and unpacking), set (also `set ns.attr` and block set), macro, filter,
// generation, break, continue. Any other tag, and any syntax outside this
// subset, is UNSUPPORTED with its line and column.
#pragma once

#include <vector>

#include "core/chat/ast.h"
#include "core/chat/lexer.h"

namespace pvllm::chat {

// Throws TemplateError.
StmtList parse(const std::vector<Token>& tokens);

}  // namespace pvllm::chat
