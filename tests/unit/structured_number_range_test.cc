// Number bounds and multipleOf as grammar, against a reference that reads
// each candidate's exact value as a fixed-point digit string of its own
// (no use of number_range's decimals): for every spelling the grammar is
// meant to take (plain decimals; with bounds also one non-zero digit before
// an exponent) it takes exactly those in range, and it takes no other.
#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/number_range.h"

namespace pvllm::structured {
namespace {

// ---- the reference: exact values as fixed-point digit strings ----------------------------

constexpr int kPlaces = 400;  // digits either side of the point

struct Fixed {
  bool negative = false;
  std::string digits = std::string(2 * kPlaces, '0');  // 10^(kPlaces-1) .. 10^-kPlaces
  bool zero() const { return digits.find_first_not_of('0') == std::string::npos; }
};

Fixed exact(const std::string& json) {
  static const std::regex number(R"(^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([-+]?[0-9]+))?$)");
  std::smatch m;
  EXPECT_TRUE(std::regex_match(json, m, number)) << json;
  Fixed f;
  f.negative = m[1].length() > 0;
  const std::string whole = m[2].str(), fraction = m[3].str();
  const int e = m[4].matched ? std::stoi(m[4].str()) : 0;
  const std::string all = whole + fraction;
  for (size_t i = 0; i < all.size(); ++i) {
    const int power = static_cast<int>(whole.size()) - 1 - static_cast<int>(i) + e;
    const int at = kPlaces - 1 - power;
    if (all[i] == '0') continue;
    EXPECT_TRUE(at >= 0 && at < 2 * kPlaces) << json;
    f.digits[at] = all[i];
  }
  if (f.zero()) f.negative = false;
  return f;
}

int compare(const Fixed& a, const Fixed& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int c = a.digits.compare(b.digits);
  const int sign = (c > 0) - (c < 0);
  return a.negative ? -sign : sign;
}

// a + b, digit by digit with carries and borrows.
Fixed add(const Fixed& a, const Fixed& b) {
  auto magnitude_sum = [](const std::string& x, const std::string& y) {
    std::string out(x.size(), '0');
    int carry = 0;
    for (int i = static_cast<int>(x.size()) - 1; i >= 0; --i) {
      const int s = (x[i] - '0') + (y[i] - '0') + carry;
      out[i] = static_cast<char>('0' + s % 10);
      carry = s / 10;
    }
    return out;
  };
  auto magnitude_difference = [](const std::string& x, const std::string& y) {  // x >= y
    std::string out(x.size(), '0');
    int borrow = 0;
    for (int i = static_cast<int>(x.size()) - 1; i >= 0; --i) {
      int s = (x[i] - '0') - (y[i] - '0') - borrow;
      borrow = s < 0;
      out[i] = static_cast<char>('0' + (s + 10) % 10);
    }
    return out;
  };
  Fixed out;
  if (a.negative == b.negative) {
    out.negative = a.negative;
    out.digits = magnitude_sum(a.digits, b.digits);
  } else if (a.digits >= b.digits) {
    out.negative = a.negative;
    out.digits = magnitude_difference(a.digits, b.digits);
  } else {
    out.negative = b.negative;
    out.digits = magnitude_difference(b.digits, a.digits);
  }
  if (out.zero()) out.negative = false;
  return out;
}

Fixed unit(int power, bool negative = false) {  // +-10^power
  Fixed f;
  f.negative = negative;
  f.digits[kPlaces - 1 - power] = '1';
  return f;
}

// The shortest plain spelling, with `extra_zeros` more fraction digits.
std::string plain(const Fixed& f, int extra_zeros = 0) {
  std::string whole = f.digits.substr(0, kPlaces), fraction = f.digits.substr(kPlaces);
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size() - 1));
  fraction.erase(fraction.find_last_not_of('0') + 1);
  fraction += std::string(extra_zeros, '0');
  return (f.negative ? "-" : "") + whole + (fraction.empty() ? "" : "." + fraction);
}

