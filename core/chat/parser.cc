// The parser (see parser.h): recursive descent over the lexer's tokens.
#include "core/chat/parser.h"

#include <algorithm>
#include <string>
#include <utility>

namespace pvllm::chat {
namespace {

// How deep a template may nest: every recursive step of the parser and
// every link of a chain it builds in a loop (a + b + c, x|f|g, a.b[c](),
// elif) counts one. This bounds the parser's recursion and the height of
// the tree the renderer walks and frees recursively, so that a hostile
// template is refused instead of overflowing the stack; real templates
// nest a few dozen deep at most.
constexpr int kMaxNesting = 512;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  StmtList parse_template() {
    std::string end;
    StmtList body = parse_body({}, &end);
    return body;
  }

 private:
  // Counts nesting from its construction (one level, or none for a chain)
  // to the end of its scope; each deeper() adds one more (a link).
  class Nesting {
   public:
    explicit Nesting(Parser* parser, int levels = 1) : parser_(parser) {
      for (int i = 0; i < levels; ++i) deeper();
    }
    ~Nesting() { parser_->nesting_ -= added_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    void deeper() {
      ++added_;
      if (++parser_->nesting_ > kMaxNesting) {
        unsupported("the template nests more than " + std::to_string(kMaxNesting) + " deep",
                    parser_->peek().pos);
      }
    }

   private:
    Parser* parser_;
    int added_ = 0;
  };

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (i_ < t_.size() - 1) ++i_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOp && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kText:
        return "text";
      case TokenKind::kExprOpen:
      case TokenKind::kExprClose:
      case TokenKind::kStmtOpen:
      case TokenKind::kStmtClose:
      case TokenKind::kOp:
        return "'" + t.text + "'";
      case TokenKind::kName:
        return "'" + t.text + "'";
      case TokenKind::kString:
        return "a string";
      case TokenKind::kInt:
      case TokenKind::kFloat:
        return "the number " + t.text;
      case TokenKind::kEnd:
        return "the end of the template";
    }
    return "?";
  }

