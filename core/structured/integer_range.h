// Integer bounds as grammar: a GBNF expression whose strings are exactly the
// canonical JSON spellings (no leading zeros, "-" for negatives, no "-0") of
// the integers in [lo, hi]. What json_schema.cc makes of "minimum",
// "maximum", "exclusiveMinimum" and "exclusiveMaximum" on integers.
#pragma once

#include <cstdint>
#include <string>

namespace pvllm::structured {

// The largest magnitude the grammar's integers spell (json-integer's 16
// digits): bounds beyond it clamp to it.
inline constexpr int64_t kMaxGrammarInteger = 9'999'999'999'999'999;

// Requires -kMaxGrammarInteger <= lo <= hi <= kMaxGrammarInteger. The
// expression is a sum of digit-by-digit alternatives, at most about
// 3 x 16 per sign: "[1-9] [0-9]{2}" for [100, 999], and so on.
std::string integer_range_gbnf(int64_t lo, int64_t hi);

}  // namespace pvllm::structured