// d.ddd e+-XX; exponent written with `exp_digits` digits at least, sign
// `plus` for positive exponents, `e` the letter.
std::string scientific(const Fixed& f, int exp_digits = 2, bool plus = true, char e = 'e') {
  if (f.zero()) return "0e0";
  const size_t first = f.digits.find_first_not_of('0');
  const size_t last = f.digits.find_last_not_of('0');
  const int power = kPlaces - 1 - static_cast<int>(first);
  std::string mantissa = f.digits.substr(first, last - first + 1);
  if (mantissa.size() > 1) mantissa = mantissa.substr(0, 1) + '.' + mantissa.substr(1);
  std::string exp = std::to_string(std::abs(power));
  if (static_cast<int>(exp.size()) < exp_digits)
    exp = std::string(exp_digits - exp.size(), '0') + exp;
  const std::string sign = power < 0 ? "-" : plus ? "+" : "";
  return (f.negative ? "-" : "") + mantissa + e + sign + exp;
}

// What Python's json.dumps writes for a float: repr, fixed notation for
// decimal exponents -4..15 (with ".0" when whole), else d.ddde+-XX.
std::string python_float(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const Fixed f = exact(std::string(buf, r.ptr));
  if (f.zero()) return std::signbit(v) ? "-0.0" : "0.0";
  const size_t first = f.digits.find_first_not_of('0');
  const int power = kPlaces - 1 - static_cast<int>(first);
  if (power < -4 || power >= 16) return scientific(f);
  const std::string p = plain(f);
  return p.find('.') == std::string::npos ? p + ".0" : p;
}

// The shapes number_range_gbnf is meant to take.
bool plain_shape(const std::string& s) {
  static const std::regex re(R"(^-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?$)");
  return std::regex_match(s, re);
}
bool scientific_shape(const std::string& s) {
  static const std::regex re(R"(^-?[1-9](\.[0-9]{1,16})?[eE][-+]?[0-9]{1,2}$)");
  return std::regex_match(s, re);
}

struct Bounds {
  std::string lo, hi;  // "" = none
  bool lo_exclusive = false, hi_exclusive = false;

  bool contains(const Fixed& v) const {
    if (!lo.empty()) {
      const int c = compare(v, exact(lo));
      if (c < 0 || (c == 0 && lo_exclusive)) return false;
    }
    if (!hi.empty()) {
      const int c = compare(v, exact(hi));
      if (c > 0 || (c == 0 && hi_exclusive)) return false;
    }
    return true;
  }
  std::string describe() const {
    return (lo.empty() ? "(-inf" : (lo_exclusive ? "(" : "[") + lo) + ", " +
           (hi.empty() ? "inf)" : hi + (hi_exclusive ? ")" : "]"));
  }
  NumberBounds to_api() const {
    NumberBounds b;
    b.has_lo = !lo.empty();
    b.has_hi = !hi.empty();
    if (b.has_lo) {
      EXPECT_TRUE(parse_decimal(lo, &b.lo).ok()) << lo;
    }
    if (b.has_hi) {
      EXPECT_TRUE(parse_decimal(hi, &b.hi).ok()) << hi;
    }
    b.lo_exclusive = lo_exclusive;
    b.hi_exclusive = hi_exclusive;
    return b;
  }
};

Grammar parse_expr(const std::string& expr,
                   const std::vector<std::pair<std::string, std::string>>& rules = {}) {
  std::string text = "root ::= " + expr + "\n";
  for (const auto& [name, body] : rules) text += name + " ::= " + body + "\n";
  Grammar g;
  const Status st = parse_gbnf(text, &g);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << text.substr(0, 2000);
  return g;
}

// Candidates around a value: itself and its neighbours 10^p either side
// for every p that a spelling can hold, each spelled plainly (with and
// without trailing zeros) and in exponent forms.
void spellings_near(const std::string& value, std::vector<std::string>* out) {
  const Fixed v = exact(value);
  std::vector<Fixed> near = {v};
  for (int p = -17; p <= 17; ++p) {
    near.push_back(add(v, unit(p)));
    near.push_back(add(v, unit(p, true)));
  }
  for (const Fixed& f : near) {
    out->push_back(plain(f));
    out->push_back(plain(f, 1));
    out->push_back(plain(f, 3));
    out->push_back(scientific(f));
    out->push_back(scientific(f, 1, false, 'E'));
    Fixed minus = f;
    minus.negative = !minus.negative;
    out->push_back(plain(minus));
  }
}

