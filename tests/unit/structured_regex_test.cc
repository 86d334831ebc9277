// regex_to_gbnf: the grammar it writes must parse, and its root must accept
// exactly the strings the regex matches in full. std::regex (ECMAScript,
// regex_match) is the reference for ASCII patterns over every short string
// of a small alphabet; UTF-8 cases are checked by hand.
//
// regex_to_json_string_gbnf (JSON Schema's "pattern"): the inside of a JSON
// string literal whose value contains a match. Node's RegExp (with the `u`
// flag) is the reference in tests/data/structured/pattern_goldens.json
// (scripts/reference/make_pattern_goldens.mjs); std::regex (regex_search) on
// random ASCII patterns; the matcher's stacks stay few on long strings.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/matcher.h"
#include "core/structured/regex_grammar.h"
#include "core/structured/token_mask.h"
#include "core/structured/vocab_trie.h"

namespace pvllm::structured {
namespace {

// Converts and parses `pattern`; fails the test (with the grammar text) if
// either step fails.
::testing::AssertionResult compile(const std::string& pattern, Grammar* grammar) {
  std::string gbnf;
  Status s = regex_to_gbnf(pattern, &gbnf);
  if (!s.ok()) return ::testing::AssertionFailure() << "regex_to_gbnf: " << s.message();
  s = parse_gbnf(gbnf, grammar);
  if (!s.ok()) {
    return ::testing::AssertionFailure() << "parse_gbnf: " << s.message() << "\n" << gbnf;
  }
  return ::testing::AssertionSuccess();
}

// Every string of length 0..max_length over `alphabet`.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_length) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, length = 0; length < max_length; ++length) {
    size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (char c : alphabet) out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return "\"" + out + "\"";
}

// The reference: std::regex, ECMAScript. libstdc++'s backtracking executor
// takes exponential time on nested quantifiers; its Thompson executor does
// not, and gives the same answers to regex_match.
std::regex reference_regex(const std::string& pattern) {
  auto flags = std::regex::ECMAScript;
#ifdef __GLIBCXX__
  flags |= std::regex_constants::__polynomial;
#endif
  return std::regex(pattern, flags);
}

struct ReferenceCase {
  std::string pattern;
  std::string alphabet;
  std::string reference = "";  // the std::regex spelling, when it differs
  size_t max_length = 4;
};

void PrintTo(const ReferenceCase& c, std::ostream* os) { *os << printable(c.pattern); }

class RegexMatchesStdRegex : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(RegexMatchesStdRegex, OnEveryShortString) {
  const ReferenceCase& c = GetParam();
  Grammar grammar;
  ASSERT_TRUE(compile(c.pattern, &grammar)) << c.pattern;
  std::regex reference = reference_regex(c.reference.empty() ? c.pattern : c.reference);
  int accepted = 0, rejected = 0;
  for (const std::string& s : all_strings(c.alphabet, c.max_length)) {
    bool expected = std::regex_match(s, reference);
    EXPECT_EQ(grammar_accepts(grammar, s), expected)
        << "pattern " << c.pattern << " on " << printable(s);
    (expected ? accepted : rejected)++;
  }
  // Each case is chosen so that both answers occur among its candidates.
  EXPECT_GT(accepted, 0) << c.pattern;
  EXPECT_GT(rejected, 0) << c.pattern;
}

const ReferenceCase kReferenceCases[] = {
    // Literals, escapes of metacharacters, control escapes.
    {"abc", "abc"},
    {"a\\.b", "a.b"},
    {"\\*\\+\\?\\(\\)", "*+?()a", "", 5},
    {"\\[\\]\\{\\}\\|", "[]{}|a", "", 5},
    {"\\\\\\^\\$\\.", "\\^$.a"},
    {"\\t\\n\\r\\f\\v", "\t\n\r\f\va", "", 5},
    {"\\0a", std::string("\0a", 2)},
    {"\\x41\\u0042\\x{43}", "ABCa", "\\x41\\u0042C"},
    {"a{b}{", "a{}b", "a\\{b\\}\\{", 5},
    // Anchors at the ends are ignored.
    {"^ab$", "ab"},
    {"^a|b$", "ab"},
    // Alternation, empty alternatives, groups.
    {"a|b|cd", "abcd"},
    {"ab|cd|", "abcd"},
    {"(a|)b", "ab"},
    {"(?:ab|c)d", "abcd"},
    {"(?<name>a|b)c", "abc", "(a|b)c"},
    {"(?P<x>ab)+", "ab", "(ab)+"},
    {"", "ab"},
    {"()|(|)", "a"},
    // Quantifiers, greedy and lazy.
    {"a*b+c?", "abc"},
    {"a{2}", "a"},
    {"a{2,}b", "ab"},
    {"(ab){1,2}", "ab"},
    {"a{0}b", "ab"},
    {"a*?b+?c??", "abc"},
    {"(ab){1,2}?", "ab"},
    {"(a|b)*abb", "ab", "", 6},
    // Repetitions of groups that can match the empty string.
    {"(a*)*", "ab"},
    {"(a|)+", "ab"},
    {"(a?){2,3}", "ab"},
    {"(a*b*)*c", "abc"},
    {"(a?b?){2}", "ab"},
    {"((a|)b?)+", "abc"},
    {"(|a)*b", "ab"},
    {"((a?){2}){2,3}", "a", "", 7},
    {"(a*|b)*c", "abc"},
    {"(a?b?c?){1,2}", "abc", "", 6},
    {"(a?(b|)){0,3}c", "abc", "", 5},
    {"((ab)?c?)+", "abc", "", 5},
    // Classes: ranges, negation, literal '-' placement, shorthands.
    {"[a-c]+", "abcd"},
    {"[^a]*", "ab\n"},
    {"[ab-]", "ab-c"},
    {"[-a]", "-ab"},
    {"[a-c-e]", "abd-e"},
    {"[\\]a]", "]ab"},
    {"[\\^\\\\]", "^\\a"},
    {"[^\\d_]", "1_a-"},
    {"\\d+", "01a"},
    {"\\D\\w\\W", "1a_ -"},
    {"\\s\\S", " \t\n\r\f\va"},
    {"[\\s\\d]+", " 1a\t"},
    {"[^\\w]", "a_1 -"},
    {"[\\x41-\\x43]+", "ABCD"},
    // The any-character dot (std::regex also refuses \r, so no \r here).
    {".", "a\n ", "", 2},
    {"a.*b", "ab\n"},
    // Something larger.
    {"[\\w.-]+@[a-z]+\\.[a-z]{2,3}", "a@.-_", "", 6},
    {"-?(0|[1-9]\\d*)(\\.\\d+)?", "-0.1", "", 5},
};

INSTANTIATE_TEST_SUITE_P(Cases, RegexMatchesStdRegex, ::testing::ValuesIn(kReferenceCases));

// Random patterns from constructs whose meaning std::regex shares, nested
// and repeated in ways no table lists (repetitions of groups that can
// match nothing above all).
class RandomPattern {
 public:
  explicit RandomPattern(uint32_t seed, std::vector<std::string> atoms = {"a", "b", "c", "[ab]",
                                                                          "[^a]", "\\w", "[b-c]"})
      : rng_(seed), atoms_(std::move(atoms)) {}

