// String formats as grammar, following ajv-formats' "full" mode (its
// regular expressions and validate functions; all but "duration" are
// case-insensitive). Each format's rules come from one function that
// writes them under a prefix, so formats that share a part ("date" inside
// "date-time", IPv6 inside "uri") hold their own copy of it.
//
// Where the grammar is stricter than ajv-formats:
// - time, date-time: RFC 3339's offsets only (Z, +hh:mm, -hh:mm; ajv
//   also takes +hh and +hhmm), fractions of at most 9 digits, and a leap
//   second (ss = 60) only where it is 23:59:60 UTC through an offset of
//   whole hours; ajv also takes minute offsets and some out-of-range local
//   times that its arithmetic maps onto 23:59 UTC ("46:99:30+23:40").
// - hostname: the limit of 253 characters before an optional final dot
//   (the sum of each label's length + 1 at most 254) is counted in units
//   of 4: each label's length + 1 rounded up to a multiple of 4, the sum
//   at most 252. So at most 63 labels, and names near the limit may be
//   refused. Counting exactly would take a rule per (length so far, label
//   length so far) pair.
// - date-time: the separator is T or t, as RFC 3339's date-time production
//   has it; ajv-formats also takes whitespace there.
#include "core/structured/json_formats.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pvllm::structured {
namespace {

// Writes rules under a prefix: in a body, <part> stands for the rule
// "PREFIX-part" and <> for the entry rule PREFIX. No body holds a literal
// '<'.
class RuleWriter {
 public:
  RuleWriter(std::string prefix, std::string* out) : prefix_(std::move(prefix)), out_(out) {}

  const std::string& entry() const { return prefix_; }
  std::string name(std::string_view part) const {
    return part.empty() ? prefix_ : prefix_ + "-" + std::string(part);
  }
  void add(std::string_view part, std::string_view body) {
    *out_ += name(part) + " ::= " + expand(body) + "\n";
  }
  std::string expand(std::string_view body) const {
    std::string text;
    for (size_t i = 0; i < body.size(); ++i) {
      size_t close = body[i] == '<' ? body.find('>', i) : std::string_view::npos;
      if (close == std::string_view::npos) {
        text += body[i];
        continue;
      }
      text += name(body.substr(i + 1, close - i - 1));
      i = close;
    }
    return text;
  }