// Spellings the grammar is not meant to take, and edge cases.
const std::vector<std::string>& odd_spellings() {
  static const std::vector<std::string> list = {"0",
                                                "-0",
                                                "0.0",
                                                "-0.0",
                                                "0.000",
                                                "0e0",
                                                "-0e5",
                                                "0.0e-3",
                                                "15e2",
                                                "0.5e-3",
                                                "10e-1",
                                                "1e0",
                                                "1e-0",
                                                "1e+00",
                                                "9e99",
                                                "-9e99",
                                                "1e-99",
                                                "-1e-99",
                                                "1.0",
                                                "-1",
                                                "1",
                                                "1e1",
                                                "1e-1",
                                                "1e-05",
                                                "5e-324",
                                                "12345678901234567",
                                                "1234567890123456",
                                                "0.1234567890123456",
                                                "0.12345678901234567",
                                                "9999999999999999.9999999999999999",
                                                "-9999999999999999.9999999999999999"};
  return list;
}

// Runs `g` (number_range_gbnf of `b`) over the candidates: takes exactly
// the in-range ones of its shapes. Returns how many it took.
int check_candidates(const Grammar& g, const Bounds& b, const std::vector<std::string>& candidates,
                     const std::string& expr) {
  int taken = 0, wrong = 0;
  for (const std::string& s : candidates) {
    const bool accepted = grammar_accepts(g, s);
    const bool shape = plain_shape(s) || scientific_shape(s);
    const bool want = shape && b.contains(exact(s));
    taken += accepted;
    if (accepted != want && ++wrong <= 5) {
      ADD_FAILURE() << s << (accepted ? " taken" : " refused") << " by " << b.describe() << "\n"
                    << expr.substr(0, 3000);
    }
  }
  return taken;
}

std::string random_decimal(std::mt19937& rng, int max_int_digits, int max_frac_digits) {
  std::uniform_int_distribution<int> digit(0, 9), coin(0, 1);
  std::string s = coin(rng) ? "-" : "";
  const int n = std::uniform_int_distribution<int>(0, max_int_digits)(rng);
  if (n == 0) {
    s += "0";
  } else {
    s += static_cast<char>('1' + std::uniform_int_distribution<int>(0, 8)(rng));
    for (int i = 1; i < n; ++i) s += static_cast<char>('0' + digit(rng));
  }
  const int f = std::uniform_int_distribution<int>(0, max_frac_digits)(rng);
  if (f > 0) {
    s += ".";
    for (int i = 0; i < f; ++i) s += static_cast<char>('0' + digit(rng));
  }
  return s;
}

// ---- decimals ------------------------------------------------------------------------------

