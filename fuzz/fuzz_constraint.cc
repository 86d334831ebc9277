// Output constraints: the first byte picks the kind (JSON schema, GBNF
// grammar, regular expression) and the JSON options (whitespace, unlisted
// members, members in any order), the rest is its text. What compiles is then
// walked over a small vocabulary with multi-byte and split UTF-8 tokens:
// each step's mask is computed, and a token the mask allows must be
// accepted (and one it refuses refused), or the target aborts; the walk
// picks tokens with the input's bytes so that it explores.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/structured/constraint.h"

namespace {

using pvllm::structured::CompiledConstraint;
using pvllm::structured::ConstraintCompiler;
using pvllm::structured::ConstraintKind;
using pvllm::structured::ConstraintSpec;
using pvllm::structured::TokenMatcher;

const std::vector<std::string>& vocabulary() {
  static const std::vector<std::string> v = {
      "",     "{",        "}",    "[",     "]",        "\"",       ":",  ",",    " ",
      "a",    "b",        "ab",   "\"a\"", "1",        "-",        ".",  "e",    "0",
      "true", "false",    "null", "\\",    "\\n",      "\\u00",    "é",  "\xC3", "\xA9",
      "中",   "\xE4\xB8", "\xAD", "😀",     "\xF0\x9F", "\x98\x80", " {", "\":",  "\",\"",
      "x",    "Z",        "\n",   "\t",    "2024-",    "T",        "01"};
  return v;
}

bool allows(const CompiledConstraint::Mask& mask, int32_t id) {
  return ((*mask)[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  static ConstraintCompiler compiler(vocabulary());
  ConstraintSpec spec;
  spec.kind = data[0] % 3 == 0   ? ConstraintKind::kJsonSchema
              : data[0] % 3 == 1 ? ConstraintKind::kGrammar
                                 : ConstraintKind::kRegex;
  spec.text.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  spec.json_whitespace = (data[0] & 16) != 0;
  spec.json_unlisted_properties = (data[0] & 32) != 0;
  spec.json_any_order = (data[0] & 64) != 0;
  std::shared_ptr<const CompiledConstraint> compiled;
  if (!compiler.compile(spec, &compiled).ok()) return 0;
  const auto vocab = static_cast<int32_t>(vocabulary().size());
  TokenMatcher matcher(compiled, data[0] & 8 ? 1 : 0);
  size_t cursor = 1;
  for (int step = 0; step < 64 && !matcher.must_end(); ++step) {
    const CompiledConstraint::Mask mask = matcher.allowed();
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab; ++id) {
      if (allows(mask, id)) allowed.push_back(id);
    }
    // A refused token must be refused by accept() too (which leaves the
    // state as it was).
    for (int32_t id = 0; id < vocab; ++id) {
      if (!allows(mask, id) && TokenMatcher(matcher).accept(id)) std::abort();
    }
    if (allowed.empty()) break;
    const uint8_t pick = data[cursor++ % size];
    if (!matcher.accept(allowed[pick % allowed.size()])) std::abort();
  }
  return 0;
}
