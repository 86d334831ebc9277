// JSON schema objects with JsonGrammarOptions::any_order: members in any
// order, each at most once, the required ones present, unlisted ones where
// additionalProperties allows them, minProperties / maxProperties exact.
// Random object schemas are checked against JSON Schema's reading of them
// over every document their member names spell (up to four members), and
// the declared order stays the default.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/json_schema.h"

namespace pvllm::structured {
namespace {

bool compile(const std::string& schema, const JsonGrammarOptions& options, Grammar* g,
             std::string* gbnf) {
  Status st = json_schema_to_gbnf(schema, gbnf, options);
  if (!st.ok()) {
    ADD_FAILURE() << st.message() << "\nschema: " << schema;
    return false;
  }
  st = parse_gbnf(*gbnf, g);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << *gbnf;
  return st.ok();
}

struct ObjectSchema {
  std::vector<std::string> listed;  // each takes integers
  std::set<std::string> required;
  int additional = 0;  // 0 absent, 1 true, 2 false, 3 strings only
  int min = -1, max = -1;
  std::vector<std::pair<std::string, std::string>> needs;  // dependentRequired: a needs b
  bool draft4 = false;  // "dependencies" rather than "dependentRequired"

  std::string json() const {
    std::string s = "{\"type\":\"object\",\"properties\":{";
    for (size_t i = 0; i < listed.size(); ++i) {
      s += (i ? "," : "") + ("\"" + listed[i] + "\":{\"type\":\"integer\"}");
    }
    s += "}";
    if (!required.empty()) {
      s += ",\"required\":[";
      bool first = true;
      for (const std::string& r : required) {
        s += (first ? "\"" : ",\"") + r + "\"";
        first = false;
      }
      s += "]";
    }
    const char* additional_values[] = {"", "true", "false", "{\"type\":\"string\"}"};
    if (additional != 0)
      s += std::string(",\"additionalProperties\":") + additional_values[additional];
    if (!needs.empty()) {
      s += draft4 ? ",\"dependencies\":{" : ",\"dependentRequired\":{";
      for (size_t i = 0; i < needs.size(); ++i) {
        s += (i ? ",\"" : "\"") + needs[i].first + "\":[\"" + needs[i].second + "\"]";
      }
      s += "}";
    }
    if (min >= 0) s += ",\"minProperties\":" + std::to_string(min);
    if (max >= 0) s += ",\"maxProperties\":" + std::to_string(max);
    return s + "}";
  }

  // JSON Schema's reading, less what the options leave out: unlisted
  // members only with `unlisted`.
  bool valid(const std::vector<std::pair<std::string, std::string>>& members, bool unlisted) const {
    std::set<std::string> names;
    for (const auto& [name, value] : members) {
      names.insert(name);
      const bool is_listed = std::find(listed.begin(), listed.end(), name) != listed.end();
      if (is_listed) {
        if (value != "1") return false;
      } else if (!unlisted || additional == 2 || (additional == 3 && value[0] != '"')) {
        return false;
      }
    }
    for (const std::string& r : required) {
      if (!names.count(r)) return false;
    }
    for (const auto& [a, b] : needs) {
      if (names.count(a) && !names.count(b)) return false;
    }
    const int n = static_cast<int>(members.size());
    return n >= min && (max < 0 || n <= max);
  }