TEST(NumberRangeTest, DecimalsAreReadExactly) {
  Decimal a, b;
  ASSERT_TRUE(parse_decimal("0.1", &a).ok());
  EXPECT_EQ(a.digits, "1");
  EXPECT_EQ(a.exponent, -1);
  ASSERT_TRUE(parse_decimal("-2500e-2", &b).ok());
  EXPECT_TRUE(b.negative);
  EXPECT_EQ(b.digits, "25");
  EXPECT_EQ(b.exponent, 0);
  EXPECT_EQ(decimal_to_string(b), "-25");
  ASSERT_TRUE(parse_decimal("-0.000", &b).ok());
  EXPECT_TRUE(b.is_zero());
  EXPECT_FALSE(b.negative);
  for (const char* bad : {"", "-", "01", "1.", ".5", "1e", "+1", "1e+", "0x10", "1 "}) {
    EXPECT_FALSE(parse_decimal(bad, &a).ok()) << bad;
  }
  EXPECT_FALSE(parse_decimal("1e99999999", &a).ok());
  const Decimal tenth = decimal_from_double(0.1);
  EXPECT_EQ(tenth.digits, "1");
  EXPECT_EQ(tenth.exponent, -1);
  EXPECT_EQ(decimal_to_string(decimal_from_double(1e-05)), "0.00001");
  EXPECT_EQ(decimal_to_string(decimal_from_double(-12.75)), "-12.75");
  EXPECT_EQ(decimal_to_string(decimal_from_double(1.5e-30)), "1.5e-30");
  EXPECT_EQ(decimal_to_string(Decimal::from_int(INT64_MIN)), "-9223372036854775808");
  const char* ordered[] = {"-1e300", "-100",       "-99.5", "-0.1", "0",    "1e-300",
                           "0.1",    "0.10000001", "12.75", "100",  "1e16", "1e300"};
  for (size_t i = 0; i < std::size(ordered); ++i) {
    for (size_t j = 0; j < std::size(ordered); ++j) {
      ASSERT_TRUE(parse_decimal(ordered[i], &a).ok());
      ASSERT_TRUE(parse_decimal(ordered[j], &b).ok());
      EXPECT_EQ(compare_decimals(a, b), (i > j) - (i < j)) << ordered[i] << " " << ordered[j];
    }
  }
}

// ---- bounds --------------------------------------------------------------------------------

TEST(NumberRangeTest, ZeroToHundredTakesWhatPythonWrites) {
  const Bounds b{"0", "100"};
  const std::string expr = number_range_gbnf(b.to_api());
  const Grammar g = parse_expr(expr);
  for (const char* ok : {"0",
                         "5",
                         "99.5",
                         "100",
                         "100.0",
                         "0.001",
                         "1e-05",
                         "12.75",
                         "0.0",
                         "5.0",
                         "-0.0",
                         "-0",
                         "1e+02",
                         "1.0e2",
                         "1E2",
                         "9.999999999999999e+01",
                         "100.0000000000000000",
                         "0.0000000000000001",
                         "2.5e-99",
                         "1e-5"}) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok << "\n" << expr;
  }
  for (const char* bad : {"-1", "100.5", "100.0000000000001", "1e+03", "-1e-05", "101",
                          "1.0000000000000001e2", "1000", "-0.0000000000000001", "1e3", "00", "01",
                          "1.", ".5", "1e+100", "15e1", "0.5e1", "+5"}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad << "\n" << expr;
  }
}

TEST(NumberRangeTest, ExclusiveAndFractionalBounds) {
  struct Case {
    Bounds b;
    std::vector<const char*> ok, bad;
  };
  const Case cases[] = {
      {{"0", "", true},
       {"1e-99", "0.0000000000000001", "5", "1e+99"},
       {"0", "-0.0", "0.0", "-1e-99"}},
      {{"", "0", false, true},
       {"-1e-99", "-5", "-0.0000000000000001"},
       {"0", "-0", "-0.0", "1e-99"}},
      {{"0.1", "0.2"},
       {"0.1", "0.10", "0.2", "0.15", "1e-1", "2e-01", "1.5e-1"},
       {"0.09999999999999999", "0.2000000000000001", "0.3", "2.0000000000000001e-1"}},
      {{"-2.5", "-2.25", true, true},
       {"-2.3", "-2.4999999999999999", "-2.2500000000000001"},
       {"-2.5", "-2.25", "-2.50", "-2.2", "-2.6", "2.3"}},
      {{"1e-20", "1e20"},
       {"1e-20", "1e20", "1e-19", "0.0000000000000001", "9999999999999999.5"},
       {"0", "9e-21", "1.1e20", "0.00000000000000001"}},
  };
  for (const Case& c : cases) {
    const std::string expr = number_range_gbnf(c.b.to_api());
    const Grammar g = parse_expr(expr);
    for (const char* s : c.ok) EXPECT_TRUE(grammar_accepts(g, s)) << s << " " << c.b.describe();
    for (const char* s : c.bad) EXPECT_FALSE(grammar_accepts(g, s)) << s << " " << c.b.describe();
  }
  EXPECT_EQ(number_range_gbnf(Bounds{"1", "1", true, false}.to_api()), "");
  EXPECT_EQ(number_range_gbnf(Bounds{"2", "1"}.to_api()), "");
  EXPECT_EQ(number_range_gbnf(Bounds{"1e20", ""}.to_api()).find("[eE]") != std::string::npos, true);
}