  [[noreturn]] void unexpected(const std::string& wanted) const {
    unsupported("expected " + wanted + ", found " + describe(peek()), peek().pos);
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) unexpected(std::string("'") + op + "'");
  }
  std::string expect_name(const char* what) {
    if (peek().kind != TokenKind::kName) unexpected(what);
    return next().text;
  }
  void expect_stmt_close() {
    if (peek().kind != TokenKind::kStmtClose) unexpected("'%}'");
    next();
  }

  static std::unique_ptr<Stmt> stmt(StmtKind kind, SourcePos pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos;
    return s;
  }
  static ExprPtr expr(ExprKind kind, SourcePos pos, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    e->name = std::move(name);
    return e;
  }

  // Statements until one of `ends` (a tag name); *end receives it, the
  // parser then stands right after that name.
  StmtList parse_body(const std::vector<std::string>& ends, std::string* end) {
    StmtList body;
    const SourcePos start = peek().pos;
    for (;;) {
      const Token& t = peek();
      switch (t.kind) {
        case TokenKind::kEnd:
          if (!ends.empty()) {
            unsupported("missing {% " + ends.back() + " %} for the tag opened here", start);
          }
          return body;
        case TokenKind::kText: {
          auto s = stmt(StmtKind::kText, t.pos);
          s->text = next().text;
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kExprOpen: {
          auto s = stmt(StmtKind::kPrint, next().pos);
          s->expr = parse_expression();
          if (peek().kind != TokenKind::kExprClose) unexpected("'}}'");
          next();
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kStmtOpen: {
          next();
          const Token& name = peek();
          if (name.kind != TokenKind::kName) unexpected("a tag name");
          if (std::find(ends.begin(), ends.end(), name.text) != ends.end()) {
            *end = next().text;
            return body;
          }
          body.push_back(parse_statement());
          break;
        }
        default:
          unexpected("text or a tag");
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    Nesting nesting(this);
    const Token& name = next();
    const std::string& tag = name.text;
    if (tag == "if") return parse_if(name.pos);
    if (tag == "for") return parse_for(name.pos);
    if (tag == "set") return parse_set(name.pos);
    if (tag == "macro") return parse_macro(name.pos);
    if (tag == "filter") return parse_filter_block(name.pos);
    if (tag == "generation") {
      auto s = stmt(StmtKind::kBlock, name.pos);
      expect_stmt_close();
      std::string end;
      s->body = parse_body({"endgeneration"}, &end);
      expect_stmt_close();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      auto s = stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, name.pos);
      expect_stmt_close();
      return s;
    }
    static const char* const kEnds[] = {"elif",      "else",          "endif",
                                        "endfor",    "endset",        "endmacro",
                                        "endfilter", "endgeneration", "endraw"};
    for (const char* end : kEnds) {
      if (tag == end) unsupported("unexpected {% " + tag + " %}", name.pos);
    }
    unsupported("unsupported tag '" + tag + "'", name.pos);
  }

  std::unique_ptr<Stmt> parse_if(SourcePos pos) {
    Nesting nesting(this);
    auto s = stmt(StmtKind::kIf, pos);
    s->expr = parse_expression();
    expect_stmt_close();
    std::string end;
    s->body = parse_body({"elif", "else", "endif"}, &end);
    if (end == "elif") {
      s->else_body.push_back(parse_if(peek().pos));
      return s;  // the nested if consumed the endif
    }
    if (end == "else") {
      expect_stmt_close();
      s->else_body = parse_body({"endif"}, &end);
    }
    expect_stmt_close();
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    const bool paren = accept_op("(");
    do {
      targets.push_back(expect_name("a variable name"));
    } while (accept_op(","));
    if (paren) expect_op(")");
    return targets;
  }

  std::unique_ptr<Stmt> parse_for(SourcePos pos) {
    auto s = stmt(StmtKind::kFor, pos);
    s->targets = parse_targets();
    if (!accept_name("in")) unexpected("'in'");
    s->expr = parse_expression(/*allow_ternary=*/false);
    if (accept_name("if")) s->filter = parse_expression(false);
    if (is_name("recursive")) unsupported("recursive for loops are not supported", peek().pos);
    expect_stmt_close();
    std::string end;
    s->body = parse_body({"else", "endfor"}, &end);
    if (end == "else") {
      expect_stmt_close();
      s->else_body = parse_body({"endfor"}, &end);
    }
    expect_stmt_close();
    return s;
  }

  std::unique_ptr<Stmt> parse_set(SourcePos pos) {
    auto s = stmt(StmtKind::kSet, pos);
    if (peek().kind == TokenKind::kName && is_op(".", 1)) {
      s->targets.push_back(next().text);
      next();
      s->text = expect_name("an attribute name");
    } else {
      s->targets = parse_targets();
    }
    if (peek().kind == TokenKind::kStmtClose) {
      if (s->targets.size() != 1 || !s->text.empty()) {
        unsupported("a block set assigns one variable", pos);
      }
      next();
      std::string end;
      s->body = parse_body({"endset"}, &end);
      expect_stmt_close();
      return s;
    }
    if (is_op("|")) unsupported("filters on a block set are not supported", peek().pos);
    expect_op("=");
    s->expr = parse_expression();
    if (is_op(",")) {
      auto tuple = expr(ExprKind::kTuple, s->expr->pos);
      tuple->items.push_back(std::move(s->expr));
      while (accept_op(",")) tuple->items.push_back(parse_expression());
      s->expr = std::move(tuple);
    }
    expect_stmt_close();
    return s;
  }

  std::unique_ptr<Stmt> parse_macro(SourcePos pos) {
    auto s = stmt(StmtKind::kMacro, pos);
    s->text = expect_name("a macro name");
    expect_op("(");
    while (!accept_op(")")) {
      std::string param = expect_name("a parameter name");
      ExprPtr def;
      if (accept_op("=")) def = parse_expression();
      s->params.emplace_back(std::move(param), std::move(def));
      if (!is_op(")")) expect_op(",");
    }
    expect_stmt_close();
    std::string end;
    s->body = parse_body({"endmacro"}, &end);
    expect_stmt_close();
    return s;
  }

  std::unique_ptr<Stmt> parse_filter_block(SourcePos pos) {
    auto s = stmt(StmtKind::kBlock, pos);
    ExprPtr input = expr(ExprKind::kLiteral, pos);
    s->expr = parse_filter(std::move(input));
    Nesting chain(this, 0);
    while (accept_op("|")) {
      chain.deeper();
      s->expr = parse_filter(std::move(s->expr));
    }
    expect_stmt_close();
    std::string end;
    s->body = parse_body({"endfilter"}, &end);
    expect_stmt_close();
    return s;
  }

  // ---------------------------------------------------------------- expressions

  ExprPtr parse_expression(bool allow_ternary = true) {
    Nesting nesting(this);
    ExprPtr e = parse_or();
    if (!allow_ternary || !is_name("if")) return e;
    auto t = expr(ExprKind::kTernary, next().pos);
    t->items.push_back(std::move(e));
    t->items.push_back(parse_or());
    t->items.push_back(accept_name("else") ? parse_expression() : nullptr);
    return t;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, SourcePos pos) {
    auto e = expr(ExprKind::kBinary, pos, std::move(op));
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    Nesting chain(this, 0);
    while (is_name("or")) {
      chain.deeper();
      const SourcePos pos = next().pos;
      left = binary("or", std::move(left), parse_and(), pos);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    Nesting chain(this, 0);
    while (is_name("and")) {
      chain.deeper();
      const SourcePos pos = next().pos;
      left = binary("and", std::move(left), parse_not(), pos);
    }
    return left;
  }

  ExprPtr parse_not() {
    Nesting nesting(this);
    if (is_name("not")) {
      auto e = expr(ExprKind::kUnary, next().pos, "not");
      e->items.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    Nesting chain(this, 0);
    for (;;) {
      const SourcePos pos = peek().pos;
      std::string op;
      if (peek().kind == TokenKind::kOp &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        return left;
      }
      chain.deeper();
      left = binary(op, std::move(left), parse_math1(), pos);
    }
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    Nesting chain(this, 0);
    while (is_op("+") || is_op("-")) {
      chain.deeper();
      const Token& op = next();
      left = binary(op.text, std::move(left), parse_concat(), op.pos);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    Nesting chain(this, 0);
    while (is_op("~")) {
      chain.deeper();
      const SourcePos pos = next().pos;
      left = binary("~", std::move(left), parse_math2(), pos);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    Nesting chain(this, 0);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.deeper();
      const Token& op = next();
      left = binary(op.text, std::move(left), parse_pow(), op.pos);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    Nesting chain(this, 0);
    while (is_op("**")) {
      chain.deeper();
      const SourcePos pos = next().pos;
      left = binary("**", std::move(left), parse_unary(true), pos);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nesting nesting(this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      e = expr(ExprKind::kUnary, op.pos, op.text);
      e->items.push_back(parse_unary(false));
    } else {
      e = parse_postfix(parse_primary());
    }
    if (!with_filter) return e;
    for (;;) {
      if (accept_op("|")) {
        nesting.deeper();
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        nesting.deeper();
        e = parse_test(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter(ExprPtr input) {
    const SourcePos pos = peek().pos;
    auto f = expr(ExprKind::kFilter, pos, expect_name("a filter name"));
    f->items.push_back(std::move(input));
    if (accept_op("(")) parse_call_args(f.get());
    return f;
  }

  ExprPtr parse_test(ExprPtr input) {
    next();  // is
    const bool negated = accept_name("not");
    const SourcePos pos = peek().pos;
    auto t = expr(ExprKind::kTest, pos, expect_name("a test name"));
    t->negated = negated;
    t->items.push_back(std::move(input));
    if (accept_op("(")) {
      parse_call_args(t.get());
    } else if (starts_test_argument()) {
      t->items.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  // `x is divisibleby 3`, `x is sameas false`: one argument without parens.
  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::kString || t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat) {
      return true;
    }
    if (t.kind == TokenKind::kOp) return t.text == "[" || t.text == "{";
    if (t.kind != TokenKind::kName) return false;
    static const char* const kStop[] = {"else", "or", "and", "if", "in", "is", "not"};
    for (const char* s : kStop) {
      if (t.text == s) return false;
    }
    return true;
  }

  // After '(': positional and keyword arguments up to ')'.
  void parse_call_args(Expr* call) {
    while (!accept_op(")")) {
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string key = next().text;
        next();
        call->kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!call->kwargs.empty())
          unsupported("a positional argument after a keyword argument", peek().pos);
        if (is_op("*") || is_op("**"))
          unsupported("*args and **kwargs are not supported", peek().pos);
        call->items.push_back(parse_expression());
      }
      if (!is_op(")")) expect_op(",");
    }
  }

  ExprPtr parse_postfix(ExprPtr e) {
    Nesting chain(this, 0);
    for (;;) {
      const SourcePos pos = peek().pos;
      if (is_op(".") || is_op("[") || is_op("(")) chain.deeper();
      if (accept_op(".")) {
        if (peek().kind == TokenKind::kInt) {
          auto s = expr(ExprKind::kSubscript, pos);
          auto index = expr(ExprKind::kLiteral, pos);
          index->literal = Value::integer(next().int_value);
          s->items.push_back(std::move(e));
          s->items.push_back(std::move(index));
          e = std::move(s);
          continue;
        }
        auto a = expr(ExprKind::kAttr, pos, expect_name("an attribute name"));
        a->items.push_back(std::move(e));
        e = std::move(a);
      } else if (accept_op("[")) {
        e = parse_subscript(std::move(e), pos);
      } else if (accept_op("(")) {
        auto c = expr(ExprKind::kCall, pos);
        c->items.push_back(std::move(e));
        parse_call_args(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  // After '[': an index or a slice, up to ']'.
  ExprPtr parse_subscript(ExprPtr target, SourcePos pos) {
    ExprPtr parts[3];
    int num_colons = 0;
    for (;;) {
      if (is_op("]")) break;
      if (is_op(":")) {
        next();
        if (++num_colons > 2) unexpected("']'");
        continue;
      }
      if (parts[num_colons]) unexpected("':' or ']'");
      parts[num_colons] = parse_expression();
    }
    next();
    if (num_colons == 0) {
      if (!parts[0]) unexpected("an index");
      auto s = expr(ExprKind::kSubscript, pos);
      s->items.push_back(std::move(target));
      s->items.push_back(std::move(parts[0]));
      return s;
    }
    auto s = expr(ExprKind::kSlice, pos);
    s->items.push_back(std::move(target));
    for (auto& p : parts) s->items.push_back(std::move(p));
    return s;
  }

  ExprPtr literal(Value v, SourcePos pos) {
    auto e = expr(ExprKind::kLiteral, pos);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    const SourcePos pos = t.pos;
    switch (t.kind) {
      case TokenKind::kName: {
        const std::string name = next().text;
        if (name == "true" || name == "True") return literal(Value::boolean(true), pos);
        if (name == "false" || name == "False") return literal(Value::boolean(false), pos);
        if (name == "none" || name == "None") return literal(Value::none(), pos);
        return expr(ExprKind::kName, pos, name);
      }
      case TokenKind::kString: {
        std::string s;
        while (peek().kind == TokenKind::kString) s += next().text;
        return literal(Value::string(std::move(s)), pos);
      }
      case TokenKind::kInt:
        return literal(Value::integer(next().int_value), pos);
      case TokenKind::kFloat:
        return literal(Value::floating(next().float_value), pos);
      case TokenKind::kOp:
        if (accept_op("(")) {
          if (accept_op(")")) return expr(ExprKind::kTuple, pos);
          ExprPtr inner = parse_expression();
          if (!is_op(",")) {
            expect_op(")");
            return inner;
          }
          auto tuple = expr(ExprKind::kTuple, pos);
          tuple->items.push_back(std::move(inner));
          while (accept_op(",")) {
            if (is_op(")")) break;
            tuple->items.push_back(parse_expression());
          }
          expect_op(")");
          return tuple;
        }
        if (accept_op("[")) {
          auto list = expr(ExprKind::kList, pos);
          while (!accept_op("]")) {
            list->items.push_back(parse_expression());
            if (!is_op("]")) expect_op(",");
          }
          return list;
        }
        if (accept_op("{")) {
          auto dict = expr(ExprKind::kDict, pos);
          while (!accept_op("}")) {
            dict->items.push_back(parse_expression());
            expect_op(":");
            dict->items.push_back(parse_expression());
            if (!is_op("}")) expect_op(",");
          }
          return dict;
        }
        break;
      default:
        break;
    }
    unexpected("an expression");
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int nesting_ = 0;
};

}  // namespace

StmtList parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace pvllm::chat
