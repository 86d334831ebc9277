// JSON schema string formats as grammar (json_formats.h) against
// ajv-formats, the reference: tests/data/structured/format_goldens.json
// holds candidate strings for each format with ajv-formats' verdict
// (scripts/reference/make_format_goldens.mjs). A grammar may refuse a valid
// value only where json_formats.cc says it is stricter, and must accept the
// typical values marked "canonical_valid"; it never accepts an invalid one.
// The grammar runs over the value as JSON text spells it, between the quotes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/json_formats.h"

namespace pvllm::structured {
namespace {

using Json = nlohmann::json;

Grammar format_grammar(std::string_view format) {
  std::string rules, entry;
  Status st = json_format_gbnf(format, &rules, &entry);
  EXPECT_TRUE(st.ok()) << st.message();
  Grammar g;
  st = parse_gbnf("root ::= " + entry + "\n" + rules, &g);
  EXPECT_TRUE(st.ok()) << format << ": " << st.message() << "\n" << rules;
  return g;
}

// The value as JSON text spells it between the quotes (nlohmann's escapes:
// \" \\ \b \f \n \r \t, \u00XX for other control characters, the rest raw).
std::string json_inside(const std::string& value) {
  std::string text = Json(value).dump();
  return text.substr(1, text.size() - 2);
}

std::string data_dir() {
  const char* dir = std::getenv("PVLLM_TEST_DATA");
  return dir == nullptr ? "" : dir;
}

TEST(JsonFormatsTest, EveryFormatParsesAloneAndTogether) {
  std::string all, root = "root ::= ";
  for (std::string_view format : json_format_names()) {
    std::string rules, entry;
    ASSERT_TRUE(json_format_gbnf(format, &rules, &entry).ok()) << format;
    EXPECT_EQ(entry, "fmt-" + std::string(format));
    std::istringstream lines(rules);
    size_t num_rules = 0;
    for (std::string line; std::getline(lines, line); ++num_rules) {
      EXPECT_EQ(line.rfind(entry, 0), 0u) << line;
    }
    Grammar g;
    Status st = parse_gbnf("root ::= " + entry + "\n" + rules, &g);
    ASSERT_TRUE(st.ok()) << format << ": " << st.message();
    // Bounded: no format expands into a large grammar.
    EXPECT_LT(num_rules, 100u) << format;
    EXPECT_LT(g.elements.size(), 20000u) << format;
    all += rules;
    root += (root.size() > 9 ? " | " : "") + entry;
  }
  Grammar g;
  Status st = parse_gbnf(root + "\n" + all, &g);
  EXPECT_TRUE(st.ok()) << st.message();  // no two formats define one rule
}

TEST(JsonFormatsTest, UnknownFormatIsUnsupported) {
  std::string rules = "keep", entry = "keep";
  Status st = json_format_gbnf("color", &rules, &entry);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(rules, "keep");
  EXPECT_EQ(entry, "keep");
}

// A few verdicts written out, so the suite checks something without the
// goldens; each agrees with ajv-formats.
TEST(JsonFormatsTest, HandPickedValues) {
  const std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> cases =
      {
          {"date",
           {{"2024-02-29", "2000-02-29", "1999-12-31"},
            {"2024-02-30", "1900-02-29", "2024-13-01", "24-01-01"}}},
          {"time",
           {{"23:59:60Z", "12:00:00.5+05:30", "00:00:00z", "00:59:60+01:00"},
            {"24:00:00Z", "12:00:00", "12:00:60Z", "12:00:00+05:", "12:00:00-0800", "07:00:00+01",
             "12:00:00.1234567890Z"}}},
          {"date-time",
           {{"2024-01-01T12:00:00Z", "2024-01-01T12:00:00.123+02:00", "2024-01-01t12:00:00z"},
            {"2024-01-01T12:00:00", "2024-01-01TT12:00:00Z", "2024-01-01 12:00:00Z"}}},
          {"duration", {{"P1Y2M", "PT1S", "P3W", "P1DT2H"}, {"P", "PT", "P1W2D", "P1DT", "p1d"}}},
          {"email",
           {{"a.b+c@example.co.uk", "x@y.z"}, {"a..b@x.com", ".a@x.com", "a@x", "a@-x.com"}}},
          {"hostname",
           {{"example.com", "a", "example.com.", std::string(63, 'a') + ".com"},
            {"-", "a-.com", "-a.com", "a..b", std::string(64, 'a')}}},
          {"ipv4", {{"0.0.0.0", "255.255.255.255"}, {"256.1.1.1", "01.2.3.4", "1.2.3"}}},
          {"ipv6",
           {{"::", "::1", "1::", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8", "fe80::1:2"},
            {"1:2:3:4:5:6:7:8:9", ":::", "1::2::3", "::01.2.3.4", "1:2:3:4:5:6::1.2.3.4"}}},
          {"uri",
           {{"http://x.org/a?b=c#d", "urn:isbn:123", "mailto:a@b.c", "http://[::1]:80/"},
            {"http://x/%zz", "//x.org", "a b:c", "x"}}},
          {"uri-reference",
           {{"", "/a/b?c", "#frag", "../x", "a/b:c"},
            {"http://x/%zz", "a b", "#a#b", "://", ":a", "http://x/\"q\""}}},
          {"uuid",
           {{"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"},
            {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g",
             "urn:uuid:123E4567-E89B-12D3-A456-426614174000"}}},
      };
  for (const auto& [format, lists] : cases) {
    const Grammar g = format_grammar(format);
    for (const std::string& v : lists.first) {
      EXPECT_TRUE(grammar_accepts(g, json_inside(v))) << format << ": " << v;
    }
    for (const std::string& v : lists.second) {
      EXPECT_FALSE(grammar_accepts(g, json_inside(v))) << format << ": " << v;
    }
  }
}

TEST(JsonFormatsTest, AgreesWithAjvFormats) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  std::ifstream in(data_dir() + "/structured/format_goldens.json");
  ASSERT_TRUE(in) << "no structured/format_goldens.json in " << data_dir();
  const Json golden = Json::parse(in);
  std::map<std::string, Grammar> grammars;
  for (std::string_view f : json_format_names()) grammars[std::string(f)] = format_grammar(f);
  std::map<std::string, int> num_cases, num_valid, num_stricter;
  std::set<std::string> with_cases;
  for (const Json& c : golden.at("cases")) {
    const std::string format = c.at("format").get<std::string>();
    const std::string value = c.at("value").get<std::string>();
    const bool valid = c.at("valid").get<bool>();
    const bool canonical = c.value("canonical_valid", false);
    ASSERT_TRUE(grammars.count(format)) << format;
    const bool accepted = grammar_accepts(grammars[format], json_inside(value));
    ++num_cases[format];
    num_valid[format] += valid;
    // Never looser than the reference.
    EXPECT_FALSE(accepted && !valid)
        << format << " accepts " << Json(value).dump() << ", which ajv-formats refuses";
    if (canonical) {
      EXPECT_TRUE(valid) << Json(value).dump();
      EXPECT_TRUE(accepted) << format << " refuses the typical value " << Json(value).dump();
    }
    if (valid && !accepted) {
      ++num_stricter[format];
      std::cout << "stricter than ajv-formats: " << format << " " << Json(value).dump() << "\n";
    }
  }
  for (std::string_view f : json_format_names()) {
    const std::string format(f);
    // Each format has both verdicts among many cases.
    EXPECT_GE(num_cases[format], 50) << format;
    EXPECT_GE(num_valid[format], 10) << format;
    EXPECT_GE(num_cases[format] - num_valid[format], 10) << format;
    std::cout << format << ": " << num_cases[format] << " cases, " << num_valid[format]
              << " valid, " << num_stricter[format] << " valid ones refused\n";
  }
}

// Random sentences of a grammar, as JSON text: alternatives chosen
// uniformly (so x* stops with probability 1/2 at each step), characters
// uniformly within a uniformly chosen range. false past `depth` rules.
bool sample_rule(const Grammar& g, uint32_t rule, std::mt19937& rng, int depth, std::string* out) {
  if (depth > 400) return false;
  const std::vector<uint32_t>& alts = g.rules[rule];
  uint32_t e = alts[std::uniform_int_distribution<size_t>(0, alts.size() - 1)(rng)];
  for (; g.elements[e].kind != Element::kEnd; ++e) {
    const Element& el = g.elements[e];
    if (el.kind == Element::kRule) {
      if (!sample_rule(g, el.value, rng, depth + 1, out)) return false;
      continue;
    }
    const std::vector<CharRange>& ranges = g.char_sets[el.value].ranges;
    const CharRange& r = ranges[std::uniform_int_distribution<size_t>(0, ranges.size() - 1)(rng)];
    uint32_t cp = std::uniform_int_distribution<uint32_t>(r.lo, r.hi)(rng);
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return true;
}

// The grammars' own random sentences decode as JSON string contents and
// are accepted. With PVLLM_FORMAT_SAMPLES_OUT set, writes them (decoded,
// {"format": [values]}) for make_format_goldens.mjs, which adds them to
// the goldens with ajv-formats' verdict.
TEST(JsonFormatsTest, RandomSentencesAreJsonStrings) {
  std::mt19937 rng(20240229);
  Json samples = Json::object();
  for (std::string_view f : json_format_names()) {
    const Grammar g = format_grammar(f);
    Json& list = samples[std::string(f)] = Json::array();
    for (int i = 0; i < 60; ++i) {
      std::string text;
      if (!sample_rule(g, g.root, rng, 0, &text)) continue;
      ASSERT_TRUE(grammar_accepts(g, text)) << f << ": " << text;
      Json decoded = Json::parse("\"" + text + "\"", nullptr, false);
      ASSERT_TRUE(decoded.is_string()) << f << ": " << text;
      list.push_back(decoded);
    }
  }
  const char* out = std::getenv("PVLLM_FORMAT_SAMPLES_OUT");
  if (out != nullptr && out[0] != '\0') {
    std::ofstream(out) << samples.dump(1) << "\n";
  }
}

}  // namespace
}  // namespace pvllm::structured
