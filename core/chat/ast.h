// The syntax tree a template parses into: expressions and statements, each
// with its source position for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/chat/error.h"
#include "core/chat/value.h"

namespace pvllm::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // [items...]
  kTuple,      // (items...), a list in this model
  kDict,       // {items[0]: items[1], ...}: keys and values alternate
  kAttr,       // items[0].name
  kSubscript,  // items[0][items[1]]
  kSlice,      // items[0][items[1]:items[2]:items[3]], any of the three null
  kCall,       // items[0](items[1...], kwargs)
  kFilter,     // items[0] | name(items[1...], kwargs)
  kTest,       // items[0] is [not] name(items[1...])
  kUnary,      // name: "not", "-", "+"; items[0]
  kBinary,     // name: an operator; items[0], items[1]
  kTernary,    // items[0] if items[1] else items[2] (null: undefined)
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  SourcePos pos;
  std::string name;  // name, attribute, operator, filter or test
  Value literal;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // `is not`
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind {
  kText,   // text
  kPrint,  // {{ expr }}
  kIf,     // if expr: body, else: else_body (elif nests an if there)
  kFor,    // for targets in expr [if filter]: body, else: else_body
  kSet,    // set targets = expr; set ns.attr = expr (attr); block set: body
  kMacro,  // macro name(params): body
  kBlock,  // body as it is ({% generation %}), or through a filter ({% filter f %})
  kBreak,
  kContinue,
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  SourcePos pos;
  std::string text;  // kText; kMacro: the name; kSet: the attribute of `set ns.attr`
  ExprPtr expr;      // condition, iterable or value; kBlock: the filter (items[0] unused)
  ExprPtr filter;    // kFor: the `if` after the iterable
  std::vector<std::string> targets;  // kFor, kSet names
  // kMacro: parameter names and defaults (null when none).
  std::vector<std::pair<std::string, ExprPtr>> params;
  StmtList body;
  StmtList else_body;
};

}  // namespace pvllm::chat