 private:
  std::string prefix_;
  std::string* out_;
};

// "b12" and the like, and "<b12>" as a body refers to it, built by
// appending (GCC 12 warns, wrongly, about "b" + std::to_string(n)).
std::string numbered(std::string_view stem, int n) {
  std::string s(stem);
  s += std::to_string(n);
  return s;
}
std::string ref_numbered(std::string_view stem, int n) {
  std::string s = "<";
  s += numbered(stem, n);
  s += '>';
  return s;
}

// The part `name` of a format part `part` ("" is the format itself):
// "time-frac", or "frac".
std::string subpart(std::string_view part, std::string_view name) {
  std::string s(part);
  if (!s.empty()) s += '-';
  s += name;
  return s;
}

std::string two_digits(int v) { return std::string(1, char('0' + v / 10)) + char('0' + v % 10); }

// RFC 3339 full-date with the days of each month; February 29 in leap
// years (divisible by 4, centuries only when divisible by 400).
void write_date(RuleWriter& w, std::string_view part) {
  const std::string md = subpart(part, "md"), leap = subpart(part, "leap");
  w.add(part, "[0-9]{4} \"-\" <" + md + "> | <" + leap + "> \"-02-29\"");
  w.add(md,
        "( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( \"0\" [1-9] | "
        "[12] [0-9] | \"3\" [01] ) | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( \"0\" [1-9] | "
        "[12] [0-9] | \"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] )");
  w.add(leap,
        "[0-9]{2} ( [02468] [48] | [13579] [26] | [2468] \"0\" ) | ( [02468] [048] | "
        "[13579] [26] ) \"00\"");
}

// RFC 3339 full-time: the offset Z or +hh:mm / -hh:mm, a fraction of 1 to
// 9 digits (RFC 3339 sets no bound, but a model must not spin out digits,
// and no validator rounds 9 of them), a leap second only at 23:59:60 UTC:
// 23:59:60 with Z or +00:00 / -00:00, or hh:59:60 at the offset that makes
// it that. (ajv-formats also takes "+05" and "+0530", which RFC 3339's
// time-numoffset does not.)
void write_time(RuleWriter& w, std::string_view part) {
  auto sub = [&](std::string_view name) { return subpart(part, name); };
  w.add(part, "<" + sub("hms") + "> <" + sub("zone") + "> | <" + sub("leap") + ">");
  w.add(sub("hms"),
        "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] <" + sub("frac") + ">?");
  w.add(sub("frac"), "\".\" [0-9]{1,9}");
  w.add(sub("zone"), "[zZ] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9]");
  std::string leap = "\"23:59:60\" <" + sub("frac") + ">? ( [zZ] | [-+] \"00:00\" )";
  for (int hh = 0; hh < 23; ++hh) {
    leap += " | \"" + two_digits(hh) + ":59:60\" <" + sub("frac") + ">? ( \"-" +
            two_digits(23 - hh) + ":00\" | \"+" + two_digits(hh + 1) + ":00\" )";
  }
  w.add(sub("leap"), leap);
}

void write_date_time(RuleWriter& w) {
  w.add("", "<date> <sep> <time>");
  write_date(w, "date");
  // RFC 3339's date-time production: T or t. (ajv-formats also splits at
  // JavaScript's whitespace; validators that follow the RFC do not.)
  w.add("sep", "[tT]");
  write_time(w, "time");
}

// ISO 8601 durations as ajv-formats' pattern has them: at least one
// component, years to days in order, T followed by at least one of hours,
// minutes and seconds, or weeks alone. Upper case only.
void write_duration(RuleWriter& w) {
  w.add("", "\"P\" ( <date> <time>? | <time> | <n> \"W\" )");
  w.add("date", "<n> \"Y\" ( <n> \"M\" )? ( <n> \"D\" )? | <n> \"M\" ( <n> \"D\" )? | <n> \"D\"");
  w.add("time",
        "\"T\" ( <n> \"H\" ( <n> \"M\" )? ( <n> \"S\" )? | <n> \"M\" ( <n> \"S\" )? | <n> \"S\" )");
  w.add("n", "[0-9]+");
}

// Dot-atoms of atext, "@", and two or more DNS labels of any length.
void write_email(RuleWriter& w) {
  w.add("", "<atom> ( \".\" <atom> )* \"@\" ( <label> \".\" )+ <label>");
  w.add("atom", "[a-zA-Z0-9!#$%&'*+/=?\\^_`{|}~\\-]+");
  w.add("label", "[a-zA-Z0-9] ( [a-zA-Z0-9\\-]* [a-zA-Z0-9] )?");
}

// Labels of 1-63 letters, digits and inner hyphens; at most 253 characters
// before an optional final dot, counted as the header says.
void write_hostname(RuleWriter& w) {
  constexpr int kUnit = 4;
  constexpr int kBudget = 252 / kUnit;  // a label and its dot cost ceil((len + 1) / 4)
  constexpr int kBuckets = 64 / kUnit;  // label lengths 1-3, 4-7, ..., 60-63
  // The first label, then bK: dot-label pairs costing at most K in all.
  std::string first;
  for (int j = 1; j <= kBuckets; ++j) {
    if (j > 1) first += " | ";
    first += ref_numbered("l", j);
    first += ' ';
    first += ref_numbered("b", kBudget - j);
  }
  w.add("", "( " + first + " ) \".\"?");
  for (int k = 1; k < kBudget; ++k) {
    std::string body = "\"\"";
    for (int j = 1; j <= kBuckets && j <= k; ++j) {
      body += " | \".\" ";
      body += ref_numbered("l", j);
      if (j < k) {
        body += ' ';
        body += ref_numbered("b", k - j);
      }
    }
    w.add(numbered("b", k), body);
  }
  // lJ: a label of length 4J-4 to 4J-1 (l1: 1 to 3), as a letter or digit,
  // J-2 quads and 2-5 more inner characters, a letter or digit.
  w.add("a", "[a-zA-Z0-9]");
  w.add("i", "[a-zA-Z0-9\\-]");
  w.add("q", "<i> <i> <i> <i>");
  w.add("r", "<i> <i> ( <i> ( <i> <i>? )? )?");
  w.add("l1", "<a> ( <i>? <a> )?");
  for (int j = 2; j <= kBuckets; ++j) {
    std::string body = "<a> ";
    if (j > 2) {
      body += numbered("<q>{", j - 2);
      body += "} ";
    }
    w.add(numbered("l", j), body + "<r> <a>");
  }
}

// Decimal octets 0-255: without leading zeros (the ipv4 and ipv6 formats)
// or with up to two ("[01]?\d\d?", URI hosts).
void write_octet(RuleWriter& w, std::string_view part, bool leading_zeros) {
  w.add(part, leading_zeros
                  ? "\"25\" [0-5] | \"2\" [0-4] [0-9] | [01]? [0-9] [0-9]?"
                  : "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]");
}

void write_ipv4(RuleWriter& w) {
  w.add("", "<octet> \".\" <octet> \".\" <octet> \".\" <octet>");
  write_octet(w, "octet", false);
}

// RFC 4291 text form, which ajv-formats' ipv6 pattern and RFC 3986's
// IPv6address both spell: eight groups, or six and a dotted quad, or k
// groups, "::" and m more with k + m <= 7 (a dotted quad at the end counts
// as two groups).
void write_ipv6(RuleWriter& w, std::string_view part, bool leading_zeros) {
  auto sub = [&](std::string_view name) { return subpart(part, name); };
  const std::string h = "<" + sub("h") + ">";
  const std::string v4 = "<" + sub("v4") + ">";
  std::string body = "( " + h + " \":\" ){6} ( " + h + " \":\" " + h + " | " + v4 + " )";
  for (int k = 0; k <= 7; ++k) {
    body += " | ";
    if (k > 1) body += "( " + h + " \":\" ){" + std::to_string(k - 1) + "} ";
    if (k > 0) body += h + " ";
    body += "\"::\"";
    if (k < 7) body += " <" + sub(numbered("t", 7 - k)) + ">";
  }
  w.add(part, body);
  // t<n>: at most n groups after "::".
  for (int n = 1; n <= 7; ++n) {
    std::string tail = h;
    if (n > 1) tail += " ( \":\" " + h + " ){0," + std::to_string(n - 1) + "}";
    if (n > 2) tail += " | ( " + h + " \":\" ){0," + std::to_string(n - 2) + "} " + v4;
    if (n == 2) tail += " | " + v4;
    w.add(sub(numbered("t", n)), "( " + tail + " )?");
  }
  w.add(sub("h"), "[0-9a-fA-F]{1,4}");
  w.add(sub("v4"), "<" + sub("o") + "> \".\" <" + sub("o") + "> \".\" <" + sub("o") + "> \".\" <" +
                       sub("o") + ">");
  write_octet(w, sub("o"), leading_zeros);
}

// RFC 3986 as ajv-formats' patterns spell it. "uri": scheme ":" and a
// hierarchical part (an authority after "/" or "//", or a path), then an
// optional query and fragment. "uri-reference": that, or a relative
// reference, whose first path segment holds no ':' (RFC 3986's
// path-noscheme: "://" is none; ajv-formats takes it, and '"', which the
// RFC leaves out too).
void write_uri(RuleWriter& w, bool reference) {
  const std::string sub_delims = "!$&'()*+,;=";
  if (reference) {
    w.add("", "( <scheme> \":\" <hier> | <rel> )? <tail>");
    w.add("rel",
          "\"//\" <authority> ( \"/\" <pchar>* )* | \"/\" ( <pchar>+ ( \"/\" <pchar>* )* )? | "
          "<ncchar>+ ( \"/\" <pchar>* )*");
    w.add("ncchar", "[a-zA-Z0-9\\-._~" + sub_delims + "@] | <pct>");
  } else {
    w.add("", "<scheme> \":\" <hier> <tail>");
  }
  w.add("scheme", "[a-zA-Z] [a-zA-Z0-9+\\-.]*");
  w.add("hier",
        "\"/\"? \"/\" <authority> ( \"/\" <pchar>* )* | \"/\" "
        "( <pchar>+ ( \"/\" <pchar>* )* )? | <pchar>+ ( \"/\" <pchar>* )*");
  w.add("authority", "( <userinfo> \"@\" )? <host> ( \":\" [0-9]* )?");
  w.add("tail", "( \"?\" <qchar>* )? ( \"#\" <qchar>* )?");
  w.add("userinfo", "( [a-zA-Z0-9\\-._~" + sub_delims + ":] | <pct> )*");
  // A dotted quad is a reg-name too, so it needs no alternative of its own.
  w.add("host", "\"[\" ( <ip6> | [vV] [0-9a-fA-F]+ \".\" [a-zA-Z0-9\\-._~" + sub_delims +
                    ":]+ ) \"]\" | ( [a-zA-Z0-9\\-._~" + sub_delims + "] | <pct> )*");
  w.add("pchar", "[a-zA-Z0-9\\-._~" + sub_delims + ":@] | <pct>");
  w.add("qchar", "[a-zA-Z0-9\\-._~" + sub_delims + ":@/?] | <pct>");
  w.add("pct", "\"%\" [0-9a-fA-F] [0-9a-fA-F]");
  write_ipv6(w, "ip6", true);
}

// RFC 4122 text form, optionally as a URN; case-insensitive throughout.
// RFC 4122's string form, 8-4-4-4-12 hex digits (ajv-formats also takes a
// "urn:uuid:" prefix; other validators do not).
void write_uuid(RuleWriter& w) {
  w.add("",
        "[0-9a-fA-F]{8} \"-\" "
        "[0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}");
}

}  // namespace