  // The declared order: the listed members as listed, then the unlisted
  // names dependencies speak of, as they first come in them, then any
  // other names.
  bool in_declared_order(const std::vector<std::pair<std::string, std::string>>& members) const {
    std::vector<std::string> order = listed;
    for (const auto& [a, b] : needs) {
      for (const std::string& name : {a, b}) {
        if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
      }
    }
    const auto unranked = static_cast<ptrdiff_t>(order.size());
    ptrdiff_t last = -1;
    for (const auto& m : members) {
      const ptrdiff_t rank = std::find(order.begin(), order.end(), m.first) - order.begin();
      if (rank < last || (rank == last && rank < unranked)) return false;
      last = rank;
    }
    return true;
  }
};

TEST(JsonAnyOrderTest, RandomObjectSchemasOverEveryOrderOfTheirMembers) {
  std::mt19937 rng(3);
  const std::vector<std::string> names = {"a", "b", "c", "x"};  // "x" is never listed
  int checked = 0, accepted = 0;
  for (int round = 0; round < 240; ++round) {
    ObjectSchema o;
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) {
      o.listed.push_back(names[i]);
      if (rng() % 2) o.required.insert(names[i]);
    }
    o.additional = static_cast<int>(rng() % 4);
    if (rng() % 3 == 0) o.min = static_cast<int>(rng() % 4);
    if (rng() % 3 == 0) o.max = static_cast<int>(rng() % 4);
    if (o.max >= 0 && o.min > o.max) std::swap(o.min, o.max);
    for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
      const std::string a = names[rng() % names.size()], b = names[rng() % names.size()];
      const bool known =
          std::any_of(o.needs.begin(), o.needs.end(), [&a](const auto& n) { return n.first == a; });
      if (a != b && !known) o.needs.emplace_back(a, b);  // one list per name
    }
    o.draft4 = rng() % 2;
    const bool unlisted = rng() % 2;
    const bool any_order = round % 2 == 0;  // else the declared order (an %ordered term)
    Grammar g;
    std::string gbnf;
    const std::string schema = o.json();
    // A schema that nothing can match is refused as such; then no document
    // may be valid.
    const Status st = json_schema_to_gbnf(
        schema, &gbnf, {.unlisted_properties = unlisted, .any_order = any_order});
    const bool matches_nothing = !st.ok();
    if (matches_nothing) {
      EXPECT_NE(st.message().find("nothing can match"), std::string::npos) << st.message();
    } else {
      ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
    }
    // Every sequence of distinct names, each valued 1 or "s".
    std::vector<std::pair<std::string, std::string>> members;
    std::function<void()> visit = [&]() {
      std::string doc = "{";
      for (size_t k = 0; k < members.size(); ++k) {
        doc += (k ? ",\"" : "\"") + members[k].first + "\":" + members[k].second;
      }
      doc += "}";
      const bool expect = o.valid(members, unlisted) && (any_order || o.in_declared_order(members));
      EXPECT_EQ(!matches_nothing && grammar_accepts(g, doc), expect)
          << "schema " << schema << (unlisted ? " (unlisted)" : "")
          << (any_order ? " (any order)" : "") << "\ndocument " << doc << "\n"
          << gbnf;
      ++checked;
      accepted += expect;
      if (members.size() == names.size()) return;
      for (const std::string& name : names) {
        bool used = false;
        for (const auto& m : members) used |= m.first == name;
        if (used) continue;
        for (const char* value : {"1", "\"s\""}) {
          members.emplace_back(name, value);
          visit();
          members.pop_back();
        }
      }
    };
    visit();
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(accepted, 500);
}

TEST(JsonAnyOrderTest, DependenciesInEitherOrder) {
  std::string gbnf;
  for (const char* schema : {R"({"type":"object","dependentRequired":{"a":["b"]}})",
                             R"({"type":"object","dependencies":{"a":["b"]}})"}) {
    for (bool any_order : {false, true}) {
      Grammar g;
      ASSERT_TRUE(
          compile(schema, {.unlisted_properties = true, .any_order = any_order}, &g, &gbnf));
      EXPECT_TRUE(grammar_accepts(g, R"({"a":1,"b":2})")) << gbnf;
      EXPECT_TRUE(grammar_accepts(g, R"({"b":2,"z":3})")) << gbnf;
      EXPECT_FALSE(grammar_accepts(g, R"({"a":1})")) << gbnf;
      EXPECT_FALSE(grammar_accepts(g, R"({"a":1,"z":3})")) << gbnf;
      EXPECT_EQ(grammar_accepts(g, R"({"b":2,"a":1})"), any_order) << gbnf;
    }
  }
  const Status st = json_schema_to_gbnf(
      R"({"type":"object","dependencies":{"a":{"required":["b"]}}})", &gbnf, {.any_order = true});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("with a schema"), std::string::npos) << st.message();
  Grammar g;
  ASSERT_TRUE(compile(R"({"type":"object","properties":{"a":{},"b":{}},"required":["a"],
                          "dependentRequired":{"a":["c"]}})",
                      {.unlisted_properties = true, .any_order = true}, &g, &gbnf));
  EXPECT_TRUE(grammar_accepts(g, R"({"c":1,"a":2})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a":2,"b":1})"));
  const Status none = json_schema_to_gbnf(
      R"({"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false,
          "dependentRequired":{"a":["c"]}})",
      &gbnf, {.any_order = true});
  EXPECT_NE(none.message().find("nothing can match"), std::string::npos) << none.message();
}

