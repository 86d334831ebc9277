// Digit strings of one length between two bounds, split at the first digit
// where the bounds differ: the low bound's digit followed by anything from
// the low bound's rest up, the digits strictly between followed by any
// digits, the high bound's digit followed by anything up to its rest.
#include "core/structured/integer_range.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace pvllm::structured {
namespace {

bool all_of(std::string_view s, char c) { return s.find_first_not_of(c) == std::string_view::npos; }

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

std::string digit_class(char a, char b) {
  if (a == b) return std::string("\"") + a + "\"";
  return std::string("[") + a + "-" + b + "]";
}

std::string concat(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

std::string join(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : " ") + parts[i];
  return out + " )";
}

// Strings of lo.size() digits (leading zeros allowed) from lo to hi.
std::string same_length(std::string_view lo, std::string_view hi) {
  if (lo.empty()) return "";
  const std::string_view lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  const size_t rest = lo_rest.size();
  if (lo[0] == hi[0]) return concat(digit_class(lo[0], lo[0]), same_length(lo_rest, hi_rest));
  std::vector<std::string> parts;
  char first = lo[0];
  if (!all_of(lo_rest, '0')) {
    parts.push_back(
        concat(digit_class(lo[0], lo[0]), same_length(lo_rest, std::string(rest, '9'))));
    ++first;
  }
  const bool hi_full = all_of(hi_rest, '9');
  const char last = hi_full ? hi[0] : static_cast<char>(hi[0] - 1);
  if (first <= last) parts.push_back(concat(digit_class(first, last), any_digits(rest)));
  if (!hi_full) {
    parts.push_back(
        concat(digit_class(hi[0], hi[0]), same_length(std::string(rest, '0'), hi_rest)));
  }
  return join(parts);
}

// Canonical spellings of [lo, hi], 0 <= lo <= hi.
std::string non_negative(int64_t lo, int64_t hi) {
  std::vector<std::string> parts;
  int64_t power = 1;  // 10^(digits - 1)
  for (int digits = 1; digits <= 16 && (digits == 1 || power <= hi); ++digits, power *= 10) {
    const int64_t top = power * 10 - 1;  // the largest of this many digits
    const int64_t from = std::max(lo, digits == 1 ? int64_t{0} : power);
    const int64_t to = std::min(hi, top);
    if (from <= to) parts.push_back(same_length(std::to_string(from), std::to_string(to)));
  }
  return join(parts);
}

}  // namespace

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> parts;
  if (lo < 0) parts.push_back("\"-\" " + non_negative(hi < 0 ? -hi : 1, -lo));
  if (hi >= 0) parts.push_back(non_negative(std::max<int64_t>(lo, 0), hi));
  return join(parts);
}

}  // namespace pvllm::structured
