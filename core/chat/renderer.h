// Renderer: runs a parsed template over a context and returns the text.
// Scopes follow Jinja: the context and top-level `set`s form the root
// frame; each for-loop iteration and each macro call gets its own frame
// (so a `set` inside a loop does not leak out; namespace() is the way to
// carry values out); if blocks share their parent's frame.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/chat/ast.h"
#include "core/chat/value.h"

namespace pvllm::chat {

class Renderer {
 public:
  // `context`: the template's variables; the builtin globals (range,
  // namespace, raise_exception, strftime_now, dict) sit beneath them.
  explicit Renderer(const Dict& context);

  // Throws TemplateError, positioned at the node that failed.
  std::string render(const StmtList& body);

  // Calls a callable value (a builtin or a macro).
  Value call(const Value& callee, const CallArgs& args);
  // Applies a filter or a test by name (core/chat/filters.cc and
  // core/chat/value_tests.cc); the select/map family calls these back.
  Value filter(const std::string& name, const Value& input, const CallArgs& args);
  bool test(const std::string& name, const Value& input, const CallArgs& args);

 private:
  using Frame = std::unordered_map<std::string, Value>;
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec(const StmtList& body, std::string* out);
  Flow exec(const Stmt& s, std::string* out);
  Flow exec_for(const Stmt& s, std::string* out);
  void exec_set(const Stmt& s, std::string* out);
  Value make_macro(const Stmt& s);
  Value call_macro(const Stmt& macro, const CallArgs& args);
  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  Value eval_filter_chain(const Expr& e, const Value& input);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);

  // Counts a statement or expression against kMaxRenderSteps.
  void tick();
  // Appends to the output, within kMaxStringBytes.
  static void emit(std::string* out, const std::string& text);

  std::vector<std::shared_ptr<Frame>> frames_;  // innermost last
  int64_t steps_ = 0;
  int macro_depth_ = 0;
  SourcePos at_;  // the node being evaluated, for errors without a position
};

}  // namespace pvllm::chat