// Bounds of many shapes, every candidate near each bound and near zero.
TEST(NumberRangeTest, TakesExactlyTheValuesInRangeNearTheBounds) {
  std::vector<Bounds> all;
  const std::vector<std::string> values = {"0",
                                           "1",
                                           "-1",
                                           "100",
                                           "0.1",
                                           "-0.1",
                                           "99.5",
                                           "12.75",
                                           "1e-5",
                                           "-2.5",
                                           "1e16",
                                           "-3e17",
                                           "9999999999999999",
                                           "0.0000000000000005",
                                           "123456.789",
                                           "1e-20",
                                           "7"};
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = 0; j < values.size(); ++j) {
      if (compare(exact(values[i]), exact(values[j])) > 0) continue;
      all.push_back({values[i], values[j], (i + j) % 2 == 1, (i + j) % 3 == 1});
    }
    all.push_back({values[i], "", i % 2 == 1, false});
    all.push_back({"", values[i], false, i % 2 == 0});
  }
  all.push_back({"", ""});
  for (const Bounds& b : all) {
    std::vector<std::string> candidates = odd_spellings();
    for (const std::string& v : {b.lo, b.hi, std::string("0")}) {
      if (!v.empty()) spellings_near(v, &candidates);
    }
    const std::string expr = number_range_gbnf(b.to_api());
    if (expr.empty()) {
      for (const std::string& s : candidates) {
        EXPECT_FALSE((plain_shape(s) || scientific_shape(s)) && b.contains(exact(s)))
            << s << " in " << b.describe() << " that spells nothing";
      }
      continue;
    }
    const Grammar g = parse_expr(expr);
    check_candidates(g, b, candidates, expr);
  }
}

// Random bounds, random spellings: taken exactly when in range (of the
// shapes it takes), including what Python writes for doubles in and near
// the range.
TEST(NumberRangeTest, RandomBoundsAndSpellings) {
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> coin(0, 1), small(-6, 6), pick(0, 5);
  int taken = 0, total = 0;
  for (int round = 0; round < 60; ++round) {
    auto bound = [&] {
      std::string s = random_decimal(rng, 1 + pick(rng), pick(rng));
      if (coin(rng)) {
        s += 'e';
        s += std::to_string(small(rng));
      }
      return plain(exact(s));
    };
    Bounds b;
    if (round % 7 != 0) b.lo = bound();
    if (round % 5 != 0) b.hi = bound();
    if (!b.lo.empty() && !b.hi.empty() && compare(exact(b.lo), exact(b.hi)) > 0) {
      std::swap(b.lo, b.hi);
    }
    b.lo_exclusive = coin(rng);
    b.hi_exclusive = coin(rng);
    std::vector<std::string> candidates;
    for (int i = 0; i < 300; ++i) {
      const std::string d = random_decimal(rng, 1 + pick(rng) * 3, pick(rng) * 3);
      switch (i % 4) {
        case 0:
          candidates.push_back(d);
          break;
        case 1:
          candidates.push_back(d + "e" + std::to_string(small(rng) * 3));
          break;
        case 2:
          candidates.push_back(scientific(exact(d), 1 + coin(rng), coin(rng)));
          break;
        default: {
          // Near a bound: its digits with one changed or appended.
          std::string s = b.lo.empty() ? (b.hi.empty() ? "0" : b.hi) : b.lo;
          if (coin(rng) && !b.hi.empty()) s = b.hi;
          const size_t at = std::uniform_int_distribution<size_t>(0, s.size())(rng);
          if (at == s.size()) {
            s += s.find('.') == std::string::npos ? "." : "";
            s += static_cast<char>('0' + pick(rng));
          } else if (s[at] >= '0' && s[at] <= '9' && at > 0) {
            s[at] = static_cast<char>('0' + std::uniform_int_distribution<int>(0, 9)(rng));
          }
          static const std::regex number(R"(^-?(0|[1-9][0-9]*)(\.[0-9]+)?$)");
          if (std::regex_match(s, number)) candidates.push_back(s);
        }
      }
    }
    // Doubles in and around the range, as Python writes them.
    const double lo = b.lo.empty() ? -1e6 : std::stod(b.lo),
                 hi = b.hi.empty() ? 1e6 : std::stod(b.hi);
    std::uniform_real_distribution<double> in(lo - (hi - lo) * 0.1 - 1e-9,
                                              hi + (hi - lo) * 0.1 + 1e-9);
    for (int i = 0; i < 100; ++i) candidates.push_back(python_float(in(rng)));
    for (double v : {lo, hi, std::nextafter(lo, -1e300), std::nextafter(lo, 1e300),
                     std::nextafter(hi, -1e300), std::nextafter(hi, 1e300)}) {
      candidates.push_back(python_float(v));
    }
    const std::string expr = number_range_gbnf(b.to_api());
    if (expr.empty()) continue;
    const Grammar g = parse_expr(expr);
    taken += check_candidates(g, b, candidates, expr);
    total += static_cast<int>(candidates.size());
  }
  // Not vacuous: a fair share of the candidates is in range.
  EXPECT_GT(taken, total / 10);
}

