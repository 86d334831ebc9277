// Number bounds and multiples as grammar: GBNF whose strings are JSON
// numbers whose exact decimal value lies within "minimum" / "maximum" and
// their exclusive forms, and is a multiple of "multipleOf". Bounds are
// decimals read exactly (0.1 is one tenth, not the double nearest it), and
// every spelling the grammar takes is in range by exact arithmetic.
//
// Spellings taken (json-number's limits: 16 integer digits, 16 fraction
// digits, 2 exponent digits):
//   - plain decimals: "0", "5", "-0.0", "99.5", "100.00", "0.001";
//   - with a bound (number_range_gbnf), an exponent after a mantissa of one
//     non-zero digit, as Python, JavaScript and printf("%e") write them:
//     "1e-05", "2.5E+20", "7e3". Exponents after other mantissas ("15e2",
//     "0.5e-3", "0e0") are not taken;
//   - with multipleOf, no exponents at all.
// A value exactly in range is taken even where a validator that reads
// numbers as doubles rounds it onto an exclusive bound:
// "99.9999999999999999" under exclusiveMaximum 100.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"

namespace pvllm::structured {

// An exact decimal: (negative ? -1 : 1) x digits x 10^exponent. `digits`
// has no leading or trailing zeros; zero is "" and never negative.
struct Decimal {
  bool negative = false;
  std::string digits;
  int32_t exponent = 0;

  bool is_zero() const { return digits.empty(); }
  static Decimal from_int(int64_t v);
};

// A JSON number's text ("0.1", "-2.5e-3", "1E+300") read exactly. Other
// text, or an exponent beyond +-1000000, is InvalidArgument.
Status parse_decimal(std::string_view text, Decimal* out);
// The shortest decimal that reads back as `v`, as JSON writers print a
// double: 0.1 is one tenth. Requires a finite `v`.
Decimal decimal_from_double(double v);
// -1, 0 or 1 as a < b, a == b, a > b.
int compare_decimals(const Decimal& a, const Decimal& b);
// For messages: "-0.25", "100000", or "1.5e-30" when far from 1.
std::string decimal_to_string(const Decimal& d);

// An interval; a side without has_* is unbounded.
struct NumberBounds {
  bool has_lo = false;
  Decimal lo;
  bool lo_exclusive = false;
  bool has_hi = false;
  Decimal hi;
  bool hi_exclusive = false;
};

// A GBNF expression (no rules of its own) for the JSON numbers whose value
// lies within `bounds`, spelled as the header comment lists; "" when none
// does. About a kilobyte of text per bound.
std::string number_range_gbnf(const NumberBounds& bounds);

// An expression and the rules it names (name, body); every name starts
// with the prefix given.
struct GbnfFragment {
  std::string expr;
  std::vector<std::pair<std::string, std::string>> rules;
};

// The largest step digits c (or k, below) a multipleOf grammar tracks
// residues of, and the most rules it may add.
inline constexpr uint32_t kMaxMultipleOfModulus = 1000;
inline constexpr size_t kMaxMultipleOfRules = 4096;

// The multiples of `step` (> 0, else InvalidArgument) within `bounds`:
// canonical integers (no "-0") when `integers_only`, else plain decimals
// ("10", "10.0", "-0.0", "2.50"; no exponents). Rule names are
// `rule_prefix` (a GBNF rule name the caller keeps free, with every name
// that starts with it and "-") followed by "-" and a suffix. An empty
// expr: no multiple lies within the bounds.
//
// With step = c x 10^-n, n >= 0 as small as it goes (0.25 = 25 x 10^-2,
// 1e2 = 100 x 10^0), and any bounds:
//   - integers_only: the multiples of k = c / gcd(c, 10^n) (0.5 -> 1,
//     2.5 -> 5, 100 -> 100);
//   - numbers: value x 10^n is a whole multiple of c, so fraction digits
//     after the n-th are 0.
// Unsupported, naming the step: k or c above kMaxMultipleOfModulus, n
// above 16 unless c = 1 (then every 16-digit fraction is a multiple), and
// a grammar of more than kMaxMultipleOfRules rules (a large c with bounds
// far apart: 997 within [0, 1e15]). The integer part has at most 16 digits
// with a bound or with c = 1, any number without (a residue automaton
// cannot count digits).
Status multiple_of_gbnf(const Decimal& step, bool integers_only, const NumberBounds& bounds,
                        std::string_view rule_prefix, GbnfFragment* out);

}  // namespace pvllm::structured
