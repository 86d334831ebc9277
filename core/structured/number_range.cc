// A number's spelling as a digit string: its integer digits, then its
// fraction digits. With a fixed count L of integer digits, comparing two
// values is comparing their digit strings (padded with zeros after the
// last), so the spellings between two bounds are those that follow the
// low bound's digits until they go above it and the high bound's until
// they go below. The Speller writes that as an expression: a branch per
// tight path (still equal to a bound), free digits off it. Lengths L are
// decades [10^(L-1), 10^L); an exponent after one non-zero digit is a
// decade [10^E, 10^(E+1)) of its own, so only the decades that hold a
// bound need a Speller, the others are all in or all out.
//
// Residues (multipleOf c x 10^-n): value x 10^n mod c read digit by digit,
// r -> (10 r + d) mod c, over the integer digits and the first n fraction
// digits. Off a tight path the rest is a state of that automaton: one rule
// per (digits left, residue), shared by every path that reaches it.
#include "core/structured/number_range.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>

namespace pvllm::structured {
// Named, so that the unity build's other files' helpers do not collide.
namespace number_spelling {
namespace {

constexpr int kIntDigits = 16;    // json-number's integer part
constexpr int kFracDigits = 16;   // and fraction
constexpr int kMaxExponent = 99;  // two exponent digits

// ---- decimals ----------------------------------------------------------------------

Decimal normalized(bool negative, std::string digits, int64_t exponent) {
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return Decimal{};
  digits.erase(0, first);
  const size_t last = digits.find_last_not_of('0');
  exponent += static_cast<int64_t>(digits.size() - 1 - last);
  digits.resize(last + 1);
  return Decimal{negative, std::move(digits), static_cast<int32_t>(exponent)};
}

Decimal zero() { return Decimal{}; }
Decimal power_of_ten(int64_t p) { return Decimal{false, "1", static_cast<int32_t>(p)}; }
Decimal negated(Decimal d) {
  if (!d.is_zero()) d.negative = !d.negative;
  return d;
}
Decimal shifted(Decimal d, int64_t places) {
  if (!d.is_zero()) d.exponent = static_cast<int32_t>(d.exponent + places);
  return d;
}

// The power of ten of the leading digit; requires a non-zero value.
int64_t leading_power(const Decimal& d) {
  return d.exponent + static_cast<int64_t>(d.digits.size()) - 1;
}

int compare_magnitudes(const Decimal& a, const Decimal& b) {
  if (a.is_zero() || b.is_zero()) return static_cast<int>(!a.is_zero()) - !b.is_zero();
  const int64_t pa = leading_power(a), pb = leading_power(b);
  if (pa != pb) return pa < pb ? -1 : 1;
  // Same leading power: digit strings compare as the values do (no
  // trailing zeros, so a proper prefix is the smaller).
  const int c = a.digits.compare(b.digits);
  return (c > 0) - (c < 0);
}

// ---- expressions ----------------------------------------------------------------------

// A set of strings: whether it holds the empty one, and an expression for
// the others ("" when none).
struct Lang {
  bool eps = false;
  std::string expr;
  bool none() const { return !eps && expr.empty(); }
  bool operator==(const Lang& o) const { return eps == o.eps && expr == o.expr; }
};

std::string concat(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Alternatives, in parentheses when more than one, so that the result
// can be followed by anything.
std::string join(const std::vector<std::string>& parts) {
  if (parts.empty()) return "";
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : " ") + parts[i];
  return out + " )";
}

// `head` (non-empty) followed by `rest` (not none).
std::string then(const std::string& head, const Lang& rest) {
  if (rest.expr.empty()) return head;
  return concat(head, rest.eps ? "( " + rest.expr + " )?" : rest.expr);
}

std::string repeat(const std::string& atom, int lo, int hi) {
  if (hi <= 0 || hi < lo) return "";
  if (lo == hi) return lo == 1 ? atom : atom + "{" + std::to_string(lo) + "}";
  if (lo == 0 && hi == 1) return atom + "?";
  return atom + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

// A class of the digits in `digits` (ascending, non-empty).
std::string digit_class(const std::string& digits) {
  if (digits.size() == 1) return "\"" + digits + "\"";
  std::string out = "[";
  for (size_t i = 0; i < digits.size();) {
    size_t j = i;
    while (j + 1 < digits.size() && digits[j + 1] == digits[j] + 1) ++j;
    out += digits[i];
    if (j > i) out += std::string(j > i + 1 ? "-" : "") + digits[j];
    i = j + 1;
  }
  return out + "]";
}

// Digit alternatives each followed by its own continuation, digits with
// the same continuation in one class.
class DigitGroups {
 public:
  void add(char d, Lang rest) {
    if (rest.none()) return;
    for (auto& [lang, digits] : groups_) {
      if (lang == rest) {
        digits += d;
        return;
      }
    }
    groups_.push_back({std::move(rest), std::string(1, d)});
  }
  std::vector<std::string> alternatives() const {
    std::vector<std::string> out;
    for (const auto& [lang, digits] : groups_) out.push_back(then(digit_class(digits), lang));
    return out;
  }

 private:
  std::vector<std::pair<Lang, std::string>> groups_;
};

// ---- residues ----------------------------------------------------------------------

// The value x 10^n mod m read digit by digit: the integer digits and the
// first n fraction digits, r -> (10 r + d) mod m; fraction digits after
// the n-th are 0. Its states become rules on demand, named by prefix.
class Residues {
 public:
  Residues(uint32_t modulus, int n, bool fraction, std::string prefix,
           std::vector<std::pair<std::string, std::string>>* rules)
      : m_(modulus), n_(n), fraction_(fraction), prefix_(std::move(prefix)), rules_(rules) {
    uint64_t p = 1 % m_;
    for (int j = 0; j <= 20; ++j, p = p * 10 % m_) {
      if (p == 0) {
        zero_power_ = j;
        break;
      }
    }
  }
  uint32_t modulus() const { return m_; }
  int counted_fraction() const { return n_; }
  bool overflow() const { return rules_->size() > kMaxMultipleOfRules; }
  uint32_t next(uint32_t r, char d) const {
    return static_cast<uint32_t>((r * uint64_t{10} + (d - '0')) % m_);
  }
  // Whether residue r after j fraction digits (j <= n) ends a multiple.
  bool ends(uint32_t r, int j) const {
    uint64_t v = r;
    for (int i = j; i < n_; ++i) v = v * 10 % m_;
    return v == 0;
  }

  // What may follow an integer part with residue r.
  Lang after_integer(uint32_t r) {
    Lang out{ends(r, 0), ""};
    if (!fraction_) return out;
    const std::string step = fraction_step(0, r);
    if (!step.empty()) out.expr = "\".\" " + step;
    return out;
  }
  // A digit at fraction position j (j read) and what follows; "" when none.
  std::string fraction_step(int j, uint32_t r) {
    if (j >= kFracDigits) return "";
    if (j >= n_) return r == 0 ? repeat("\"0\"", 1, kFracDigits - j) : "";
    return rule('f', j, r, [&](DigitGroups* groups) {
      for (char d = '0'; d <= '9'; ++d) {
        const uint32_t nr = next(r, d);
        groups->add(d, Lang{ends(nr, j + 1), fraction_step(j + 1, nr)});
      }
    });
  }
  // m >= 1 more integer digits from residue r, and what follows them.
  std::string integer_digits(int m, uint32_t r) {
    // 10^zero_power_ is 0 mod m_: the digits before the last zero_power_
    // do not count.
    if (zero_power_ > 0 && m > zero_power_) {
      const std::string last = integer_digits(zero_power_, 0);
      return last.empty() ? "" : concat(repeat("[0-9]", m - zero_power_, m - zero_power_), last);
    }
    return rule('g', m, r, [&](DigitGroups* groups) {
      for (char d = '0'; d <= '9'; ++d) {
        const uint32_t nr = next(r, d);
        groups->add(d, m == 1 ? after_integer(nr) : Lang{false, integer_digits(m - 1, nr)});
      }
    });
  }

  // Every spelling of a multiple, the integer part of any length.
  std::string unbounded(bool negative_zero) {
    const std::vector<uint32_t> rep = representatives();
    for (uint32_t r = 0; r < m_ && !overflow(); ++r) {
      if (rep[r] != r) continue;
      DigitGroups groups;
      for (char d = '0'; d <= '9'; ++d) groups.add(d, integer_state(rep[next(r, d)]));
      std::vector<std::string> alts = groups.alternatives();
      const Lang after = after_integer(r);
      if (!after.expr.empty()) alts.push_back(after.expr);
      rules_->emplace_back(name('i', 0, r), alternatives(alts));
    }
    DigitGroups lead;
    for (char d = '1'; d <= '9'; ++d) lead.add(d, integer_state(rep[next(0, d)]));
    const std::string nonzero = join(lead.alternatives());
    const std::string zero_part = then("\"0\"", after_integer(0));
    if (!negative_zero) return join({zero_part, "\"-\"? " + nonzero});
    return "\"-\"? " + join({zero_part, nonzero});
  }

 private:
  // Per residue, the smallest residue with the same future: classes split
  // until residues in one class step to one class on every digit (Moore's
  // minimization), from "ends a multiple or not". With fraction digits
  // counted (n > 0) what follows the integer part tells residues apart
  // too; those stay their own.
  std::vector<uint32_t> representatives() const {
    std::vector<uint32_t> cls(m_), rep(m_);
    for (uint32_t r = 0; r < m_; ++r) cls[r] = n_ > 0 ? r : (r == 0 ? 0 : 1);
    for (size_t count = 0;;) {
      std::map<std::vector<uint32_t>, uint32_t> ids;
      std::vector<uint32_t> next_cls(m_);
      for (uint32_t r = 0; r < m_; ++r) {
        std::vector<uint32_t> key = {cls[r]};
        for (char d = '0'; d <= '9'; ++d) key.push_back(cls[next(r, d)]);
        next_cls[r] = ids.emplace(std::move(key), static_cast<uint32_t>(ids.size())).first->second;
      }
      cls = std::move(next_cls);
      if (ids.size() == count) break;
      count = ids.size();
    }
    std::map<uint32_t, uint32_t> first;  // class -> smallest residue
    for (uint32_t r = 0; r < m_; ++r) rep[r] = first.emplace(cls[r], r).first->second;
    return rep;
  }
  static std::string alternatives(const std::vector<std::string>& alts) {
    std::string body;
    for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
    return body;
  }
  std::string name(char kind, int index, uint32_t r) const {
    return prefix_ + "-" + kind + (kind == 'i' ? "" : std::to_string(index) + "-") +
           std::to_string(r);
  }
  // After integer digits with residue r, any number more (every residue
  // can still reach 0).
  Lang integer_state(uint32_t r) { return Lang{ends(r, 0), name('i', 0, r)}; }
  // A memoized rule for state (kind, index, r), "" when it has no strings.
  template <typename Fill>
  std::string rule(char kind, int index, uint32_t r, Fill fill) {
    const auto key = std::make_tuple(kind, index, r);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    memo_[key] = "";
    if (overflow()) return "";
    DigitGroups groups;
    fill(&groups);
    const std::string body = alternatives(groups.alternatives());
    if (body.empty()) return "";
    const std::string rule_name = name(kind, index, r);
    rules_->emplace_back(rule_name, body);
    memo_[key] = rule_name;
    return rule_name;
  }

  uint32_t m_;
  int n_;
  bool fraction_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::string>>* rules_;
  int zero_power_ = -1;  // smallest j with 10^j = 0 mod m_, if any
  std::map<std::tuple<char, int, uint32_t>, std::string> memo_;
};

// ---- spelling one decade ----------------------------------------------------------------

// What the digits may be.
struct Shape {
  int int_digits = 1;               // L
  bool fraction = true;             // whether "." and fraction digits may follow
  int free_fraction = kFracDigits;  // fraction digits that may be other than 0
  Residues* residues = nullptr;     // when set, the integer part is 0 mod its modulus
};

// A bound as digits at the positions of an L-digit spelling.
struct Bound {
  bool active = false;
  bool exclusive = false;
  std::string digits;  // positions 0 .. L + kFracDigits - 1
  bool tail = false;   // a non-zero digit after them
  char at(int k) const { return k < static_cast<int>(digits.size()) ? digits[k] : '0'; }
  bool rest_zero(int k) const {
    return !tail && (k >= static_cast<int>(digits.size()) ||
                     digits.find_first_not_of('0', k) == std::string::npos);
  }
};

// Requires 0 <= v < 10^L.
Bound align(const Decimal& v, int L, bool exclusive) {
  Bound b;
  b.active = true;
  b.exclusive = exclusive;
  b.digits.assign(L + kFracDigits, '0');
  for (size_t i = 0; i < v.digits.size(); ++i) {
    const int64_t power = v.exponent + static_cast<int64_t>(v.digits.size() - 1 - i);
    const int64_t pos = L - 1 - power;
    if (pos >= L + kFracDigits) {
      b.tail = true;
      break;
    }
    b.digits[pos] = v.digits[i];
  }
  return b;
}

// Fraction digits from position j (j written), at least `need` of them.
std::string fraction_digits(const Shape& s, int j, int need) {
  const int any = std::max(0, s.free_fraction - j);
  const int zeros = kFracDigits - std::max(j, s.free_fraction);
  if (any == 0) return repeat("\"0\"", need, zeros);
  if (zeros == 0) return repeat("[0-9]", need, any);
  std::vector<std::string> parts = {concat(repeat("[0-9]", any, any), repeat("\"0\"", 0, zeros))};
  if (any - 1 >= need) parts.push_back(repeat("[0-9]", need, any - 1));
  return join(parts);
}

// What may follow the integer part, unbounded.
Lang after_integer(const Shape& s) {
  return Lang{true, s.fraction ? "\".\" " + fraction_digits(s, 0, 1) : ""};
}

class Speller {
 public:
  Speller(const Shape& shape, Bound lo, Bound hi)
      : s_(shape), lo_(std::move(lo)), hi_(std::move(hi)) {}

  Lang spell() { return rest(0, lo_.active, hi_.active, 0); }

 private:
  // Whether residue r after k digits ends a multiple (zeros after it).
  bool ends(int k, uint32_t r) const {
    const Residues* res = s_.residues;
    if (!res) return true;
    for (int i = k; i < s_.int_digits; ++i) r = res->next(r, '0');
    return res->ends(r, std::clamp(k - s_.int_digits, 0, res->counted_fraction()));
  }

  // The strings after k digits, with the digits so far equal to the low
  // bound's (tl) or the high bound's (th), and residue r.
  Lang rest(int k, bool tl, bool th, uint32_t r) {
    const int L = s_.int_digits;
    if (!tl && !th) return free_rest(k, r);
    if (tl && !th && lo_.rest_zero(k) && !lo_.exclusive) return free_rest(k, r);
    if (th && !tl && hi_.rest_zero(k)) return hi_.exclusive ? Lang{} : zero_rest(k, r);
    if (tl && th && lo_.rest_zero(k) && hi_.rest_zero(k)) {
      return lo_.exclusive || hi_.exclusive ? Lang{} : zero_rest(k, r);
    }
    Lang out;
    if (k < L) {
      out.expr = digit_step(k, tl, th, r);
      return out;
    }
    out.eps = ends(k, r) && (!tl || (lo_.rest_zero(k) && !lo_.exclusive)) &&
              (!th || !(hi_.exclusive && hi_.rest_zero(k)));
    if (k == L) {
      if (!s_.fraction) return out;
      const std::string step = digit_step(k, tl, th, r);
      if (!step.empty()) out.expr = "\".\" " + step;
    } else if (k < L + kFracDigits) {
      out.expr = digit_step(k, tl, th, r);
    }
    return out;
  }

  // One digit at position k and what follows it.
  std::string digit_step(int k, bool tl, bool th, uint32_t r) {
    const int L = s_.int_digits;
    const bool counted = k < L + s_.free_fraction;
    const char cap = counted ? '9' : '0';
    const char dl = tl ? lo_.at(k) : '0', dh = th ? hi_.at(k) : '9';
    DigitGroups groups;
    for (char d = dl; d <= std::min(dh, cap); ++d) {
      const uint32_t nr = s_.residues && counted ? s_.residues->next(r, d) : r;
      groups.add(d, rest(k + 1, tl && d == dl, th && d == dh, nr));
    }
    return join(groups.alternatives());
  }

  Lang free_rest(int k, uint32_t r) {
    const int L = s_.int_digits;
    Residues* res = s_.residues;
    if (k < L) {
      const int m = L - k;
      if (!res) return Lang{false, then(repeat("[0-9]", m, m), after_integer(s_))};
      return Lang{false, res->integer_digits(m, r)};
    }
    if (k == L) return res ? res->after_integer(r) : after_integer(s_);
    if (!res) return Lang{true, fraction_digits(s_, k - L, 1)};
    const int j = std::min(k - L, res->counted_fraction());
    return Lang{res->ends(r, j), res->fraction_step(k - L, r)};
  }

  // The strings of zeros only.
  Lang zero_rest(int k, uint32_t r) {
    const int L = s_.int_digits;
    if (!ends(k, r)) return Lang{};
    const Lang after{true, s_.fraction ? "\".\" " + repeat("\"0\"", 1, kFracDigits) : ""};
    if (k < L) return Lang{false, then(repeat("\"0\"", L - k, L - k), after)};
    if (k == L) return after;
    return Lang{true, repeat("\"0\"", 1, kFracDigits - (k - L))};
  }

  Shape s_;
  Bound lo_, hi_;
};

// ---- intervals of magnitudes -------------------------------------------------------------

// Non-negative values from lo (>= 0) to hi, or up without has_hi.
struct Interval {
  Decimal lo;
  bool lo_exclusive = false;
  bool has_hi = false;
  Decimal hi;
  bool hi_exclusive = false;

  bool empty() const {
    if (!has_hi) return false;
    const int c = compare_decimals(lo, hi);
    return c > 0 || (c == 0 && (lo_exclusive || hi_exclusive));
  }
  Interval shifted_by(int64_t places) const {
    Interval out = *this;
    out.lo = shifted(lo, places);
    out.hi = shifted(hi, places);
    return out;
  }
};

enum class Cover { kNone, kSome, kAll };

// How much of the spellings with L integer digits (the first non-zero
// when `leading_nonzero`) the interval holds, and those it does.
Cover spell_decade(const Interval& v, Shape shape, bool leading_nonzero, Lang* out) {
  const int L = shape.int_digits;
  const Decimal floor = leading_nonzero ? power_of_ten(L - 1) : zero();
  const Decimal ceiling = power_of_ten(L);
  if (compare_decimals(v.lo, ceiling) >= 0) return Cover::kNone;
  if (v.has_hi) {
    const int c = compare_decimals(v.hi, floor);
    if (c < 0 || (c == 0 && v.hi_exclusive)) return Cover::kNone;
  }
  Bound lo, hi;
  const int c = compare_decimals(v.lo, floor);
  const bool lo_inside = c > 0 || (c == 0 && v.lo_exclusive);
  if (lo_inside) {
    lo = align(v.lo, L, v.lo_exclusive);
  } else if (leading_nonzero) {
    lo = align(floor, L, false);
  }
  if (v.has_hi && compare_decimals(v.hi, ceiling) < 0) hi = align(v.hi, L, v.hi_exclusive);
  const bool all = !lo_inside && !hi.active && !shape.residues;
  *out = Speller(shape, std::move(lo), std::move(hi)).spell();
  if (out->none()) return Cover::kNone;
  return all ? Cover::kAll : Cover::kSome;
}

// Exponents p..q (within +-99) as 1 or 2 digits with an optional sign.
std::string exponents(int p, int q) {
  auto digits = [](int u, int w) {  // 0 <= u <= w <= 99
    std::vector<std::string> parts;
    if (u <= 9) {
      std::string one;
      for (int d = u; d <= std::min(w, 9); ++d) one += static_cast<char>('0' + d);
      parts.push_back(digit_class(one));
    }
    Shape two;
    two.int_digits = 2;
    two.fraction = false;
    Bound lo;
    if (u > 0) lo = align(Decimal::from_int(u), 2, false);
    const Lang l = Speller(two, lo, align(Decimal::from_int(w), 2, false)).spell();
    if (!l.expr.empty()) parts.push_back(l.expr);
    return join(parts);
  };
  std::vector<std::string> parts;
  if (q >= 0) parts.push_back("\"+\"? " + digits(std::max(p, 0), q));
  if (p <= 0) parts.push_back("\"-\" " + digits(std::max(0, -q), -p));
  return "[eE] " + join(parts);
}

// The spellings of the values in `v`, no sign.
std::vector<std::string> magnitudes(const Interval& v, const Shape& base, bool scientific) {
  std::vector<std::string> parts;
  if (v.empty()) return parts;
  int all_from = 0, all_to = -1;  // lengths wholly in
  for (int L = 1; L <= kIntDigits; ++L) {
    Shape shape = base;
    shape.int_digits = L;
    Lang lang;
    const Cover cover = spell_decade(v, shape, L > 1, &lang);
    if (cover == Cover::kAll) {
      if (all_to < 0) all_from = L;
      all_to = L;
    } else if (cover == Cover::kSome) {
      parts.push_back(lang.expr);
    }
  }
  if (all_to > 0) {
    std::string integer = all_from == 1
                              ? join({"\"0\"", concat("[1-9]", repeat("[0-9]", 0, all_to - 1))})
                              : concat("[1-9]", repeat("[0-9]", all_from - 1, all_to - 1));
    if (all_from == 1 && all_to == 1) integer = "[0-9]";
    parts.push_back(then(integer, after_integer(base)));
  }
  if (!scientific) return parts;
  // d.ddd e E: the decade [10^E, 10^(E+1)).
  Shape mantissa;
  mantissa.int_digits = 1;
  int all_lo = 1, all_hi = 0;
  for (int e = -kMaxExponent; e <= kMaxExponent; ++e) {
    Lang lang;
    const Cover cover = spell_decade(v.shifted_by(-e), mantissa, true, &lang);
    if (cover == Cover::kAll) {
      if (all_hi < all_lo) all_lo = e;
      all_hi = e;
    } else if (cover == Cover::kSome) {
      parts.push_back(lang.expr + " " + exponents(e, e));
    }
  }
  if (all_lo <= all_hi)
    parts.push_back(then("[1-9]", after_integer(mantissa)) + " " + exponents(all_lo, all_hi));
  return parts;
}

// Spellings of the values within `b`: the non-negative ones, then "-" and
// the magnitudes of the others (and of zero where `negative_zero`).
std::string signed_spellings(const NumberBounds& b, const Shape& shape, bool scientific,
                             bool negative_zero) {
  Interval up;  // values >= 0
  if (b.has_lo && !b.lo.negative) {
    up.lo = b.lo;
    up.lo_exclusive = b.lo_exclusive;
  }
  up.has_hi = b.has_hi;
  up.hi = b.hi;
  up.hi_exclusive = b.hi_exclusive;
  Interval down;  // -values for values <= 0
  if (b.has_hi && (b.hi.negative || b.hi.is_zero())) {
    down.lo = negated(b.hi);
    down.lo_exclusive = b.hi_exclusive;
  }
  if (!negative_zero && down.lo.is_zero()) down.lo_exclusive = true;
  down.has_hi = b.has_lo;
  down.hi = negated(b.lo);
  down.hi_exclusive = b.lo_exclusive;
  std::vector<std::string> parts = magnitudes(up, shape, scientific);
  const std::vector<std::string> minus = magnitudes(down, shape, scientific);
  if (!minus.empty()) parts.push_back("\"-\" " + join(minus));
  return join(parts);
}

}  // namespace
}  // namespace number_spelling

// ---- public ----------------------------------------------------------------------------

Decimal Decimal::from_int(int64_t v) {
  const bool negative = v < 0;
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  return number_spelling::normalized(negative, std::to_string(magnitude), 0);
}

Status parse_decimal(std::string_view text, Decimal* out) {
  auto bad = [&] { return InvalidArgument("not a JSON number: \"" + std::string(text) + "\""); };
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  auto is_digit = [&](size_t at) { return at < text.size() && text[at] >= '0' && text[at] <= '9'; };
  if (!is_digit(i)) return bad();
  std::string digits;
  if (text[i] == '0') {
    digits += text[i++];
  } else {
    while (is_digit(i)) digits += text[i++];
  }
  int64_t exponent = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!is_digit(i)) return bad();
    while (is_digit(i)) {
      digits += text[i++];
      --exponent;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool minus = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) minus = text[i++] == '-';
    if (!is_digit(i)) return bad();
    int64_t e = 0;
    while (is_digit(i)) {
      e = e * 10 + (text[i++] - '0');
      if (e > 1'000'000)
        return InvalidArgument("number exponent out of range: " + std::string(text));
    }
    exponent += minus ? -e : e;
  }
  if (i != text.size()) return bad();
  if (exponent < -2'000'000 || exponent > 2'000'000) {
    return InvalidArgument("number exponent out of range: " + std::string(text));
  }
  *out = number_spelling::normalized(negative, std::move(digits), exponent);
  return Status::Ok();
}