// ---- multipleOf ------------------------------------------------------------------------------

// Whether the exact value of `s` is a multiple of `step` (c x 10^-n read
// off its digits).
bool is_multiple(const std::string& s, const std::string& step) {
  const Fixed v = exact(s), st = exact(step);
  const size_t last = st.digits.find_last_not_of('0');
  const size_t first = st.digits.find_first_not_of('0');
  uint64_t c = std::stoull(st.digits.substr(first, last - first + 1));
  // v / 10^(point - last - 1) must be a whole number, and that a multiple of c.
  if (v.digits.find_first_not_of('0', last + 1) != std::string::npos) return false;
  uint64_t r = 0;
  for (size_t i = 0; i <= last; ++i) r = (r * 10 + (v.digits[i] - '0')) % c;
  return r == 0;
}

struct MultipleCase {
  std::string step;
  bool integers;
  Bounds bounds;
  bool any_length = false;  // integer parts longer than 16 digits taken
};

TEST(NumberRangeTest, MultiplesTakeExactlyTheMultiples) {
  const MultipleCase cases[] = {
      {"7", true, {}, true},
      {"5", true, {}, true},
      {"12", false, {}, true},
      {"1000", true, {}, true},
      {"0.5", true, {}},        // every integer
      {"2.5", true, {}, true},  // multiples of 5
      {"0.01", false, {}},
      {"0.25", false, {}, true},
      {"1.5", false, {}, true},
      {"0.003", false, {}, true},
      {"7", true, {"-100", "1000"}},
      {"3", true, {"10", "", true}},
      {"25", true, {"", "-7"}},
      {"7", false, {"-12.5", "99.5"}},
      {"4", true, {"1e15", "9999999999999999"}},
      {"0.01", false, {"0", "100"}},
      {"0.1", false, {"-1.55", "2.25", true, true}},
      {"1e-3", false, {"0.0005", ""}},
      {"1", false, {"0.5", "3.5"}},
      {"13", true, {"0", "1e16"}},
      {"0.5", false, {"0", "5"}},
      {"0.25", false, {"-1.3", "2.6", true, false}},
      {"1.5", false, {"-10", "100", false, true}},
      {"0.003", false, {"0.001", "0.5"}},
      {"2.5", false, {"", "1000"}},
  };
  std::mt19937 rng(5);
  for (const MultipleCase& c : cases) {
    Decimal step;
    ASSERT_TRUE(parse_decimal(c.step, &step).ok());
    GbnfFragment frag;
    const Status st = multiple_of_gbnf(step, c.integers, c.bounds.to_api(), "m", &frag);
    ASSERT_TRUE(st.ok()) << c.step << ": " << st.message();
    ASSERT_FALSE(frag.expr.empty()) << c.step;
    const Grammar g = parse_expr(frag.expr, frag.rules);
    std::vector<std::string> candidates = odd_spellings();
    for (int64_t x = -1100; x <= 1100; ++x) {
      candidates.push_back(std::to_string(x));
      if (x % 7 == 0) candidates.push_back(std::to_string(x) + ".0");
      if (x % 11 == 0) candidates.push_back(std::to_string(x) + ".000");
    }
    for (int i = 0; i < 1500; ++i) candidates.push_back(random_decimal(rng, 1 + i % 5, i % 4));
    for (const std::string& v : {c.bounds.lo, c.bounds.hi}) {
      if (!v.empty()) spellings_near(v, &candidates);
    }
    candidates.push_back("123456789012345678901234");  // longer than 16 digits
    candidates.push_back("-70000000000000000007");
    int wrong = 0, taken = 0;
    for (const std::string& s : candidates) {
      const bool accepted = grammar_accepts(g, s);
      static const std::regex integer(R"(^(0|-?[1-9][0-9]*)$)");
      static const std::regex number(R"(^-?(0|[1-9][0-9]*)(\.[0-9]{1,16})?$)");
      const size_t int_digits =
          s.find('.') == std::string::npos ? s.size() - (s[0] == '-') : s.find('.') - (s[0] == '-');
      const bool shape =
          std::regex_match(s, c.integers ? integer : number) && (c.any_length || int_digits <= 16);
      const bool want = shape && is_multiple(s, c.step) && c.bounds.contains(exact(s));
      taken += accepted;
      if (accepted != want && ++wrong <= 5) {
        ADD_FAILURE() << s << (accepted ? " taken" : " refused") << " as a multiple of " << c.step
                      << (c.integers ? " (integers)" : "") << " in " << c.bounds.describe() << "\n"
                      << frag.expr.substr(0, 2000);
      }
    }
    EXPECT_GT(taken, 0) << c.step;
  }
}

