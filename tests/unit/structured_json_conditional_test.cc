// if / then / else in JSON schemas against ajv, the reference:
// tests/data/structured/conditional_goldens.json holds random schemas built
// around conditions (scripts/reference/make_conditional_goldens.mjs), each
// with instances ajv labelled valid or invalid. Every schema must compile,
// and its grammar must accept exactly the valid instances, with members in
// any order and unlisted members allowed (JSON Schema's own reading) and,
// for the instances whose members come in the declared order, without any
// option. Plus the forms refused, by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/structured/grammar.h"
#include "core/structured/json_schema.h"

namespace pvllm::structured {
namespace {

using Json = nlohmann::ordered_json;

std::string data_dir() {
  const char* dir = std::getenv("PVLLM_TEST_DATA");
  return dir == nullptr ? "" : dir;
}

TEST(JsonConditionalTest, AgreesWithAjvOnRandomConditions) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  std::ifstream in(data_dir() + "/structured/conditional_goldens.json");
  ASSERT_TRUE(in) << "no structured/conditional_goldens.json in " << data_dir();
  const Json golden = Json::parse(in);
  int schemas = 0, refused = 0, checked = 0, valid = 0;
  for (const Json& c : golden.at("cases")) {
    const std::string schema = c.at("schema").dump();
    std::string gbnf;
    const Status st =
        json_schema_to_gbnf(schema, &gbnf, {.unlisted_properties = true, .any_order = true});
    if (!st.ok()) {
      // Refused by name, never loosened: a `not` of strings beside a length
      // bound (a condition on a member whose other branch bounds it).
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message() << "\nschema: " << schema;
      EXPECT_NE(st.message().find("unsupported keyword"), std::string::npos) << st.message();
      std::cerr << st.message() << "\n";
      ++refused;
      continue;
    }
    Grammar g;
    ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
    ++schemas;
    for (const Json& i : c.at("instances")) {
      const std::string text = i.at("text").get<std::string>();
      const bool expect = i.at("valid").get<bool>();
      EXPECT_EQ(grammar_accepts(g, text), expect)
          << "schema: " << schema << "\ninstance: " << text << "\n"
          << gbnf;
      ++checked;
      valid += expect;
    }
  }
  EXPECT_LE(refused * 10, schemas) << refused << " refused";
  EXPECT_GE(schemas, 100);
  EXPECT_GE(checked, 3000);
  EXPECT_GE(valid, 500);
}

TEST(JsonConditionalTest, DeclaredOrderAndThenOrElseAlone) {
  // The default options: members in the declared order, no unlisted ones.
  const std::string schema = R"({"type":"object",
    "properties":{"kind":{"type":"string"},"n":{"type":"integer"}},
    "if":{"properties":{"kind":{"const":"big"}},"required":["kind"]},
    "then":{"properties":{"n":{"minimum":100}},"required":["n"]},
    "else":{"properties":{"n":{"maximum":9}}}})";
  std::string gbnf;
  ASSERT_TRUE(json_schema_to_gbnf(schema, &gbnf).ok());
  Grammar g;
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
  for (const char* ok : {R"({"kind":"big","n":100})", R"({"kind":"small","n":9})", R"({"n":3})",
                         "{}", R"({"kind":"bigger"})"}) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok << "\n" << gbnf;
  }
  for (const char* bad : {R"({"kind":"big"})", R"({"kind":"big","n":99})",
                          R"({"kind":"small","n":10})", R"({"n":100})"}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad << "\n" << gbnf;
  }
  // Drafts 4 and 6 do not define them: ignored there, as their validators
  // do (an "if" otherwise refused included).
  for (const char* draft :
       {"http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#"}) {
    const std::string old = std::string(R"({"$schema":")") + draft +
                            R"(","type":"integer","if":{"minimum":5},"then":false,
                              "allOf":[{"if":{"const":1},"else":false}]})";
    ASSERT_TRUE(json_schema_to_gbnf(old, &gbnf).ok()) << old;
    ASSERT_TRUE(parse_gbnf(gbnf, &g).ok());
    EXPECT_TRUE(grammar_accepts(g, "7")) << old;
  }
  const Status st = json_schema_to_gbnf(
      R"({"$schema":"http://json-schema.org/draft-07/schema#","type":"integer",
          "if":{"multipleOf":5},"then":false})",
      &gbnf);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  ASSERT_TRUE(json_schema_to_gbnf(R"({"$schema":"http://json-schema.org/draft-07/schema#",
                                      "type":"integer","if":{"const":1},"else":false})",
                                  &gbnf)
                  .ok());
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok());
  EXPECT_TRUE(grammar_accepts(g, "1"));
  EXPECT_FALSE(grammar_accepts(g, "7"));
  // then / else without if say nothing.
  ASSERT_TRUE(json_schema_to_gbnf(R"({"type":"integer","then":false,"else":false})", &gbnf).ok());
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok());
  EXPECT_TRUE(grammar_accepts(g, "7"));
}

TEST(JsonConditionalTest, NotOfValues) {
  std::string gbnf;
  Grammar g;
  ASSERT_TRUE(json_schema_to_gbnf(R"({"type":"string","not":{"enum":["a","ab"]}})", &gbnf).ok());
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
  for (const char* ok : {R"("")", R"("b")", R"("abc")", R"("A")"}) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  }
  for (const char* bad : {R"("a")", R"("ab")", "1"}) EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
  ASSERT_TRUE(json_schema_to_gbnf(R"({"enum":[1,"x",null],"not":{"const":"x"}})", &gbnf).ok());
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
  EXPECT_TRUE(grammar_accepts(g, "1"));
  EXPECT_TRUE(grammar_accepts(g, "null"));
  EXPECT_FALSE(grammar_accepts(g, R"("x")"));
  ASSERT_TRUE(
      json_schema_to_gbnf(R"({"type":["boolean","null"],"not":{"enum":[null,true]}})", &gbnf).ok());
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
  EXPECT_TRUE(grammar_accepts(g, "false"));
  EXPECT_FALSE(grammar_accepts(g, "true"));
  EXPECT_FALSE(grammar_accepts(g, "null"));
}

TEST(JsonConditionalTest, FormsRefusedByName) {
  struct Case {
    const char* schema;
    const char* says;
  };
  for (const Case& c : {
           Case{R"({"if":{"multipleOf":3},"then":{"minimum":2}})",
                R"("if" ("multipleOf" in its schema))"},
           Case{R"({"if":{"properties":{"a":{"pattern":"^x"}}},"then":{"required":["b"]}})",
                R"("if" ("pattern" in its schema))"},
           Case{R"({"type":"integer","not":{"const":3}})", R"("not" (of a number))"},
           Case{R"({"type":"string","maxLength":3,"not":{"const":"x"}})",
                R"("not" of strings beside "maxLength")"},
           Case{R"({"type":["boolean","string"],"not":{"const":true}})",
                R"("not" (of one boolean)"},
       }) {
    std::string gbnf;
    const Status st = json_schema_to_gbnf(c.schema, &gbnf);
    ASSERT_FALSE(st.ok()) << c.schema << "\n" << gbnf;
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace pvllm::structured