Decimal decimal_from_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  Decimal d;
  Status st = parse_decimal(std::string_view(buf, res.ptr - buf), &d);
  (void)st;  // to_chars writes JSON's syntax for finite values
  return d;
}

int compare_decimals(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int c = number_spelling::compare_magnitudes(a, b);
  return a.negative ? -c : c;
}

std::string decimal_to_string(const Decimal& d) {
  if (d.is_zero()) return "0";
  std::string out = d.negative ? "-" : "";
  const int64_t size = static_cast<int64_t>(d.digits.size());
  if (d.exponent >= 0 && d.exponent + size <= 21)
    return out + d.digits + std::string(d.exponent, '0');
  if (d.exponent < 0 && d.exponent >= -20) {
    const int64_t point = size + d.exponent;  // integer digits
    if (point > 0) return out + d.digits.substr(0, point) + "." + d.digits.substr(point);
    return out + "0." + std::string(-point, '0') + d.digits;
  }
  out += d.digits.substr(0, 1);
  if (size > 1) out += "." + d.digits.substr(1);
  return out + "e" + std::to_string(number_spelling::leading_power(d));
}

std::string number_range_gbnf(const NumberBounds& bounds) {
  return number_spelling::signed_spellings(bounds, number_spelling::Shape{}, /*scientific=*/true,
                                           /*negative_zero=*/true);
}