// Random steps c x 10^-n and bounds; candidates are multiples (q x c with
// the point n digits from the right) and their neighbours.
TEST(NumberRangeTest, RandomMultiplesAndBounds) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> coin(0, 1), cs(1, 60), ns(0, 3), qs(-3000, 3000);
  int taken = 0, total = 0;
  for (int round = 0; round < 40; ++round) {
    const int c = cs(rng), n = ns(rng);
    auto scaled = [&](int64_t q) {  // q x 10^-n as text
      std::string digits = std::to_string(q < 0 ? -q : q);
      if (n > 0) {
        if (static_cast<int>(digits.size()) <= n) {
          digits = std::string(n + 1 - digits.size(), '0') + digits;
        }
        digits = digits.substr(0, digits.size() - n) + '.' + digits.substr(digits.size() - n);
      }
      return plain(exact((q < 0 ? "-" : "") + digits));
    };
    const std::string step = scaled(c);
    const bool integers = coin(rng);
    Bounds b;
    if (coin(rng)) b.lo = scaled(qs(rng) * (coin(rng) ? 1 : c));
    if (coin(rng)) b.hi = scaled(qs(rng) * (coin(rng) ? 1 : c));
    if (!b.lo.empty() && !b.hi.empty() && compare(exact(b.lo), exact(b.hi)) > 0) {
      std::swap(b.lo, b.hi);
    }
    b.lo_exclusive = coin(rng);
    b.hi_exclusive = coin(rng);
    Decimal d;
    ASSERT_TRUE(parse_decimal(step, &d).ok());
    GbnfFragment frag;
    const Status st = multiple_of_gbnf(d, integers, b.to_api(), "mult", &frag);
    ASSERT_TRUE(st.ok()) << step << ": " << st.message();
    if (frag.expr.empty()) continue;
    const Grammar g = parse_expr(frag.expr, frag.rules);
    std::vector<std::string> candidates;
    for (int i = 0; i < 200; ++i) {
      const int64_t q =
          qs(rng) * int64_t{c} + (i % 3 == 0 ? std::uniform_int_distribution<int>(-2, 2)(rng) : 0);
      const Fixed v = exact(scaled(q));
      candidates.push_back(plain(v));
      candidates.push_back(plain(v, 1 + i % 3));
    }
    for (const std::string& v : {b.lo, b.hi}) {
      if (!v.empty()) spellings_near(v, &candidates);
    }
    static const std::regex integer(R"(^(0|-?[1-9][0-9]{0,15})$)");
    static const std::regex number(R"(^-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?$)");
    int wrong = 0;
    for (const std::string& s : candidates) {
      const bool accepted = grammar_accepts(g, s);
      const bool want = std::regex_match(s, integers ? integer : number) && is_multiple(s, step) &&
                        b.contains(exact(s));
      taken += accepted;
      ++total;
      if (accepted != want && ++wrong <= 5) {
        ADD_FAILURE() << s << (accepted ? " taken" : " refused") << " as a multiple of " << step
                      << (integers ? " (integers)" : "") << " in " << b.describe() << "\n"
                      << frag.expr.substr(0, 2000);
      }
    }
  }
  // Not vacuous: thousands of multiples taken.
  EXPECT_GT(taken, 1000) << total;
}