  std::string alternation(int depth) {
    std::string out = sequence(depth);
    while (pick(4) == 0) out += "|" + sequence(depth);
    return out;
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  std::string sequence(int depth) {
    std::string out;
    for (size_t n = pick(4); n > 0; --n) out += atom(depth) + quantifier();
    return out;
  }

  std::string atom(int depth) {
    if (depth > 0 && pick(3) == 0) return (pick(2) ? "(" : "(?:") + alternation(depth - 1) + ")";
    return atoms_[pick(atoms_.size())];
  }

  std::string quantifier() {
    static const char* const kQuantifiers[] = {
        "", "", "", "*", "+", "?", "??", "*?", "{2}", "{0,2}", "{1,}", "{1,2}", "{0}", "{2,3}?"};
    return kQuantifiers[pick(std::size(kQuantifiers))];
  }

  std::mt19937 rng_;
  std::vector<std::string> atoms_;
};

TEST(RegexRandom, MatchesStdRegexOnEveryShortString) {
  RandomPattern generator(20240607);
  // Strings up to length 4: at length 5 libstdc++'s std::regex ran for
  // minutes on one of these patterns even with its polynomial executor.
  const std::vector<std::string> candidates = all_strings("abc", 4);
  for (int i = 0; i < 300; ++i) {
    std::string pattern = generator.alternation(3);
    Grammar grammar;
    ASSERT_TRUE(compile(pattern, &grammar)) << pattern;
    std::regex reference = reference_regex(pattern);
    int mismatches = 0;
    for (const std::string& s : candidates) {
      bool expected = std::regex_match(s, reference);
      if (grammar_accepts(grammar, s) == expected) continue;
      ADD_FAILURE() << "pattern " << pattern << " on \"" << s << "\": std::regex says " << expected;
      if (++mismatches == 3) break;
    }
  }
}

// Hand-checked cases: UTF-8 patterns and escapes std::regex does not share.
struct HandCase {
  std::string pattern;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

void PrintTo(const HandCase& c, std::ostream* os) { *os << printable(c.pattern); }

class RegexHandChecked : public ::testing::TestWithParam<HandCase> {};

TEST_P(RegexHandChecked, AcceptsAndRejects) {
  const HandCase& c = GetParam();
  Grammar grammar;
  ASSERT_TRUE(compile(c.pattern, &grammar)) << c.pattern;
  for (const std::string& s : c.accept) {
    EXPECT_TRUE(grammar_accepts(grammar, s)) << c.pattern << " should accept " << printable(s);
  }
  for (const std::string& s : c.reject) {
    EXPECT_FALSE(grammar_accepts(grammar, s)) << c.pattern << " should reject " << printable(s);
  }
}

const HandCase kHandCases[] = {
    {"[α-ω]+", {"α", "αβγω"}, {"", "a", "Α", "αa", "ϊ"}},
    {"héllo", {"héllo"}, {"hello", "hé", "héllo!"}},
    {"😀+!", {"😀!", "😀😀😀!"}, {"!", "😀", "😀a!"}},
    {"[^α]", {"β", "a", "😀", "\n"}, {"α", "", "ab"}},
    {"[😀-😂]", {"😀", "😁", "😂"}, {"😃", "a"}},
    {".", {"é", "😀", "\r", "\x01"}, {"\n", "", "ab"}},
    {"\\u00e9\\x{1F600}", {"é😀"}, {"e😀", "é"}},
    {"\\uD83D\\uDE00", {"😀"}, {"\xED\xA0\xBD\xED\xB8\x80", ""}},
    {"\\U0001F600\\u{41}", {"😀A"}, {"😀a"}},
    {"[\\u0391-\\u03A9]{2}", {"ΑΩ", "ΣΣ"}, {"Α", "αω", "ΑΩΣ"}},
    {"[]a]", {"]", "a"}, {"", "b", "]a"}},
    {"[\\b]\\cJ", {"\b\n"}, {"b\n", "\b"}},
    {"\\\"\\\\\"", {"\"\\\""}, {"\"\\", "\\\""}},
    {"[\"\\\\]+", {"\"", "\\\"\\"}, {"", "a"}},
    {"\\x00\\x7f\\u0085\\u00ad\\u2028\\uFEFF\\uE000",
     {std::string("\0\x7F\xC2\x85\xC2\xAD\xE2\x80\xA8\xEF\xBB\xBF\xEE\x80\x80", 15)},
     {"\x7F"}},
    {"[\\x00-\\x08\\u2028-\\u2029]", {std::string(1, '\0'), "\b", "\xE2\x80\xA9"}, {"\t", "a"}},
    {"[^\\x00-\\x{10FFFE}]", {"\xF4\x8F\xBF\xBF"}, {"a", "\xF4\x8F\xBF\xBE"}},
    {"[\\s\\S]", {"a", "\n", "😀"}, {"", "ab"}},
    {"a{,2}", {"", "a", "aa"}, {"aaa", "b"}},
    {"a{,}", {"a{,}"}, {"", "a"}},
    {"[\\w-.]+", {"a-.", "_"}, {"", " "}},
    {"[\\d-z]", {"1", "-", "z"}, {"y", "a", ""}},
    {"[a\\s-]", {"a", " ", "-"}, {"b"}},
    {"(a|b|[cd]|ab|ab)+", {"ab", "dcab", "abab"}, {"", "e", "ba c"}},
    {"x{10000}", {std::string(10000, 'x')}, {std::string(9999, 'x'), std::string(10001, 'x')}},
    // A class nothing matches: starred it is the empty string, optional it
    // is left out, and an alternative made of it is dropped.
    {"[^\\s\\S]*", {""}, {"a", " "}},
    {"a[^\\s\\S]?b", {"ab"}, {"a b", "a", "b"}},
    {"a|[^\\s\\S]+", {"a"}, {"", "aa"}},
    // '$' before '|' ends a top-level alternative.
    {"a$|b", {"a", "b"}, {"a$", "ab", "a$|b"}},
    // A '{' that starts no quantifier is a literal.
    {"{a}", {"{a}"}, {"a", "{}"}},
    {"a{2x}", {"a{2x}"}, {"aa", "a{2}"}},
    {"a{2,3", {"a{2,3"}, {"aa", "aaa"}},
    {"(?<_a1>x)(?P<b_2>y)", {"xy"}, {"x", "y", "yx"}},
    // A set after '-' makes the '-' literal; '[' not starting a POSIX class is a member.
    {"[a-\\d]", {"a", "-", "5"}, {"b", "", "a5"}},
    {"[[a]", {"[", "a"}, {"]", "[a", ""}},
    {"[\\[x]+", {"[x[", "x"}, {"]", "", "[y"}},
    {"[\\x00-a]", {std::string(1, '\0'), "a", "A"}, {"b", "é"}},
    // Escaped non-ASCII characters stand for themselves; three-byte characters.
    {"\\é\\中", {"é中"}, {"e中", "é"}},
    {"中文+", {"中文", "中文文"}, {"中", "文", "中文中"}},
};

INSTANTIATE_TEST_SUITE_P(Cases, RegexHandChecked, ::testing::ValuesIn(kHandCases));

// Refusals: the code, the construct named and its byte offset.
struct ErrorCase {
  std::string pattern;
  StatusCode code;
  std::string names;  // a part of the message naming the construct
  size_t offset;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << printable(c.pattern); }

class RegexRefuses : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RegexRefuses, NamingTheConstructAndOffset) {
  const ErrorCase& c = GetParam();
  std::string gbnf;
  Status s = regex_to_gbnf(c.pattern, &gbnf);
  ASSERT_EQ(s.code(), c.code) << printable(c.pattern) << ": " << s.message();
  EXPECT_EQ(s.message().rfind("regex: ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(c.names), std::string::npos) << s.message();
  std::string at = "at offset " + std::to_string(c.offset);
  EXPECT_NE(s.message().find(at), std::string::npos) << s.message() << " (expected " << at << ")";
}

constexpr StatusCode kUnsupported = StatusCode::kUnsupported;
constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;

const ErrorCase kUnsupportedCases[] = {
    {"(a)\\1", kUnsupported, "backreference", 3},
    {"(?<x>a)\\k<x>", kUnsupported, "backreference", 7},
    {"(?P<x>a)(?P=x)", kUnsupported, "backreference", 8},
    {"a(?=b)", kUnsupported, "look-ahead", 1},
    {"a(?!b)", kUnsupported, "look-ahead", 1},
    {"(?<=a)b", kUnsupported, "look-behind", 0},
    {"(?<!a)b", kUnsupported, "look-behind", 0},
    {"(?>a)", kUnsupported, "atomic group", 0},
    {"a\\bc", kUnsupported, "word boundary", 1},
    {"\\Ba", kUnsupported, "word boundary", 0},
    {"\\Aa", kUnsupported, "anchor", 0},
    {"a\\z", kUnsupported, "anchor", 1},
    {"ab^c", kUnsupported, "anchor '^'", 2},
    {"(^a)", kUnsupported, "anchor '^'", 1},
    {"a$b", kUnsupported, "anchor '$'", 1},
    {"(a$)", kUnsupported, "anchor '$'", 2},
    {"x(?i)a", kUnsupported, "inline flags", 1},
    {"(?i:a)", kUnsupported, "inline flags", 0},
    {"é\\p{L}", kUnsupported, "Unicode property", 2},
    {"\\P{L}", kUnsupported, "Unicode property", 0},
    {"[\\p{L}]", kUnsupported, "Unicode property", 1},
    {"ab*+", kUnsupported, "possessive", 3},
    {"a{2}+", kUnsupported, "possessive", 4},
    {"[[:alpha:]]", kUnsupported, "POSIX class", 1},
    {"\\012", kUnsupported, "octal", 0},
    {"a[\\12]", kUnsupported, "octal", 2},
    {"\\e", kUnsupported, "escape '\\e'", 0},
    {"a{10001}", kUnsupported, "above 10000", 1},
    {"a{2,99999999999}", kUnsupported, "above 10000", 1},
    {"a{1,4294967295}", kUnsupported, "above 10000", 1},
    {"[^\\s\\S]", kUnsupported, "matches no string", 0},
    {"[^\\s\\S]{2}|[^\\s\\S]+", kUnsupported, "matches no string", 0},
    {"a{10001,}", kUnsupported, "above 10000", 1},
    {"(?P>x)", kUnsupported, "backreference", 0},
    {"(?Px)", kUnsupported, "inline flags", 0},
    {"(?-i:a)", kUnsupported, "inline flags", 0},
    {"(?^a)", kUnsupported, "inline flags", 0},
    {"a(?#note)", kUnsupported, "comment group", 1},
    {"(?)", kUnsupported, "group construct", 0},
    {"[a-\\p{L}]", kUnsupported, "Unicode property", 3},
    {"[[.a.]]", kUnsupported, "POSIX class", 1},
    {"[[=a=]]", kUnsupported, "POSIX class", 1},
    {"a\\Z", kUnsupported, "anchor", 1},
    {"\\Ga", kUnsupported, "anchor", 0},
};

INSTANTIATE_TEST_SUITE_P(Unsupported, RegexRefuses, ::testing::ValuesIn(kUnsupportedCases));

const ErrorCase kSyntaxCases[] = {
    {"(ab", kInvalid, "unbalanced '('", 0},
    {"a(b(c)", kInvalid, "unbalanced '('", 1},
    {"ab)", kInvalid, "unbalanced ')'", 2},
    {"(a))", kInvalid, "unbalanced ')'", 3},
    {"*a", kInvalid, "nothing to repeat", 0},
    {"a|+b", kInvalid, "nothing to repeat", 2},
    {"^*", kInvalid, "nothing to repeat", 1},
    {"a**", kInvalid, "nothing to repeat", 2},
    {"a{2}{3}", kInvalid, "nothing to repeat", 4},
    {"({2})", kInvalid, "nothing to repeat", 1},
    {"a{3,2}", kInvalid, "m > n", 1},
    {"[abc", kInvalid, "unterminated character class", 0},
    {"x[]", kInvalid, "unterminated character class", 1},
    {"[^", kInvalid, "unterminated character class", 0},
    {"ab\\", kInvalid, "dangling backslash", 2},
    {"a[z-a]", kInvalid, "range", 2},
    {"a\xFF", kInvalid, "invalid UTF-8", 1},
    {"ab\xC3", kInvalid, "invalid UTF-8", 2},
    {"\xC0\x80", kInvalid, "invalid UTF-8", 0},
    {"é\xED\xA0\x80", kInvalid, "invalid UTF-8", 2},
    {"a\\xZZ", kInvalid, "hexadecimal", 1},
    {"\\u12", kInvalid, "hexadecimal", 0},
    {"\\x{}", kInvalid, "hexadecimal", 0},
    {"a\\u{110000}", kInvalid, "U+10FFFF", 1},
    {"\\uD800", kInvalid, "surrogate", 0},
    {"(?<1a>x)", kInvalid, "group name", 0},
    {"(?<a", kInvalid, "group name", 0},
    {"\\c1", kInvalid, "\\c", 0},
    {"?a", kInvalid, "nothing to repeat", 0},
    {"{2}a", kInvalid, "nothing to repeat", 0},
    {"a(?", kInvalid, "unbalanced '('", 1},
    {"[a-", kInvalid, "unterminated character class", 0},
    {"a\x80", kInvalid, "invalid UTF-8", 1},
    {"\xF8\x80\x80\x80", kInvalid, "invalid UTF-8", 0},
    {"\xC3(", kInvalid, "invalid UTF-8", 0},
    {"a\xF4\x90\x80\x80", kInvalid, "invalid UTF-8", 1},  // U+110000
    {"\\x4!", kInvalid, "hexadecimal", 0},
    {"\\x{41", kInvalid, "hexadecimal", 0},
    {"\\x{000000041}", kInvalid, "U+10FFFF", 0},
    {"\\uD83D\\n", kInvalid, "lone surrogate", 0},
    {"\\uD83D\\u0041", kInvalid, "lone surrogate", 0},
    {"\\uD83D\\uE000", kInvalid, "lone surrogate", 0},
    {"x\\uD83D\\uZZZZ", kInvalid, "lone surrogate", 1},
    {"\\uDC00", kInvalid, "lone surrogate", 0},
};

INSTANTIATE_TEST_SUITE_P(Syntax, RegexRefuses, ::testing::ValuesIn(kSyntaxCases));

TEST(RegexGuards, UnknownGroupConstructIsRefused) {
  std::string gbnf;
  Status s = regex_to_gbnf("(?b)", &gbnf);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at offset 0"), std::string::npos) << s.message();
}

TEST(RegexGuards, PatternLongerThan64KiBIsRefused) {
  std::string gbnf;
  Status s = regex_to_gbnf(std::string(64 * 1024 + 1, 'a'), &gbnf);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  Grammar grammar;
  std::string longest(64 * 1024, 'a');
  ASSERT_TRUE(compile(longest, &grammar));
  EXPECT_TRUE(grammar_accepts(grammar, longest));
  EXPECT_FALSE(grammar_accepts(grammar, longest + "a"));
}

std::string nested(int depth) {
  std::string p;
  for (int i = 0; i < depth; ++i) p += "(a|";
  p += "b";
  for (int i = 0; i < depth; ++i) p += ")";
  return p;
}

TEST(RegexGuards, NestingUpTo256IsAccepted) {
  Grammar grammar;
  ASSERT_TRUE(compile(nested(256), &grammar));
  EXPECT_TRUE(grammar_accepts(grammar, "a"));
  EXPECT_TRUE(grammar_accepts(grammar, "b"));
  EXPECT_FALSE(grammar_accepts(grammar, "ab"));
}

TEST(RegexGuards, NestingDeeperThan256IsUnsupported) {
  std::string gbnf;
  Status s = regex_to_gbnf(nested(257), &gbnf);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  // The 257th '(' is at byte 256 * 3.
  EXPECT_NE(s.message().find("at offset 768"), std::string::npos) << s.message();
  s = regex_to_gbnf(std::string(50000, '('), &gbnf);
  EXPECT_FALSE(s.ok());
}

// A bounded repetition of a long sequence of optional parts: the rewrite
// without the empty string stays linear and exact.
TEST(RegexNullableRepetition, LongOptionalSequence) {
  std::string pattern = "(";
  for (int i = 0; i < 100; ++i) pattern += "a?";
  pattern += "){2}";
  Grammar grammar;
  ASSERT_TRUE(compile(pattern, &grammar));
  EXPECT_TRUE(grammar_accepts(grammar, ""));
  EXPECT_TRUE(grammar_accepts(grammar, std::string(1, 'a')));
  EXPECT_TRUE(grammar_accepts(grammar, std::string(200, 'a')));
  EXPECT_FALSE(grammar_accepts(grammar, std::string(201, 'a')));
  EXPECT_FALSE(grammar_accepts(grammar, "b"));
}

TEST(RegexNullableRepetition, NestedStars) {
  Grammar grammar;
  ASSERT_TRUE(compile("(((a?)*b?)+|(c*)*){3,}", &grammar));
  for (const char* s : {"", "a", "abcab", "ccc", "bbb"}) {
    EXPECT_TRUE(grammar_accepts(grammar, s)) << s;
  }
  EXPECT_FALSE(grammar_accepts(grammar, "d"));
  EXPECT_FALSE(grammar_accepts(grammar, "abd"));
}

// ---------------------------------------------------------------------------
// regex_to_json_string_gbnf

constexpr char kPrefix[] = "root-name-pattern";

// `pattern`'s rules under a root that is their entry (`quoted`: between
// quotes, as a JSON schema's string uses them).
::testing::AssertionResult compile_pattern(const std::string& pattern, bool quoted,
                                           Grammar* grammar) {
  std::string rules;
  Status s = regex_to_json_string_gbnf(pattern, kPrefix, &rules);
  if (!s.ok()) {
    return ::testing::AssertionFailure() << "regex_to_json_string_gbnf: " << s.message();
  }
  std::string root = std::string("root ::= ") + (quoted ? "\"\\\"\" " : "") + kPrefix +
                     (quoted ? " \"\\\"\"" : "") + "\n";
  s = parse_gbnf(root + rules, grammar);
  if (!s.ok()) {
    return ::testing::AssertionFailure() << "parse_gbnf: " << s.message() << "\n" << rules;
  }
  return ::testing::AssertionSuccess();
}

// The inside of the JSON string literal nlohmann::json writes for `value`.
std::string json_inside(const std::string& value) {
  std::string text = nlohmann::json(value).dump();
  return text.substr(1, text.size() - 2);
}

TEST(RegexPatternGoldens, MatchNodeRegExpOnJsonStrings) {
  const char* dir = std::getenv("PVLLM_TEST_DATA");
  if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  const std::string path = std::string(dir) + "/structured/pattern_goldens.json";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json golden = nlohmann::json::parse(text.str());
  ASSERT_GE(golden.at("cases").size(), 30u);
  for (const nlohmann::json& c : golden.at("cases")) {
    const std::string pattern = c.at("pattern").get<std::string>();
    Grammar inside, quoted;
    ASSERT_TRUE(compile_pattern(pattern, /*quoted=*/false, &inside)) << pattern;
    ASSERT_TRUE(compile_pattern(pattern, /*quoted=*/true, &quoted)) << pattern;
    int accepted = 0, rejected = 0;
    for (const nlohmann::json& t : c.at("texts")) {
      const std::string s = t.at(0).get<std::string>();
      const bool expected = t.at(1).get<bool>();
      EXPECT_EQ(grammar_accepts(inside, s), expected)
          << "pattern " << pattern << " on " << printable(s);
      EXPECT_EQ(grammar_accepts(quoted, "\"" + s + "\""), expected)
          << "pattern " << pattern << " on " << printable(s) << " quoted";
      (expected ? accepted : rejected)++;
    }
    EXPECT_GT(accepted, 0) << pattern;
    EXPECT_GT(rejected, 0) << pattern;
  }
}

// Random ASCII patterns, anchored or not, against std::regex's search on
// every short value over an alphabet of characters JSON escapes and not.
TEST(RegexPatternRandom, MatchesStdRegexSearchOnEveryShortValue) {
  RandomPattern generator(20240915, {"a", "b", "\"", "\\\\", "\\n", "\\t", "[^a]", ".", "\\s",
                                     "\\S", "[\"\\\\b]", "\\w", "\\x01", "[\\x00-\\x1f]"});
  std::vector<std::string> values = all_strings(std::string("ab\"\\\n\t\x01", 7), 3);
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::string pattern =
        (rng() % 2 ? "^" : "") + generator.alternation(2) + (rng() % 2 ? "$" : "");
    if (rng() % 3 == 0)
      pattern += "|" + std::string(rng() % 2 ? "^" : "") + generator.alternation(1);
    Grammar grammar;
    ASSERT_TRUE(compile_pattern(pattern, /*quoted=*/false, &grammar)) << pattern;
    std::regex reference = reference_regex(pattern);
    int mismatches = 0;
    for (const std::string& v : values) {
      bool expected = std::regex_search(v, reference);
      if (grammar_accepts(grammar, json_inside(v)) == expected) continue;
      ADD_FAILURE() << "pattern " << printable(pattern) << " on " << printable(v)
                    << ": std::regex says " << expected;
      if (++mismatches == 3) break;
    }
  }
}

// Spellings of a value other than the canonical one are refused, also
// where the value matches.
TEST(RegexPatternEscapes, OnlyTheCanonicalSpellingIsAccepted) {
  Grammar grammar;
  ASSERT_TRUE(compile_pattern("^[\\s\\S]*$", /*quoted=*/false, &grammar));
  for (const char* text : {"\\\"", "\\\\", "\\b\\f\\n\\r\\t", "\\u0000\\u001f\\u000b", "\x7F", "é😀",
                           "\xE2\x80\xA8", "a/b"}) {
    EXPECT_TRUE(grammar_accepts(grammar, text)) << printable(text);
  }
  for (const char* text : {"\"", "\\", "\n", "\\/", "\\u0041", "\\u000A", "\\u001F", "\\u0008",
                           "\\u00e9", "\\ud83d\\ude00", "\\x41", "\\a", "\\u00", "\x01"}) {
    EXPECT_FALSE(grammar_accepts(grammar, text)) << printable(text);
  }
}

TEST(RegexPatternRules, EveryRuleStartsWithThePrefix) {
  for (const char* pattern : {"abc", "^a|b$", "(ab|c)+d?$", "^[^\"]{2,}x", "", "^$"}) {
    std::string rules;
    ASSERT_TRUE(regex_to_json_string_gbnf(pattern, kPrefix, &rules).ok()) << pattern;
    std::istringstream lines(rules);
    bool entry = false;
    for (std::string line; std::getline(lines, line);) {
      std::string name = line.substr(0, line.find(" ::= "));
      EXPECT_EQ(name.rfind(kPrefix, 0), 0u) << pattern << ": " << line;
      entry = entry || name == kPrefix;
    }
    EXPECT_TRUE(entry) << pattern << "\n" << rules;
  }
}

TEST(RegexPatternRules, BadPrefixIsRefused) {
  std::string rules;
  for (const char* prefix : {"", "1a", "-a", "a b", "a\"", "é"}) {
    EXPECT_EQ(regex_to_json_string_gbnf("a", prefix, &rules).code(), StatusCode::kInvalidArgument)
        << prefix;
  }
}

const ErrorCase kPatternErrorCases[] = {
    {"a{,2}", kUnsupported, "'{,n}'", 1},
    {"\\x{41}", kUnsupported, "'\\x{'", 0},
    {"a\\U00000041", kUnsupported, "'\\U'", 1},
    {"a^b", kUnsupported, "anchor '^'", 1},
    {"(^a)", kUnsupported, "anchor '^'", 1},
    {"a$b|c", kUnsupported, "anchor '$'", 1},
    {"a\\b", kUnsupported, "word boundary", 1},
    {"(?=a)", kUnsupported, "look-ahead", 0},
    {"(a)\\1", kUnsupported, "backreference", 3},
    {"\\p{L}", kUnsupported, "Unicode property", 0},
    {"[]", kUnsupported, "matches no string", 0},
    {"^[]$|x[]", kUnsupported, "matches no string", 0},
    {"(ab", kInvalid, "unbalanced '('", 0},
    {"[ab", kInvalid, "unterminated character class", 0},
    {"a**", kInvalid, "nothing to repeat", 2},
    {"\\uD800", kInvalid, "surrogate", 0},
};

class RegexPatternRefuses : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RegexPatternRefuses, NamingTheConstructAndOffset) {
  const ErrorCase& c = GetParam();
  std::string rules = "untouched";
  Status s = regex_to_json_string_gbnf(c.pattern, kPrefix, &rules);
  ASSERT_EQ(s.code(), c.code) << printable(c.pattern) << ": " << s.message();
  EXPECT_EQ(rules, "untouched");
  EXPECT_NE(s.message().find(c.names), std::string::npos) << s.message();
  std::string at = "at offset " + std::to_string(c.offset);
  EXPECT_NE(s.message().find(at), std::string::npos) << s.message() << " (expected " << at << ")";
}

INSTANTIATE_TEST_SUITE_P(Cases, RegexPatternRefuses, ::testing::ValuesIn(kPatternErrorCases));

// ECMA-262's readings that differ from regex_to_gbnf's, checked by hand:
// `[]`, `[^]`, `.`, \s.
TEST(RegexPatternEcma, ClassesDotAndSpaces) {
  struct Case {
    const char* pattern;
    std::vector<std::string> accept, reject;  // values
  };
  const Case cases[] = {
      {"x|[]a]", {"x", "ax"}, {"a]", "]", ""}},  // `[]` is empty: nothing matches
      {"^[^]$", {"\n", "\r", "😀", "\"", "\xE2\x80\xA8"}, {"", "ab"}},
      {"^.$", {"a", "\x01", "\"", "\xC2\x85"}, {"\n", "\r", "\xE2\x80\xA8", "\xE2\x80\xA9"}},
      {"^\\s$",
       {" ", "\t", "\v", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x8A", "\xE2\x80\xAF", "\xE3\x80\x80",
        "\xEF\xBB\xBF", "\xE2\x80\xA9"},
       {"\xC2\x85", "\xE2\x80\x8B", "\xE1\xA0\x8E", "a"}},
      {"^\\S$", {"\xC2\x85", "\xE2\x80\x8B", "a", "\""}, {" ", "\v", "\xC2\xA0", "\xEF\xBB\xBF"}},
      {"^[^\\s]$", {"\xC2\x85", "a"}, {"\xE3\x80\x80", "\n"}},
  };
  for (const Case& c : cases) {
    Grammar grammar;
    ASSERT_TRUE(compile_pattern(c.pattern, /*quoted=*/false, &grammar)) << c.pattern;
    for (const std::string& v : c.accept) {
      EXPECT_TRUE(grammar_accepts(grammar, json_inside(v))) << c.pattern << " on " << printable(v);
    }
    for (const std::string& v : c.reject) {
      EXPECT_FALSE(grammar_accepts(grammar, json_inside(v))) << c.pattern << " on " << printable(v);
    }
  }
}

// The search's any-text parts keep the matcher's states small: over a long
// string the number of stacks stops growing after the first bytes (as in a
// finite automaton), and a token mask stays cheap (printed).
TEST(RegexPatternCost, StacksStayFewOnLongStrings) {
  std::vector<std::string> tokens;
  std::mt19937 rng(11);
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz 0123456789\"\\-_.";
  for (int i = 0; i < 20000; ++i) {
    std::string t;
    for (size_t n = 1 + rng() % 6; n > 0; --n) t += alphabet[rng() % alphabet.size()];
    tokens.push_back(t);
  }
  const VocabTrie trie(tokens);
  struct Case {
    const char* pattern;
    std::string text;
  };
  std::string words;
  while (words.size() < 4000) words += "lorem ipsum abc 123 dolor\\\"sit\\\\amet\\t ";
  const Case cases[] = {{"^[a-z]+$", std::string(4000, 'q')},
                        {"abc", words},
                        {"[0-9]+$", words},
                        {"^.*$", words},
                        {"a.*b.*c|x+y", words},
                        {"^(\\w+\\s?)+$", std::string(2000, 'w') + " a"}};
  for (const Case& c : cases) {
    Grammar grammar;
    ASSERT_TRUE(compile_pattern(c.pattern, /*quoted=*/false, &grammar)) << c.pattern;
    Matcher m(&grammar);
    MatchState s = m.initial(), next;
    size_t most = 0, most_early = 0;
    double mask_ms = 0;
    for (size_t i = 0; i < c.text.size(); ++i) {
      m.advance(s, static_cast<uint8_t>(c.text[i]), &next);
      ASSERT_FALSE(next.dead()) << c.pattern << " at byte " << i;
      std::swap(s, next);
      most = std::max(most, s.stacks.size());
      if (i < 1000) most_early = most;
      if (i % 500 == 0) {
        std::vector<uint64_t> mask((tokens.size() + 63) / 64, 0);
        auto start = std::chrono::steady_clock::now();
        compute_token_mask(&m, s, 0, trie, mask.data());
        mask_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
      }
    }
    EXPECT_EQ(most, most_early) << c.pattern << ": the stacks grow with the text";
    EXPECT_LE(most, 32u) << c.pattern;
    EXPECT_LT(m.arena_size(), 10000u) << c.pattern;
    std::printf("%-16s %zu bytes: at most %zu stacks, arena %zu, %.2f ms per mask\n", c.pattern,
                c.text.size(), most, m.arena_size(), mask_ms / ((c.text.size() + 499) / 500));
  }
}

}  // namespace
}  // namespace pvllm::structured