TEST(JsonAnyOrderTest, DeclaredOrderStaysTheDefault) {
  const std::string schema =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]})";
  Grammar ordered, any;
  std::string gbnf;
  ASSERT_TRUE(compile(schema, {}, &ordered, &gbnf));
  ASSERT_TRUE(compile(schema, {.any_order = true}, &any, &gbnf));
  EXPECT_TRUE(grammar_accepts(ordered, R"({"a":1,"b":2})"));
  EXPECT_FALSE(grammar_accepts(ordered, R"({"b":2,"a":1})"));
  EXPECT_TRUE(grammar_accepts(any, R"({"a":1,"b":2})"));
  EXPECT_TRUE(grammar_accepts(any, R"({"b":2,"a":1})"));
  EXPECT_FALSE(grammar_accepts(any, R"({"b":2,"a":1,"b":3})"));
}

TEST(JsonAnyOrderTest, NestedRecursiveWhitespacedAndPatternMembers) {
  // A recursive tree whose nodes list their members in any order, with
  // JSON's whitespace; patternProperties members anywhere among them.
  const std::string schema = R"({
    "$defs": {"node": {"type": "object",
      "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["name"],
      "patternProperties": {"^x-": {"type": "integer"}},
      "additionalProperties": false}},
    "$ref": "#/$defs/node"})";
  Grammar g;
  std::string gbnf;
  ASSERT_TRUE(compile(schema, {.whitespace = true, .unlisted_properties = true, .any_order = true},
                      &g, &gbnf));
  for (const char* ok : {
           R"({"name": "r"})",
           R"({ "kids": [ {"name": "k", "x-1": 2} ], "name": "r" })",
           R"({"x-a": 1, "kids": [{"kids": [], "name": "k"}], "x-b": 2, "name": "r"})",
       }) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok << "\n" << gbnf;
  }
  for (const char* bad : {
           R"({"kids": []})",                         // name is required
           R"({"name": "r", "name": "s"})",           // twice
           R"({"kids": [{"x-1": 1}], "name": "r"})",  // the kid has no name
           R"({"name": "r", "y": 1})",                // no pattern matches y
           R"({"name": "r", "x-1": "s"})",            // x- members are integers
       }) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad << "\n" << gbnf;
  }
}

TEST(JsonAnyOrderTest, PropertyCountsHoldExactly) {
  // Exact in any order and in the declared one, unlisted members counted
  // too.
  const std::string schema =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"minProperties":2,"maxProperties":2})";
  std::string gbnf;
  Grammar declared;
  ASSERT_TRUE(compile(schema, {.unlisted_properties = true}, &declared, &gbnf));
  EXPECT_TRUE(grammar_accepts(declared, R"({"a":1,"c":2})"));
  EXPECT_TRUE(grammar_accepts(declared, R"({"b":2,"z":1})"));
  EXPECT_FALSE(grammar_accepts(declared, R"({"c":1,"a":2})"));
  EXPECT_FALSE(grammar_accepts(declared, R"({"a":1,"b":2,"c":3})"));
  EXPECT_FALSE(grammar_accepts(declared, R"({"z":1})"));
  Grammar g;
  ASSERT_TRUE(compile(schema, {.unlisted_properties = true, .any_order = true}, &g, &gbnf));
  EXPECT_TRUE(grammar_accepts(g, R"({"c":1,"a":2})"));
  EXPECT_TRUE(grammar_accepts(g, R"({"z":1,"b":2})"));
  EXPECT_TRUE(grammar_accepts(g, R"({"z":1,"y":2})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a":1})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a":1,"b":2,"c":3})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a":1,"z":2,"b":3})"));
}

}  // namespace
}  // namespace pvllm::structured