// Sizes stay within what a schema with many number fields can carry.
TEST(NumberRangeTest, GrammarsStaySmall) {
  EXPECT_LT(number_range_gbnf(Bounds{"0", "100"}.to_api()).size(), 400u);
  EXPECT_LT(number_range_gbnf(Bounds{"-123.456", "987.654321", true, true}.to_api()).size(), 3000u);
  auto rules = [](const char* step, const Bounds& b) {
    Decimal d;
    EXPECT_TRUE(parse_decimal(step, &d).ok());
    GbnfFragment frag;
    EXPECT_TRUE(multiple_of_gbnf(d, true, b.to_api(), "m", &frag).ok()) << step;
    return frag.rules.size();
  };
  EXPECT_LE(rules("1000", {}), 4u);  // trailing zeros counted, not residues
  EXPECT_EQ(rules("7", {}), 7u);
  EXPECT_LT(rules("7", {"0", "1000000"}), 100u);
  EXPECT_LT(rules("1000", {"0", "9999999999999999"}), 100u);
}

TEST(NumberRangeTest, MultiplesRefuseWhatTheyCannotSpell) {
  struct Case {
    const char* step;
    bool integers;
    Bounds bounds;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"0", true, {}, StatusCode::kInvalidArgument, "multipleOf 0"},
      {"-5", true, {}, StatusCode::kInvalidArgument, "multipleOf -5"},
      {"1001", true, {}, StatusCode::kUnsupported, "multipleOf 1001"},
      {"1e5", false, {}, StatusCode::kUnsupported, "multipleOf 100000"},
      {"0.0001234", false, {}, StatusCode::kUnsupported, "multipleOf 0.0001234"},
      {"1e-17", false, {}, StatusCode::kOk, ""},  // every 16-digit fraction is one
      {"997", true, {"0", "1e15"}, StatusCode::kUnsupported, "rules"},
  };
  for (const Case& c : cases) {
    Decimal step;
    ASSERT_TRUE(parse_decimal(c.step, &step).ok());
    GbnfFragment frag;
    const Status st = multiple_of_gbnf(step, c.integers, c.bounds.to_api(), "m", &frag);
    EXPECT_EQ(st.code(), c.code) << c.step << ": " << st.message();
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << st.message();
  }
  // No multiple between the bounds: an empty expression.
  Decimal seven;
  ASSERT_TRUE(parse_decimal("7", &seven).ok());
  GbnfFragment frag;
  ASSERT_TRUE(multiple_of_gbnf(seven, true, Bounds{"8", "13"}.to_api(), "m", &frag).ok());
  EXPECT_EQ(frag.expr, "");
}

}  // namespace
}  // namespace pvllm::structured