Status multiple_of_gbnf(const Decimal& step, bool integers_only, const NumberBounds& bounds,
                        std::string_view rule_prefix, GbnfFragment* out) {
  *out = GbnfFragment{};
  const std::string text = decimal_to_string(step);
  if (step.is_zero() || step.negative) {
    return InvalidArgument("multipleOf " + text + " is not positive");
  }
  auto unsupported = [&](const std::string& why) {
    return Unsupported("multipleOf " + text + ": " + why);
  };
  if (step.digits.size() > 18) return unsupported("more than 18 significant digits");
  // step = c x 10^-n
  uint64_t c = std::stoull(step.digits);
  int64_t n = -int64_t{step.exponent};
  if (n < 0) {
    if (number_spelling::leading_power(step) > 3)
      return unsupported("steps of 10000 and more are not supported");
    for (; n < 0; ++n) c *= 10;
  }
  if (integers_only && n > 0) {
    uint64_t p = 1;
    for (int64_t i = 0; i < std::min<int64_t>(n, 18); ++i) p *= 10;
    c /= std::gcd(c, p);
    n = 0;
  }
  if (c > kMaxMultipleOfModulus) {
    return unsupported("steps of more than " + std::to_string(kMaxMultipleOfModulus) +
                       " units are not supported");
  }
  if (n > number_spelling::kFracDigits) {
    if (c != 1) return unsupported("more than 16 fraction digits");
    n = number_spelling::kFracDigits;  // every number the grammar spells is a multiple
  }
  const bool bounded = bounds.has_lo || bounds.has_hi;
  const auto modulus = static_cast<uint32_t>(c);
  const int counted = static_cast<int>(n);
  number_spelling::Residues residues(modulus, counted, !integers_only, std::string(rule_prefix),
                                     &out->rules);
  if (modulus > 1 && !bounded) {
    out->expr = residues.unbounded(/*negative_zero=*/!integers_only);
  } else {
    number_spelling::Shape shape;
    shape.fraction = !integers_only;
    shape.free_fraction = counted;
    if (modulus > 1) shape.residues = &residues;
    out->expr =
        number_spelling::signed_spellings(bounds, shape, /*scientific=*/false, !integers_only);
  }
  if (residues.overflow()) {
    *out = GbnfFragment{};
    return unsupported("needs more than " + std::to_string(kMaxMultipleOfRules) + " grammar rules" +
                       (bounded ? " with these bounds" : ""));
  }
  return Status::Ok();
}

}  // namespace pvllm::structured
