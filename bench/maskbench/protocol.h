// MaskBench's protocol (jsonschemabench maskbench/maskbench/runner.py) for
// pvllm's constraint engine: compile a file's schema, then feed each test
// instance, serialised as Python's json.dumps writes it and tokenized
// without special tokens, token by token through the masks; a valid
// instance must pass every mask, an invalid one must be stopped by one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/structured/constraint.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm::maskbench {

struct SchemaResult {
  std::string id;  // the file's name
  int num_tests = 0;
  bool compiled = false;
  std::string compile_error;    // the status message
  std::string compile_keyword;  // the keyword a refusal names, or its kind
  int64_t compile_us = 0;
  int num_valid_tests = 0;    // valid instances that passed every mask
  int num_invalid_tests = 0;  // invalid instances a mask stopped
  // The last failing test, as runner.py reports it ("test #3: should
  // reject but didn't"), and how many of each kind failed.
  std::string validation_error;
  // The failing valid instance's text up to where a mask stopped it, and
  // the token it stopped ("...{\"a\": 1, " and "\"b").
  std::string rejected_prefix, rejected_token;
  int valid_rejected = 0;
  int invalid_accepted = 0;
  int64_t num_tokens = 0;
  std::vector<int32_t> mask_us;  // one per token fed: mask and commit
  // A mask said yes and accept() no (an engine inconsistency), or the
  // matcher gave up (TokenMatcher::failed()).
  std::string engine_error;

  bool passing() const { return compiled && validation_error.empty() && engine_error.empty(); }
  nlohmann::ordered_json to_json(bool with_masks) const;
  static SchemaResult from_json(const nlohmann::ordered_json& j);
};

// The keyword an Unsupported or InvalidArgument message names ("unsupported
// keyword \"pattern\"" -> "pattern"), else a short class of the message.
std::string refusal_keyword(const std::string& message);

// Runs one MaskBench file (its parsed JSON) through `compiler`'s engine.
SchemaResult run_schema(const std::string& id, const nlohmann::ordered_json& file,
                        structured::ConstraintCompiler* compiler, const Tokenizer& tokenizer);

// The token bytes a ConstraintCompiler takes, from a tokenizer.
std::vector<std::string> compiler_token_bytes(const Tokenizer& tokenizer);

}  // namespace pvllm::maskbench