const std::vector<std::string_view>& json_format_names() {
  static const std::vector<std::string_view> names = {
      "date-time", "date", "time", "duration",      "email", "hostname",
      "ipv4",      "ipv6", "uri",  "uri-reference", "uuid"};
  return names;
}

Status json_format_gbnf(std::string_view format, std::string* rules, std::string* entry) {
  std::string text;
  RuleWriter w("fmt-" + std::string(format), &text);
  if (format == "date-time") {
    write_date_time(w);
  } else if (format == "date") {
    write_date(w, "");
  } else if (format == "time") {
    write_time(w, "");
  } else if (format == "duration") {
    write_duration(w);
  } else if (format == "email") {
    write_email(w);
  } else if (format == "hostname") {
    write_hostname(w);
  } else if (format == "ipv4") {
    write_ipv4(w);
  } else if (format == "ipv6") {
    write_ipv6(w, "", false);
  } else if (format == "uri") {
    write_uri(w, false);
  } else if (format == "uri-reference") {
    write_uri(w, true);
  } else if (format == "uuid") {
    write_uuid(w);
  } else {
    return Unsupported("JSON schema format \"" + std::string(format) + "\" has no grammar");
  }
  *rules += text;
  *entry = w.entry();
  return Status::Ok();
}

}  // namespace pvllm::structured
