// JSON schema -> GBNF: each schema is converted, the grammar parsed with
// parse_gbnf, and compact documents checked with grammar_accepts (valid
// ones accepted, invalid ones refused); then the refusals: unsupported
// keywords name themselves and their pointer, malformed JSON its offset,
// hostile sizes and depths are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/integer_range.h"
#include "core/structured/json_schema.h"

namespace pvllm::structured {
namespace {

// Converts `schema` and parses the grammar; fails the test and returns
// false when either step fails.
bool compile(std::string_view schema, Grammar* grammar, std::string* gbnf_out = nullptr) {
  std::string gbnf;
  Status st = json_schema_to_gbnf(schema, &gbnf);
  if (!st.ok()) {
    ADD_FAILURE() << "conversion failed: " << st.message() << "\nschema: " << schema;
    return false;
  }
  Status parsed = parse_gbnf(gbnf, grammar);
  if (!parsed.ok()) {
    ADD_FAILURE() << "parse_gbnf failed: " << parsed.message() << "\ngrammar:\n" << gbnf;
    return false;
  }
  if (gbnf_out) *gbnf_out = gbnf;
  return true;
}

void check(std::string_view schema, const std::vector<std::string>& accepted,
           const std::vector<std::string>& rejected) {
  Grammar g;
  std::string gbnf;
  if (!compile(schema, &g, &gbnf)) return;
  for (const auto& doc : accepted) {
    EXPECT_TRUE(grammar_accepts(g, doc))
        << "should accept " << doc << "\nschema: " << schema << "\ngrammar:\n"
        << gbnf;
  }
  for (const auto& doc : rejected) {
    EXPECT_FALSE(grammar_accepts(g, doc))
        << "should reject " << doc << "\nschema: " << schema << "\ngrammar:\n"
        << gbnf;
  }
}

// Expects conversion to fail with `code` and a message holding each of `parts`.
void expect_refused(std::string_view schema, StatusCode code,
                    const std::vector<std::string>& parts) {
  std::string gbnf;
  Status st = json_schema_to_gbnf(schema, &gbnf);
  ASSERT_FALSE(st.ok()) << "converted: " << schema << "\ngrammar:\n" << gbnf;
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_EQ(st.message().rfind("json schema: ", 0), 0u) << st.message();
  for (const auto& part : parts) {
    EXPECT_NE(st.message().find(part), std::string::npos)
        << "message \"" << st.message() << "\" lacks \"" << part << "\"";
  }
}

void expect_unsupported(std::string_view schema, const std::string& keyword,
                        const std::string& pointer) {
  expect_refused(schema, StatusCode::kUnsupported, {"\"" + keyword + "\"", "at " + pointer});
}

std::string repeated(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

const std::vector<std::string> kAnyValues = {
    "1",
    "-0.5e+10",
    "\"x\"",
    "true",
    "false",
    "null",
    "[]",
    "{}",
    "{\"a\":[1,{\"b\":null}]}",
    "[\"\",0,[[]]]",
};
const std::vector<std::string> kNotJson = {
    "", "tru", "01", "{\"a\":1,}", "[1,]", "{ \"a\":1}", "[1, 2]", "{'a':1}", "\"a", "1 ",
};

// ---- any value ---------------------------------------------------------------

TEST(JsonSchemaTest, TrueAndEmptySchemaAcceptAnyCompactValue) {
  check("true", kAnyValues, kNotJson);
  check("{}", kAnyValues, kNotJson);
  check(R"({"title":"t","description":"d","$schema":"x","$comment":"c","default":1,
            "examples":[1],"$id":"i","deprecated":false,"readOnly":true,"writeOnly":false})",
        kAnyValues, kNotJson);
}

TEST(JsonSchemaTest, FalseSchemaIsRefused) {
  std::string gbnf;
  Status st = json_schema_to_gbnf("false", &gbnf);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kUnsupported);
}

TEST(JsonSchemaTest, ObjectGrammarAcceptsAnyCompactObject) {
  Grammar g;
  Status st = parse_gbnf(json_object_gbnf(), &g);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << json_object_gbnf();
  for (std::string doc : {"{}", "{\"a\":1}", "{\"a\":{\"b\":[1,\"x\",null]},\"c\":true}",
                          "{\"\\u00e9\":\"\\n\"}", "{\"k\":-1.5E-3}"}) {
    EXPECT_TRUE(grammar_accepts(g, doc)) << doc;
  }
  for (std::string doc : {"[]", "1", "\"a\"", "null", "{ }", "{\"a\": 1}", "{\"a\":1,}", "{a:1}",
                          "{\"a\"}", "{}{}"}) {
    EXPECT_FALSE(grammar_accepts(g, doc)) << doc;
  }
}

// ---- scalar types ------------------------------------------------------------

TEST(JsonSchemaTest, ScalarTypes) {
  check(R"({"type":"string"})", {"\"\"", "\"abc\"", "\"é\""}, {"1", "null", "abc", "[\"a\"]"});
  check(R"({"type":"boolean"})", {"true", "false"}, {"1", "\"true\"", "null", "True"});
  check(R"({"type":"null"})", {"null"}, {"0", "\"null\"", "{}", "nul"});
  check(R"({"type":"integer"})", {"0", "-0", "7", "-123", "1234567890123456"},
        {"1.5", "1e3", "01", "+1", "\"1\"", "-", "12345678901234567"});
  check(R"({"type":"number"})", {"0", "-0", "1.5", "-0.25", "1e5", "1E+05", "2.5e-3"},
        {".5", "1.", "+1", "01", "1e", "1e+", "NaN", "\"1\"", "1.5.5", "--1"});
}

TEST(JsonSchemaTest, TypeArrayIsAlternation) {
  check(R"({"type":["string","null"]})", {"\"a\"", "null"}, {"1", "true", "{}"});
  check(R"({"type":["integer","number","boolean"]})", {"1", "1.5", "false"}, {"null", "\"1\""});
  check(R"({"type":["array","object"],"items":{"type":"integer"},)"
        R"("properties":{"a":{"type":"null"}}})",
        {"[1,2]", "[]", "{\"a\":null}", "{}"}, {"[\"x\"]", "{\"a\":1}", "null"});
}

TEST(JsonSchemaTest, StringEscapes) {
  check(R"({"type":"string"})",
        {R"("a\"b")", R"("\\")", R"("\/")", R"("\u00e9\u20AC")", R"("\b\f\n\r\t")", "\"日本\""},
        {R"("\x")", R"("\u12")", R"("\u12G4")", "\"a\nb\"", "\"a\tb\"", R"("a"b")", R"("\")",
         "\"abc", R"("\a")"});
}

TEST(JsonSchemaTest, StringLengthCountsCharactersAndEscapes) {
  check(R"({"type":"string","minLength":2,"maxLength":4})",
        {"\"ab\"", "\"abcd\"", R"("a\nb")", R"("\u0041\u0042")", "\"éé\"", "\"日本語\""},
        {"\"a\"", "\"\"", "\"abcde\"", R"("\n")", "\"é\"", R"("\u0041\u0042\u0043\u0044x")"});
  check(R"({"type":"string","maxLength":0})", {"\"\""}, {"\"a\"", R"("\n")"});
  check(R"({"type":"string","minLength":3})", {"\"abc\"", "\"abcdefghij\""}, {"\"ab\""});
  check(R"({"minLength":1})", {"\"a\""}, {"\"\""});  // a string keyword implies a string
}

TEST(JsonSchemaTest, KeywordsOfAnotherTypeAreIgnored) {
  check(R"({"type":"integer","minLength":3,"items":{"type":"string"},"required":["x"]})",
        {"5", "-12"}, {"\"abc\"", "[\"a\"]"});
  check(R"({"type":"string","minimum":3,"multipleOf":2,"uniqueItems":true})", {"\"x\""}, {"1"});
}

// ---- objects -----------------------------------------------------------------

constexpr char kPerson[] = R"({
  "type":"object",
  "properties":{"name":{"type":"string"},"age":{"type":"integer"}},
  "required":["name","age"],
  "additionalProperties":false})";

TEST(JsonSchemaTest, RequiredPropertiesInSchemaOrder) {
  check(kPerson, {R"({"name":"Ann","age":30})", R"({"name":"","age":-1})"},
        {R"({"name":"Ann"})", R"({"age":30})", "{}", R"({"age":30,"name":"Ann"})",
         R"({"name":"Ann","age":"30"})", R"({"name":"Ann","age":30,"x":1})",
         R"({"name":"Ann","age":30,})", R"({"name":"Ann", "age":30})",
         R"({ "name":"Ann","age":30})", R"({"name":"Ann","age":30} )",
         R"({"name" :"Ann","age":30})", R"({"name":"Ann","age":30,"age":30})", R"(["Ann",30])"});
}

TEST(JsonSchemaTest, EveryCombinationOfOptionalPropertiesAllOptional) {
  constexpr char schema[] = R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}}})";
  check(schema,
        {"{}", R"({"a":1})", R"({"b":"x"})", R"({"c":true})", R"({"a":1,"b":"x"})",
         R"({"a":1,"c":true})", R"({"b":"x","c":true})", R"({"a":1,"b":"x","c":true})"},
        {R"({,"a":1})", R"({"a":1,})", R"({"a":1,,"c":true})", R"({"b":"x","a":1})",
         R"({"c":true,"b":"x"})", R"({"a":1"b":"x"})", R"({"a":1,"a":1})", R"({"a":"x"})",
         R"({"d":1})", R"({"a":1,"b":"x","c":true,})"});
}

TEST(JsonSchemaTest, EveryCombinationOfOptionalPropertiesAroundRequiredOnes) {
  // Required in the middle: b must be present; a and c optional.
  check(R"({"properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"null"}},
            "required":["b"]})",
        {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":null})",
         R"({"a":1,"b":"x","c":null})"},
        {"{}", R"({"a":1})", R"({"c":null})", R"({"a":1,"c":null})", R"({,"b":"x"})",
         R"({"b":"x",})", R"({"a":1,"b":"x",})"});
  // Required last and first.
  check(R"({"properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},
            "required":["c"]})",
        {R"({"c":3})", R"({"a":1,"c":3})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
        {"{}", R"({"a":1,"b":2})", R"({"a":1})", R"({"c":3,"a":1})"});
  check(R"({"properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},
            "required":["a"]})",
        {R"({"a":1})", R"({"a":1,"b":2})", R"({"a":1,"c":3})", R"({"a":1,"b":2,"c":3})"},
        {"{}", R"({"b":2,"c":3})", R"({"b":2})", R"({"a":1,"c":3,"b":2})"});
}

std::string optional_integers_schema(int count) {
  std::string props;
  for (int i = 0; i < count; ++i) {
    props += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\":{\"type\":\"integer\"}";
  }
  return "{\"type\":\"object\",\"properties\":{" + props + "}}";
}

TEST(JsonSchemaTest, ManyOptionalPropertiesStayLinear) {
  std::string small, large;
  ASSERT_TRUE(json_schema_to_gbnf(optional_integers_schema(250), &small).ok());
  ASSERT_TRUE(json_schema_to_gbnf(optional_integers_schema(1000), &large).ok());
  EXPECT_LT(large.size(), 5 * small.size());  // 4x the properties: about 4x the text
  EXPECT_LT(large.size(), 200u * 1000u);
  check(optional_integers_schema(500), {"{}", R"({"p0":1,"p250":2,"p499":3})", R"({"p499":0})"},
        {R"({"p1":1,"p0":1})", R"({"p500":1})", R"({"p0":1,"p0":1})"});
}

TEST(JsonSchemaTest, AdditionalPropertiesWithoutProperties) {
  check(R"({"type":"object"})", {"{}", R"({"x":[1]})", R"({"a":1,"b":{"c":null}})"},
        {"[]", R"({"a":1,})", "{ }"});
  check(R"({"type":"object","additionalProperties":true})", {"{}", R"({"x":1})"}, {"null"});
  check(R"({"type":"object","additionalProperties":false})", {"{}"}, {R"({"a":1})"});
  check(R"({"type":"object","additionalProperties":{"type":"integer"}})",
        {"{}", R"({"a":1})", R"({"a":1,"b\"c":-2})"},
        {R"({"a":"x"})", R"({"a":1,"b":null})", R"({"a":1,})", R"({a:1})"});
}

TEST(JsonSchemaTest, ListedPropertiesWithAdditionalPropertiesAllowed) {
  // Only listed properties are emitted; documents stay valid.
  check(R"({"type":"object","properties":{"a":{"type":"integer"}}})", {"{}", R"({"a":1})"},
        {R"({"a":"x"})"});
}

TEST(JsonSchemaTest, RequiredNameOutsidePropertiesTakesAnyValue) {
  check(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a","z"]})",
        {R"({"a":1,"z":[1,{"q":null}]})", R"({"a":1,"z":"s"})"},
        {R"({"a":1})", R"({"z":1})", R"({"a":1,"z":})"});
  check(R"({"required":["z"],"additionalProperties":{"type":"boolean"}})", {R"({"z":true})"},
        {R"({"z":1})", "{}"});
}

TEST(JsonSchemaTest, FalsePropertyMayNotAppear) {
  check(R"({"properties":{"a":false,"b":{"type":"integer"}}})", {"{}", R"({"b":1})"},
        {R"({"a":1})", R"({"a":1,"b":1})"});
}

TEST(JsonSchemaTest, KeysAreEscapedForJsonAndGbnf) {
  check(R"({"properties":{"we\"ird\\key/é":{"type":"integer"},"tab\tnl\n":{"type":"null"},
                          "#not a comment":{"type":"boolean"},"":{"type":"integer"}},
            "required":["we\"ird\\key/é","tab\tnl\n","#not a comment",""]})",
        {R"({"we\"ird\\key/é":1,"tab\tnl\n":null,"#not a comment":true,"":0})"},
        {R"({"weird":1,"tab\tnl\n":null,"#not a comment":true,"":0})",
         "{\"we\\\"ird\\\\key/é\":1,\"tab\tnl\n\":null,\"#not a comment\":true,\"\":0}"});
}

TEST(JsonSchemaTest, PropertyNamesThatSanitizeAlikeKeepTheirOwnRules) {
  check(
      R"({"properties":{"a b":{"type":"integer"},"a-b":{"type":"string"},
                          "a.b":{"type":"boolean"},"root":{"type":"null"}},
            "required":["a b","a-b","a.b","root"]})",
      {R"({"a b":1,"a-b":"s","a.b":true,"root":null})"},
      {R"({"a b":"s","a-b":"s","a.b":true,"root":null})",
       R"({"a b":1,"a-b":1,"a.b":true,"root":null})", R"({"a b":1,"a-b":"s","a.b":1,"root":null})",
       R"({"a b":1,"a-b":"s","a.b":true,"root":1})"});
}

// ---- arrays ------------------------------------------------------------------

TEST(JsonSchemaTest, ArrayItemsAndBounds) {
  check(R"({"type":"array"})", {"[]", "[1]", "[1,\"a\",null,[],{}]"}, {"[1,]", "[,1]", "[ ]"});
  check(R"({"type":"array","items":{"type":"integer"}})", {"[]", "[1]", "[1,2,3]"},
        {"[1.5]", "[\"a\"]", "[1,,2]", "[1,2,]", "[1, 2]", "{}"});
  check(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
        {"[1,2]", "[1,2,3]"}, {"[]", "[1]", "[1,2,3,4]", "[1,2,]"});
  check(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]", "[[]]"});
  check(R"({"type":"array","minItems":0,"maxItems":1})", {"[]", "[{}]"}, {"[1,2]"});
  check(R"({"type":"array","minItems":0,"maxItems":2,"items":{"type":"null"}})",
        {"[]", "[null]", "[null,null]"}, {"[null,null,null]"});
  check(R"({"type":"array","minItems":3,"items":{"type":"boolean"}})",
        {"[true,true,false]", "[true,true,false,false,true]"}, {"[true,false]", "[]"});
  check(R"({"type":"array","minItems":1,"maxItems":1,"items":{"type":"integer"}})", {"[7]"},
        {"[]", "[7,7]"});
  check(R"({"type":"array","items":false})", {"[]"}, {"[1]"});
  check(R"({"type":"array","items":true,"maxItems":2})", {"[1,\"x\"]"}, {"[1,2,3]"});
}

TEST(JsonSchemaTest, RepetitionAtTheLimitCompiles) {
  check(R"({"type":"array","items":{"type":"integer"},"maxItems":10000})", {"[1,2]"}, {"[1,]"});
  check(R"({"type":"string","maxLength":10000})", {"\"" + std::string(10000, 'a') + "\""},
        {"\"" + std::string(10001, 'a') + "\""});
}

TEST(JsonSchemaTest, NestedObjectsAndArrays) {
  check(R"({"type":"object","properties":{
              "user":{"type":"object","properties":{
                  "name":{"type":"string","maxLength":5},
                  "tags":{"type":"array","items":{"type":"string"},"maxItems":2}},
                "required":["name"],"additionalProperties":false},
              "points":{"type":"array","items":{"type":"array","items":{"type":"number"},
                                               "minItems":2,"maxItems":2}}},
            "required":["user"]})",
        {R"({"user":{"name":"bo"}})", R"({"user":{"name":"bo","tags":["a","b"]},"points":[]})",
         R"({"user":{"name":"bo","tags":[]},"points":[[1,2.5],[-3,4e2]]})"},
        {R"({"user":{"name":"bobbie"}})", R"({"user":{"tags":[]}})",
         R"({"user":{"name":"bo","tags":["a","b","c"]}})", R"({"user":{"name":"bo","x":1}})",
         R"({"user":{"name":"bo"},"points":[[1]]})", R"({"user":{"name":"bo"},"points":[[1,2,3]]})",
         R"({"points":[]})"});
}

// ---- enum, const, anyOf --------------------------------------------------------

TEST(JsonSchemaTest, EnumValuesAnyJson) {
  check(R"({"enum":["red","gr\"een",1,2.5,null,true,[1,"a"],{"k":{"z":[]}}]})",
        {R"("red")", R"("gr\"een")", "1", "2.5", "null", "true", R"([1,"a"])", R"({"k":{"z":[]}})"},
        {R"("blue")", "\"Red\"", "2", "false", "[1]", "[1, \"a\"]", R"({"k":{}})", R"("red" )"});
}

TEST(JsonSchemaTest, TypeAndEnumHonourBoth) {
  check(R"({"type":"string","enum":["a","b",1,null]})", {"\"a\"", "\"b\""}, {"1", "null", "\"c\""});
  check(R"({"type":"integer","enum":[1,2.0,2.5,"3"]})", {"1", "2.0"}, {"2.5", "\"3\"", "3"});
  expect_refused(R"({"type":"string","enum":[1,2]})", StatusCode::kInvalidArgument, {});
}

TEST(JsonSchemaTest, Const) {
  check(R"({"const":{"a":[1,2],"b":"x"}})", {R"({"a":[1,2],"b":"x"})"},
        {R"({"b":"x","a":[1,2]})", R"({"a":[1,2]})", "null"});
  check(R"({"properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind"]})",
        {R"({"kind":"circle","r":2})", R"({"kind":"circle"})"}, {R"({"kind":"square"})"});
  check(R"({"enum":[1,2,3],"const":2})", {"2"}, {"1", "3"});
  // A keyword of a type the values do not have is ignored.
  check(R"({"type":"integer","enum":[1,2],"minLength":5})", {"1", "2"}, {"3"});
}

TEST(JsonSchemaTest, AnyOfIsAlternation) {
  check(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1},
                     {"type":"object","properties":{"x":{"type":"null"}},"required":["x"]},false],
            "description":"annotations may sit beside anyOf"})",
        {"3", "\"a\"", R"({"x":null})"}, {"\"ab\"", "null", "{}", "1.5"});
  check(R"({"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"null"}]}},
            "required":["v"]})",
        {R"({"v":"s"})", R"({"v":null})"}, {R"({"v":1})", "{}"});
}

// ---- $ref ----------------------------------------------------------------------

TEST(JsonSchemaTest, RecursiveLinkedList) {
  check(R"({"$defs":{"node":{"type":"object",
              "properties":{"v":{"type":"integer"},
                            "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
              "required":["v","next"],"additionalProperties":false}},
            "$ref":"#/$defs/node"})",
        {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
        {R"({"v":1})", R"({"v":1,"next":{"v":2}})", R"({"v":1,"next":{"v":"x","next":null}})",
         "null"});
}

TEST(JsonSchemaTest, RecursiveTreeThroughDefinitions) {
  check(
      R"({"definitions":{"tree":{"type":"object","properties":{
                "name":{"type":"string"},
                "children":{"type":"array","items":{"$ref":"#/definitions/tree"}}},
              "required":["name"]}},
            "type":"object","properties":{"root":{"$ref":"#/definitions/tree"}},
            "required":["root"]})",
      {R"({"root":{"name":"a"}})",
       R"({"root":{"name":"a","children":[{"name":"b"},{"name":"c","children":[{"name":"d"}]}]}})"},
      {R"({"root":{"name":"a","children":[{}]}})", R"({"root":{"children":[]}})",
       R"({"root":{"name":"a","children":[{"name":1}]}})"});
}

TEST(JsonSchemaTest, RefToRootAndSharedDefinitions) {
  check(R"({"type":"object","properties":{"kid":{"$ref":"#"},"n":{"$ref":"#/$defs/n"},
                                         "m":{"$ref":"#/$defs/n"}},
            "$defs":{"n":{"type":"integer"},"unused":{"type":"string"}}})",
        {"{}", R"({"kid":{}})", R"({"kid":{"kid":{"n":1}},"n":2,"m":3})"},
        {R"({"kid":1})", R"({"n":"x"})", R"({"m":1.5})"});
  // A name that needs escaping in a JSON pointer and in a rule name.
  check(R"({"$defs":{"a/b~c d":{"type":"boolean"}},"$ref":"#/$defs/a~1b~0c d"})", {"true"}, {"1"});
}

// ---- formats ---------------------------------------------------------------------

TEST(JsonSchemaTest, FormatDate) {
  check(
      R"({"type":"string","format":"date"})",
      {R"("2024-01-31")", R"("1999-12-01")", R"("0000-10-10")"},
      {R"("2024-13-01")", R"("2024-00-10")", R"("2024-01-32")", R"("2024-01-00")", R"("2024-1-01")",
       R"("24-01-01")", R"("2024/01/01")", "\"2024-01-31T00:00:00Z\"", "2024-01-31"});
}

TEST(JsonSchemaTest, FormatTime) {
  check(R"({"type":"string","format":"time"})",
        {R"("12:34:56Z")", R"("00:00:00.5+05:30")", R"("23:59:59.123456-08:00")"},
        {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:61Z")", R"("12:00Z")", R"("12:00:00.Z")",
         R"("12:00:00+5:30")", R"("1:00:00Z")"});
}

TEST(JsonSchemaTest, FormatDateTime) {
  // Only days that exist in every year: February ends at 28 (no leap-year
  // rule), April at 30.
  check(R"({"type":"string","format":"date-time"})",
        {R"("2024-02-28T12:00:00Z")", R"("2024-01-31T12:00:00.25+01:00")",
         R"("1999-11-30T23:59:59-05:30")"},
        {R"("2024-02-28 12:00:00Z")", R"("2024-02-28")", R"("12:00:00Z")",
         R"("2024-02-28T25:00:00Z")", R"("2024-13-28T12:00:00Z")", R"("2023-02-29T12:00:00Z")",
         R"("2024-04-31T12:00:00Z")"});
}

TEST(JsonSchemaTest, FormatUuid) {
  check(
      R"({"type":"string","format":"uuid"})",
      {R"("123e4567-e89b-12d3-a456-426614174000")", R"("ABCDEF01-2345-6789-abcd-ef0123456789")"},
      {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")",
       R"("123e4567-e89b-12d3-a456-4266141740000")", R"("g23e4567-e89b-12d3-a456-426614174000")"});
}

TEST(JsonSchemaTest, ConstOfEveryType) {
  check(R"({"const":null})", {"null"}, {"false", "\"null\"", "0"});
  check(R"({"const":false})", {"false"}, {"true", "0", "null"});
  check(R"({"const":-1.5})", {"-1.5"}, {"1.5", "-1.50", "-15e-1"});
  check(R"({"const":"x y"})", {"\"x y\""}, {"\"x\"", "x y"});
  check(R"({"const":[]})", {"[]"}, {"[null]", "{}"});
  check(R"({"const":{}})", {"{}"}, {"[]", "{\"a\":1}"});
}

TEST(JsonSchemaTest, DuplicateEnumValuesAreWrittenOnce) {
  std::string gbnf;
  ASSERT_TRUE(json_schema_to_gbnf(R"({"enum":[1,"x",1,"x",null,null]})", &gbnf).ok());
  // One alternative per distinct value: no ambiguous parses to follow.
  EXPECT_EQ(std::count(gbnf.begin(), gbnf.end(), '|'), 2) << gbnf;
  check(R"({"enum":[1,"x",1,"x",null,null]})", {"1", "\"x\"", "null"}, {"2", "\"y\"", "11"});
}

TEST(JsonSchemaTest, DeleteCharacterInValuesAndKeysIsWrittenRaw) {
  // JSON needs no escape for U+007F (\177 below), and compact output
  // writes it raw; the grammar spells it \x7F.
  check(R"({"enum":["a\u007fb"]})", {"\"a\177b\""}, {"\"ab\"", "\"a b\""});
  check(R"({"properties":{"k\u007f":{"type":"null"}},"required":["k\u007f"]})",
        {"{\"k\x7F\":null}"}, {"{\"k\":null}", "{\"k\x7F\":1}"});
}

TEST(JsonSchemaTest, ExactCountsAndLengths) {
  check(R"({"type":"array","items":{"type":"integer"},"minItems":3,"maxItems":3})",
        {"[1,2,3]", "[0,-1,7]"}, {"[1,2]", "[1,2,3,4]", "[]", "[1,2,\"3\"]"});
  check(R"({"type":"string","minLength":2,"maxLength":2})", {"\"ab\"", R"("\né")", "\"日本\""},
        {"\"a\"", "\"abc\"", "\"\""});
}

TEST(JsonSchemaTest, TrueSubschemasAcceptAnyValue) {
  check(R"({"properties":{"a":true},"required":["a"],"additionalProperties":false})",
        {R"({"a":1})", R"({"a":{"b":[null]}})", R"({"a":"s"})"}, {"{}", R"({"a":1,"b":2})"});
  check(R"({"anyOf":[true,{"type":"integer"}]})", kAnyValues, kNotJson);
}

TEST(JsonSchemaTest, EmptyPropertiesAndRepeatedRequiredNames) {
  check(R"({"type":"object","properties":{},"additionalProperties":false})", {"{}"},
        {R"({"a":1})", "[]"});
  // Without "type" every type is allowed (the object keywords constrain
  // objects only), as JSON Schema has it.
  check(R"({"properties":{}})", {"{}", R"({"a":[1]})", "[]", "1"}, {"{", "nul"});
  check(R"({"properties":{"a":{"type":"integer"}},"required":["a","a"]})", {R"({"a":1})"},
        {"{}", R"({"a":1,"a":1})"});
}

TEST(JsonSchemaTest, KeywordsBesideRefHoldInEveryDraft) {
  // Drafts 4 to 7 say to ignore them, later drafts and ajv apply them:
  // applying them is the stricter reading, valid under both.
  const std::string defs =
      R"("definitions":{"o":{"type":"object"}},"properties":{"a":{"minProperties":1,"$ref":"#/definitions/o"}},"required":["a"]})";
  for (const char* draft : {"draft-04", "draft-07"}) {
    check(std::string(R"({"$schema":"http://json-schema.org/)") + draft + R"(/schema#",)" + defs,
          {R"({"a":{"b":1}})"}, {R"({"a":{}})", R"({"a":"s"})"});
  }
  check("{" + defs, {R"({"a":{"b":1}})"}, {R"({"a":{}})"});
}

TEST(JsonSchemaTest, PropertyNamesConstrainEveryName) {
  check(R"({"type":"object","propertyNames":{"pattern":"^[a-z]+$"},
            "additionalProperties":{"type":"integer"}})",
        {"{}", R"({"ab":1})", R"({"a":1,"b":2})"}, {R"({"A":1})", R"({"a1":1})", R"({"a":"s"})"});
  check(R"({"type":"object","propertyNames":{"enum":["x","y"]}})", {R"({"x":1})", R"({"y":[]})"},
        {R"({"z":1})", R"({"xy":1})"});
  check(R"({"type":"object","propertyNames":{"maxLength":2},
            "properties":{"ab":{"type":"integer"},"abc":{"type":"integer"}}})",
        {"{}", R"({"ab":1})"}, {R"({"abc":1})", R"({"ab":1,"abc":2})"});
  check(R"({"type":"object","propertyNames":false})", {"{}"}, {R"({"a":1})"});
  check(R"({"type":"object","propertyNames":{"type":"integer"}})", {"{}"}, {R"({"1":1})"});
  expect_refused(R"({"type":"object","propertyNames":{"maxLength":2},"required":["abc"]})",
                 StatusCode::kInvalidArgument, {"nothing can match", "\"abc\""});
  expect_unsupported(
      R"({"type":"object","propertyNames":{"maxLength":2},"patternProperties":{"^a":{}}})",
      "propertyNames", "the root");
}

TEST(JsonSchemaTest, KeywordsWithoutTypeConstrainOnlyTheirTypes) {
  check(R"({"properties":{"a":{"type":"integer"}},"required":["a"],"maxLength":2,"minimum":3,
            "items":{"type":"boolean"}})",
        {R"({"a":1})", R"("ab")", "5", "[]", "[true]", "true", "null", "3.5"},
        {"{}", R"({"a":"x"})", R"("abc")", "2", "2.5", "[1]"});
  check(R"({"format":"date"})", {R"("2024-02-29")", "7", "{}"}, {R"("2023-02-29")", R"("x")"});
}

TEST(JsonSchemaTest, IdenticalAndLookAlikeSubschemasKeepTheirMeaning) {
  // "a-b-1" takes the name "root-a-b-1" first, so "a b" (sanitized like
  // "a-b") skips past it; "c" and "d" share one rule.
  check(R"({"properties":{"a-b-1":{"type":"string","maxLength":1},
                          "a-b":{"type":"string","maxLength":2},
                          "a b":{"type":"string","maxLength":3},
                          "c":{"type":"string","maxLength":4},
                          "d":{"type":"string","maxLength":4}},
            "required":["a-b-1","a-b","a b","c","d"]})",
        {R"({"a-b-1":"x","a-b":"xy","a b":"xyz","c":"wxyz","d":"wxyz"})",
         R"({"a-b-1":"","a-b":"","a b":"","c":"","d":""})"},
        {R"({"a-b-1":"xy","a-b":"xy","a b":"xyz","c":"wxyz","d":"wxyz"})",
         R"({"a-b-1":"x","a-b":"xyz","a b":"xyz","c":"wxyz","d":"wxyz"})",
         R"({"a-b-1":"x","a-b":"xy","a b":"wxyz","c":"wxyz","d":"wxyz"})",
         R"({"a-b-1":"x","a-b":"xy","a b":"xyz","c":"vwxyz","d":"wxyz"})",
         R"({"a-b-1":"x","a-b":"xy","a b":"xyz","c":"wxyz","d":"vwxyz"})"});
}

TEST(JsonSchemaTest, DefinitionAndPropertyNamesWithUnderscores) {
  check(R"({"$defs":{"my_int":{"type":"integer"},"my_pair":{"type":"array",
              "items":{"$ref":"#/$defs/my_int"},"minItems":2,"maxItems":2}},
            "properties":{"x_y":{"$ref":"#/$defs/my_int"},"p_q":{"$ref":"#/$defs/my_pair"}},
            "required":["x_y"]})",
        {R"({"x_y":5})", R"({"x_y":5,"p_q":[1,2]})"},
        {R"({"x_y":"5"})", R"({"x_y":5,"p_q":[1]})", R"({"p_q":[1,2]})"});
}

TEST(JsonSchemaTest, TypeListAroundAKeyThatLooksLikeAlternation) {
  check(R"({"type":["object","null"],"properties":{"x | y":{"type":"integer"}},
            "required":["x | y"]})",
        {R"({"x | y":1})", "null"}, {"{}", R"({"x | y":"a"})", R"({"x":1})", "nullnull"});
}

TEST(JsonSchemaTest, MoreInvalidKeywordValues) {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  expect_refused(R"({"type":"array","minItems":"2"})", kInvalid, {"\"minItems\"", "not a number"});
  expect_refused(R"({"type":[]})", kInvalid, {"\"type\"", "not a type name"});
  expect_refused(R"({"type":5})", kInvalid, {"\"type\"", "not a type name"});
  expect_refused(R"({"type":["string",1]})", kInvalid, {"\"type\"", "a type that is no string"});
  expect_refused(R"({"$ref":5})", kInvalid, {"\"$ref\"", "not a string"});
  expect_refused(R"({"enum":"a"})", kInvalid, {"\"enum\"", "not an array"});
  expect_refused(R"({"anyOf":{}})", kInvalid, {"\"anyOf\"", "not a non-empty array"});
  expect_refused(R"({"anyOf":[]})", kInvalid, {"\"anyOf\"", "not a non-empty array"});
  expect_refused(R"({"properties":[1]})", kInvalid, {"\"properties\"", "not an object"});
  expect_refused(R"({"type":"object","additionalProperties":5})", kInvalid,
                 {"/additionalProperties", "neither an object nor a boolean"});
  expect_refused(R"({"required":["a",1]})", kInvalid, {"\"required\"", "holds a non-string"});
  expect_refused(R"({"type":"string","format":5})", kInvalid, {"\"format\"", "not a string"});
  expect_refused(R"({"$defs":5,"$ref":"#/$defs/a"})", kInvalid,
                 {"\"$ref\"", "nothing at \"#/$defs/a\""});
  expect_refused(R"({"$defs":{"a":{}},"$ref":"#/definitions/a"})", kInvalid,
                 {"\"$ref\"", "nothing at \"#/definitions/a\""});
}

TEST(JsonSchemaTest, SchemasNothingCanMatchAreInvalid) {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  expect_refused(R"({"type":"string","minLength":3,"maxLength":2})", kInvalid,
                 {"nothing can match", "minLength is above maxLength"});
  expect_refused(R"({"type":"array","items":false,"minItems":1})", kInvalid,
                 {"nothing can match", "items is false"});
  expect_refused(R"({"anyOf":[false,false]})", kInvalid,
                 {"nothing can match", "every anyOf alternative is false"});
  expect_refused(R"({"type":"object","properties":{"a":false},"required":["a"]})", kInvalid,
                 {"nothing can match", "required property \"a\" is false"});
}

TEST(JsonSchemaTest, FormatIpv4EveryOctet) {
  Grammar g;
  if (!compile(R"({"type":"string","format":"ipv4"})", &g)) return;
  for (int o = 0; o <= 300; ++o) {
    const std::string q = std::to_string(o);
    EXPECT_EQ(grammar_accepts(g, "\"10." + q + ".0.1\""), o <= 255) << q;
    EXPECT_EQ(grammar_accepts(g, "\"" + q + ".255.255.255\""), o <= 255) << q;
  }
  for (const char* bad : {"\"01.2.3.4\"", "\"1.2.3\"", "\"1.2.3.4.5\"", "\"1.2.3.\"", "\"1..3.4\"",
                          "\"1.2.3.04\"", "\"256.1.1.1\"", "\" 1.2.3.4\""}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
  }
  EXPECT_TRUE(grammar_accepts(g, "\"0.0.0.0\""));
  EXPECT_TRUE(grammar_accepts(g, "\"192.168.1.254\""));
}

TEST(JsonSchemaTest, FormatBesideLengthOrBadPointersAreUnsupported) {
  expect_refused(R"({"type":"string","format":"date","minLength":1})", StatusCode::kUnsupported,
                 {"\"minLength\"", "beside \"format\"", "the root"});
  expect_refused(R"({"type":"string","format":"uuid","maxLength":36})", StatusCode::kUnsupported,
                 {"\"maxLength\"", "beside \"format\"", "the root"});
  // A '~' must be followed by 0 or 1 in a JSON pointer.
  expect_refused(R"({"$defs":{"a~":{}},"$ref":"#/$defs/a~"})", StatusCode::kInvalidArgument,
                 {"\"$ref\"", "malformed pointer", "the root"});
  expect_refused(R"({"$defs":{"a~2b":{}},"$ref":"#/$defs/a~2b"})", StatusCode::kInvalidArgument,
                 {"\"$ref\"", "malformed pointer", "the root"});
  // Another document, and a pointer to nothing.
  expect_unsupported(R"({"$ref":"other.json#/a"})", "$ref", "the root");
  expect_refused(R"({"$ref":"#/properties/x"})", StatusCode::kInvalidArgument,
                 {"\"$ref\"", "nothing at"});
}

// ---- refusals ----------------------------------------------------------------------

// Every integer in a window against the arithmetic, for bounds of every
// shape: both signs, one digit to four, powers of ten and their neighbours.
TEST(JsonSchemaTest, IntegerRangesAcceptExactlyTheirIntegers) {
  std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 0},     {0, 9},     {0, 10},      {1, 9},     {7, 7},       {9, 10},     {10, 99},
      {10, 100},  {99, 100},  {-9, -1},     {-10, 10},  {-1, 0},      {-100, -10}, {12, 345},
      {123, 987}, {100, 999}, {101, 998},   {-345, 12}, {-999, -100}, {0, 1000},   {-1000, 999},
      {555, 555}, {190, 210}, {-210, -190}, {1, 1099}};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> pick(-1100, 1100);
  for (int i = 0; i < 15; ++i) {
    int64_t a = pick(rng), b = pick(rng);
    ranges.push_back({std::min(a, b), std::max(a, b)});
  }
  for (const auto& [lo, hi] : ranges) {
    Grammar g;
    const std::string gbnf = "root ::= " + integer_range_gbnf(lo, hi) + "\n";
    ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
    int wrong = 0;
    for (int64_t x = -1100; x <= 1100 && wrong < 3; ++x) {
      const bool in = lo <= x && x <= hi;
      if (grammar_accepts(g, std::to_string(x)) != in) {
        ++wrong;
        ADD_FAILURE() << x << (in ? " refused" : " accepted") << " by [" << lo << ", " << hi
                      << "]: " << gbnf;
      }
    }
    EXPECT_FALSE(grammar_accepts(g, "-0")) << gbnf;
    EXPECT_FALSE(grammar_accepts(g, "0" + std::to_string(std::max<int64_t>(lo, 1)))) << gbnf;
  }
}

TEST(JsonSchemaTest, IntegerBoundsOfEveryDraft) {
  check(
      R"({"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":120}},"required":["age"]})",
      {R"({"age":0})", R"({"age":120})", R"({"age":37})"},
      {R"({"age":-1})", R"({"age":121})", R"({"age":1000})", R"({"age":-0})", R"({"age":007})"});
  // 2019 spellings: exclusive bounds are numbers; fractions round inward.
  check(R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":3})", {"-2", "0", "2"},
        {"-3", "3"});
  check(R"({"type":"integer","minimum":1.5,"maximum":4.5})", {"2", "4"}, {"1", "5"});
  check(R"({"type":"integer","exclusiveMinimum":1.5,"exclusiveMaximum":4.5})", {"2", "4"},
        {"1", "5"});
  // Draft 4: booleans make minimum and maximum exclusive.
  check(
      R"({"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":10,"exclusiveMaximum":true})",
      {"1", "9"}, {"0", "10"});
  check(R"({"type":"integer","minimum":0,"exclusiveMinimum":false})", {"0", "12345"}, {"-1"});
  // One side only, to the 16 digits the grammar's integers have.
  check(R"({"type":"integer","minimum":-5})", {"-5", "0", "9999999999999999"}, {"-6", "-10"});
  check(R"({"type":"integer","maximum":-5})", {"-5", "-9999999999999999"}, {"-4", "0", "5"});
  check(R"({"type":"integer","minimum":9999999999999990})",
        {"9999999999999990", "9999999999999999"}, {"9999999999999989", "1"});
  check(R"({"type":"integer","maximum":1e300})", {"0", "-7", "9999999999999999"}, {"1.5"});
  // Beside other types, the bounds hold for the integers alone.
  check(R"({"type":["integer","string"],"minimum":10})", {"10", "\"5\""}, {"9"});
}

TEST(JsonSchemaTest, IntegerBoundsThatNothingMeetsOrThatAreNotNumbers) {
  expect_refused(R"({"type":"integer","minimum":5,"maximum":4})", StatusCode::kInvalidArgument,
                 {"nothing can match", "the root"});
  expect_refused(R"({"type":"integer","exclusiveMinimum":4,"exclusiveMaximum":5})",
                 StatusCode::kInvalidArgument, {"nothing can match"});
  expect_refused(R"({"type":"integer","minimum":1e17})", StatusCode::kInvalidArgument,
                 {"nothing can match"});
  expect_refused(R"({"type":"integer","minimum":"3"})", StatusCode::kInvalidArgument,
                 {"\"minimum\"", "not a number"});
  check(R"({"type":"integer","minimum":2,"enum":[1,2]})", {"2"}, {"1"});
}

TEST(JsonSchemaTest, UnsupportedKeywordsNameKeywordAndPointer) {
  expect_unsupported(
      R"({"type":"object","properties":{"age":{"type":"number","multipleOf":1001}}})", "multipleOf",
      "/properties/age");
  expect_unsupported(R"({"type":"string","pattern":"^a+$","maxLength":3})", "pattern", "the root");
  expect_unsupported(R"({"type":"array","items":{"type":"string","pattern":"a(?=b)c"}})", "pattern",
                     "/items");
  expect_unsupported(R"({"type":"array","uniqueItems":true})", "uniqueItems", "the root");
  expect_unsupported(R"({"type":"array","contains":{"type":"integer"}})", "contains", "the root");
  expect_unsupported(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "oneOf", "the root");
  expect_unsupported(R"({"oneOf":[{"type":"object"},{"properties":{"a":{}}}]})", "oneOf",
                     "the root");
  expect_unsupported(R"({"properties":{"a":{"allOf":[{"format":"date"},{"format":"time"}]}}})",
                     "allOf", "/properties/a");
  expect_unsupported(R"({"anyOf":[{"not":{"pattern":"^a"}}]})", "not", "/anyOf/0");
  expect_unsupported(R"({"if":{"multipleOf":3},"then":{"minimum":1}})", "if", "the root");
  expect_unsupported(R"({"type":"object","patternProperties":{"^x":{},"^y":{"type":"null"}}})",
                     "patternProperties", "the root");
  expect_unsupported(R"({"type":"string","format":"idn-email"})", "format", "the root");
  expect_unsupported(R"({"$ref":"http://example.com/s.json"})", "$ref", "the root");
  expect_unsupported(R"({"$defs":{"d":{"properties":{"q":{"type":"array","uniqueItems":true}}}},
                         "$ref":"#/$defs/d"})",
                     "uniqueItems", "/$defs/d/properties/q");
  expect_unsupported(R"({"properties":{"a/b~c":{"not":{"enum":[1]}}}})", "not",
                     "/properties/a~1b~0c");
}

TEST(JsonSchemaTest, MalformedJsonNamesTheByteOffset) {
  expect_refused(R"({"type":})", StatusCode::kInvalidArgument, {"byte 8"});
  expect_refused(R"({"type":"string",})", StatusCode::kInvalidArgument, {"byte 17"});
  expect_refused(R"({"a":1)", StatusCode::kInvalidArgument, {"byte 6"});
  expect_refused(R"({"a":1}x)", StatusCode::kInvalidArgument, {"byte 7"});
  expect_refused("", StatusCode::kInvalidArgument, {"byte 0"});
  // A number past double's range is an out_of_range exception, not a
  // parse_error: it escaped as an exception before (found by fuzz_constraint).
  expect_refused(R"({"enum":[1e309]})", StatusCode::kInvalidArgument, {"1e309"});
  expect_refused("1e309", StatusCode::kInvalidArgument, {"overflow"});
}

TEST(JsonSchemaTest, InvalidKeywordValues) {
  expect_refused(R"({"type":"foo"})", StatusCode::kInvalidArgument, {"\"type\"", "foo"});
  expect_refused(R"({"type":"array","minItems":-1})", StatusCode::kInvalidArgument,
                 {"\"minItems\""});
  expect_refused(R"({"type":"string","maxLength":1.5})", StatusCode::kInvalidArgument,
                 {"\"maxLength\""});
  expect_refused(R"({"type":"object","required":"a"})", StatusCode::kInvalidArgument,
                 {"\"required\""});
  expect_refused(R"({"properties":{"a":1}})", StatusCode::kInvalidArgument, {"/properties/a"});
  expect_refused(R"({"$ref":"#/$defs/missing"})", StatusCode::kInvalidArgument,
                 {"\"$ref\"", "/$defs/missing"});
  expect_refused(R"({"type":"array","minItems":3,"maxItems":2})", StatusCode::kInvalidArgument, {});
  expect_refused(
      R"({"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false})",
      StatusCode::kInvalidArgument, {"\"b\""});
  expect_refused("[1]", StatusCode::kInvalidArgument, {});
}

TEST(JsonSchemaTest, HostileSizesAreRefused) {
  expect_unsupported(R"({"type":"array","maxItems":10001})", "maxItems", "the root");
  expect_unsupported(R"({"type":"array","minItems":1e9})", "minItems", "the root");
  expect_unsupported(R"({"type":"string","maxLength":20000})", "maxLength", "the root");
  expect_unsupported(R"({"type":"string","minLength":18446744073709551615})", "minLength",
                     "the root");
}

TEST(JsonSchemaTest, DeepNestingIsRefusedWithoutCrashing) {
  auto nested_items = [](int depth) {
    return repeated(R"({"type":"array","items":)", depth) + "{}" + repeated("}", depth);
  };
  Grammar g;
  if (compile(nested_items(100), &g)) {
    EXPECT_TRUE(grammar_accepts(g, repeated("[", 100) + repeated("]", 100)));
    // The innermost schema is {}: any value, an array too.
    EXPECT_TRUE(grammar_accepts(g, repeated("[", 101) + "{}" + repeated("]", 101)));
    EXPECT_FALSE(grammar_accepts(g, repeated("[", 100) + "1" + repeated("]", 99)));
  }
  expect_refused(nested_items(200), StatusCode::kUnsupported, {"deeper than 128"});
  expect_refused(nested_items(100000), StatusCode::kUnsupported, {"deeper than 128"});
  std::string deep_const = R"({"const":)" + repeated("[", 100000) + repeated("]", 100000) + "}";
  expect_refused(deep_const, StatusCode::kUnsupported, {"\"const\""});
  std::string deep_type = R"({"type":)" + repeated("[", 100000) + repeated("]", 100000) + "}";
  expect_refused(deep_type, StatusCode::kInvalidArgument, {"\"type\""});
  // A $ref beside other keywords that reaches itself again: each level
  // merges to the same schema, one recursive rule (MaskBench's resjson,
  // minecraft-loot-table): no nesting limit, and any depth of instance.
  Grammar tree;
  ASSERT_TRUE(compile(R"({"$defs":{"n":{"type":"object","additionalProperties":false,
                            "properties":{"kid":{"$ref":"#/$defs/n","maxProperties":1}}}},
                          "$ref":"#/$defs/n"})",
                      &tree));
  EXPECT_TRUE(grammar_accepts(tree, repeated(R"({"kid":)", 300) + "{}" + repeated("}", 300)));
  EXPECT_FALSE(grammar_accepts(tree, repeated(R"({"kid":)", 3) + R"({"x":1})" + repeated("}", 3)));
  // An enum beside keywords that reach it again through $ref: each level
  // checks its values with a converter of its own (MaskBench's pulumi
  // schema overflowed the stack so).
  expect_refused(R"({"$defs":{"n":{"enum":[1,{"a":1}],"properties":{"a":{"$ref":"#/$defs/n"}}}},
                     "$ref":"#/$defs/n"})",
                 StatusCode::kUnsupported, {"nested 8 deep"});
}

// ---- keywords of real schemas --------------------------------------------------------

TEST(JsonSchemaTest, KeywordsOfNoDraftAndUnknownFormatsAreAnnotations) {
  check(R"({"type":"integer","x-kubernetes-patch-strategy":"merge","javaType":"Long",
            "id":"#n","minimun":5})",
        {"1", "-3"}, {"\"a\"", "1.5"});
  check(R"({"type":"string","format":"int32"})", {"\"x\"", "\"\""}, {"1"});
}

TEST(JsonSchemaTest, RefsReachAnyPointerAndAnchor) {
  check(
      R"({"$defs":{"a":{"properties":{"b":{"type":"integer"}}}},"$ref":"#/$defs/a/properties/b"})",
      {"7"}, {"\"7\"", "{}"});
  check(R"({"properties":{"x":{"type":"boolean"},"y":{"$ref":"#/properties/x"}},
            "required":["x","y"],"additionalProperties":false})",
        {R"({"x":true,"y":false})"}, {R"({"x":true,"y":1})"});
  check(R"({"definitions":{"n":{"$anchor":"num","type":"number"}},"$ref":"#num"})", {"1.5"},
        {"\"a\""});
  check(R"({"definitions":{"n":{"id":"#num","type":"null"}},"$ref":"#num"})", {"null"}, {"1"});
  check(R"({"$defs":{"a b":{"type":"null"}},"$ref":"#/$defs/a%20b"})", {"null"}, {"0"});
}

TEST(JsonSchemaTest, AllOfMergesItsParts) {
  // Types intersect, properties merge, required lists join.
  check(R"({"allOf":[{"type":["object","null"],"properties":{"a":{"type":"integer"}}},
                     {"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}]})",
        {R"({"b":"x"})", R"({"a":1,"b":"x"})"}, {"null", R"({"a":1})", R"({"a":"1","b":"x"})"});
  // Annotations of no draft may differ between parts (MaskBench's "help",
  // "_id", "@type"); keywords may not.
  check(R"({"allOf":[{"type":"string","help":"a","x-order":1},{"help":"b","maxLength":2}]})",
        {R"("ab")"}, {R"("abc")", "1"});
  expect_refused(R"({"allOf":[{"type":"string","format":"date"},{"format":"time"}]})",
                 StatusCode::kUnsupported, {"\"format\" different values"});
  // A name listed in one part is held to the other's additionalProperties.
  check(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},
                     {"properties":{"a":{"type":"integer"},"b":{}}}],"type":"object"})",
        {R"({"a":1})", "{}"}, {R"({"a":"x"})", R"({"a":1,"b":2})", R"({"b":2})"});
  // Bounds tighten, enums intersect, $ref parts are read.
  check(R"({"$defs":{"small":{"type":"integer","maximum":5}},
            "allOf":[{"$ref":"#/$defs/small"},{"minimum":3},{"enum":[1,3,4,9]}]})",
        {"3", "4"}, {"1", "5", "9"});
  // Keywords beside $ref hold together with it.
  check(R"({"$defs":{"o":{"type":"object","properties":{"a":{"type":"integer"}}}},
            "$ref":"#/$defs/o","required":["a"]})",
        {R"({"a":1})"}, {"{}"});
  // anyOf beside other keywords is spread over them.
  check(R"({"type":"object","properties":{"a":{},"b":{}},
            "anyOf":[{"required":["a"]},{"required":["b"]}]})",
        {R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})"}, {"{}"});
  check(R"({"enum":[1,"a"],"anyOf":[{"type":"string"}]})", {"\"a\""}, {"1"});
  expect_refused(R"({"allOf":[{"type":"string"},{"type":"integer"}]})",
                 StatusCode::kInvalidArgument, {"nothing can match"});
}

// The grammar of `schema` with unlisted members allowed, as JSON Schema
// reads additionalProperties.
void check_unlisted(std::string_view schema, const std::vector<std::string>& accepted,
                    const std::vector<std::string>& rejected) {
  std::string gbnf;
  Status st = json_schema_to_gbnf(schema, &gbnf, {.unlisted_properties = true});
  ASSERT_TRUE(st.ok()) << st.message();
  Grammar g;
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
  for (const auto& doc : accepted) EXPECT_TRUE(grammar_accepts(g, doc)) << doc << "\n" << gbnf;
  for (const auto& doc : rejected) EXPECT_FALSE(grammar_accepts(g, doc)) << doc << "\n" << gbnf;
}

TEST(JsonSchemaTest, OneOfWhoseAlternativesExcludeEachOther) {
  check(R"({"oneOf":[{"type":"integer"},{"type":"string"}]})", {"1", "\"a\""}, {"1.5", "null"});
  // A discriminator: a required member whose values differ.
  check(R"({"oneOf":[
      {"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},
       "required":["kind"]},
      {"type":"object","properties":{"kind":{"enum":["b","c"]},"y":{"type":"string"}},
       "required":["kind"]}]})",
        {R"({"kind":"a","x":1})", R"({"kind":"c","y":"s"})"},
        {R"({"kind":"a","y":"s"})", R"({"kind":"d"})"});
  // Property groups, exactly one of them: each alternative is written
  // without the other's required member.
  const char* groups = R"({"type":"object","properties":{"series":{"type":"integer"},
      "index":{"type":"integer"},"id":{"type":"string"}},
      "oneOf":[{"required":["series","index"]},{"required":["id"]}]})";
  check(groups, {R"({"series":1,"index":2})", R"({"id":"x"})", R"({"index":2,"id":"x"})"},
        {R"({"series":1,"index":2,"id":"x"})", R"({"series":1})", "{}"});
  check_unlisted(groups, {R"({"id":"x","z":1})"}, {R"({"series":1,"index":2,"id":"x"})"});
  expect_unsupported(R"({"type":"object","oneOf":[{"required":["a"]},{"required":["a","b"]}]})",
                     "oneOf", "the root");
  expect_unsupported(R"({"oneOf":[{"required":["a"]},{"required":["b"]}]})", "oneOf", "the root");
  // A member one requires that the other forbids.
  check(R"({"oneOf":[
      {"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false},
      {"type":"object","properties":{"b":{}},"required":["b"],"additionalProperties":false}]})",
        {R"({"a":1})", R"({"b":1})"}, {R"({"a":1,"b":1})", "{}"});
}

TEST(JsonSchemaTest, EnumValuesAreCheckedAgainstTheOtherKeywords) {
  check(R"({"enum":["a","abc",3],"maxLength":2})", {"\"a\"", "3"}, {"\"abc\""});
  check(R"({"type":"integer","enum":[1,5,7],"minimum":2,"maximum":6})", {"5"}, {"1", "7"});
  check(R"({"enum":[{"a":1},{"a":"x"}],"properties":{"a":{"type":"integer"}}})", {R"({"a":1})"},
        {R"({"a":"x"})"});
  expect_refused(R"({"type":"array","const":[1,2],"maxItems":1})", StatusCode::kInvalidArgument,
                 {"nothing can match", "no enum or const value"});
  // A keyword the converter refuses is still refused beside enum.
  expect_unsupported(R"({"enum":["a"],"type":"string","format":"idn-email"})", "format",
                     "the root");
}

TEST(JsonSchemaTest, PatternsAndFormatsInsideStrings) {
  check(R"({"type":"string","pattern":"^[a-z]+-\\d$"})", {"\"ab-1\""}, {"\"ab-\"", "\"Ab-1\""});
  check(R"({"type":"string","pattern":"x\"y"})", {R"("ax\"yb")"}, {R"("xy")"});
  check(
      R"({"type":"object","properties":{"when":{"type":"string","format":"date-time"},
            "mail":{"type":"string","format":"email"},"id":{"format":"uuid"}}})",
      {R"({"when":"2024-02-29T12:00:00Z","mail":"a@b.co","id":"123e4567-e89b-12d3-a456-426614174000"})"},
      {R"({"when":"2023-02-29T12:00:00Z"})", R"({"mail":"a"})", R"({"id":"x"})"});
}

TEST(JsonSchemaTest, NumberBoundsAndMultiples) {
  check(R"({"type":"object","properties":{"age":{"type":"number","minimum":0,"maximum":120}}})",
        {R"({"age":0})", R"({"age":119.5})", R"({"age":120})", R"({"age":1e-05})"},
        {R"({"age":-1})", R"({"age":120.01})", R"({"age":-0.5})"});
  check(R"({"type":"number","exclusiveMinimum":0.1,"exclusiveMaximum":0.3})", {"0.2", "0.11"},
        {"0.1", "0.3", "0.30000000000000004"});
  check(R"({"type":"number","minimum":5,"exclusiveMinimum":true})", {"5.5"}, {"5"});
  check(R"({"type":"number","multipleOf":0.01})", {"1.25", "3", "-0.5"}, {"1.255"});
  check(R"({"type":"integer","multipleOf":3,"minimum":1,"maximum":10})", {"3", "6", "9"},
        {"0", "12", "4"});
  expect_refused(R"({"type":"number","minimum":2,"maximum":1})", StatusCode::kInvalidArgument,
                 {"nothing can match"});
  expect_refused(R"({"type":"number","multipleOf":0})", StatusCode::kInvalidArgument,
                 {"\"multipleOf\""});
}

TEST(JsonSchemaTest, UnlistedMembersComeAfterTheListedOnesWhenAllowed) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"integer"},"ab":false,
      "b":{"type":"string"}},"required":["b"]})";
  check_unlisted(schema,
                 {R"({"b":"x"})", R"({"a":1,"b":"x","c":null})", R"({"b":"x","a2":[1],"abc":{}})",
                  R"({"b":"x","":1})", R"({"b":"x","\u0001":1})"},
                 {R"({"b":"x","a":"1"})", R"({"b":"x","b":"y"})", R"({"b":"x","ab":1})",
                  R"({"b":"x","\u0061":"1"})", R"({"c":1,"b":"x"})"});
  check(schema, {R"({"a":1,"b":"x"})"}, {R"({"b":"x","c":null})"});  // off by default
  check_unlisted(R"({"properties":{"a":{}},"additionalProperties":{"type":"integer"}})",
                 {R"({"a":"s","z":1})"}, {R"({"a":"s","z":"1"})"});
  check_unlisted(R"({"properties":{"a":{}},"additionalProperties":false})", {R"({"a":1})"},
                 {R"({"a":1,"z":1})"});
}

TEST(JsonSchemaTest, PatternPropertiesNameTheirMembers) {
  check(R"({"type":"object","patternProperties":{"^x-":{"type":"integer"}},
            "additionalProperties":false})",
        {"{}", R"({"x-a":1,"x-b":2})"}, {R"({"y":1})", R"({"x-a":"1"})"});
  check_unlisted(R"({"type":"object","properties":{"name":{"type":"string"}},
                    "patternProperties":{"^x-":{"type":"integer"}}})",
                 {R"({"name":"n","x-a":1})"}, {R"({"name":"n","x-a":"1"})"});
  expect_refused(R"({"properties":{"x-a":{}},"patternProperties":{"^x-":{}}})",
                 StatusCode::kUnsupported, {"\"patternProperties\"", "x-a"});
}

TEST(JsonSchemaTest, NotInTheFormsThatSayWhatIsLeftOut) {
  check(R"({"not":{"type":["string","object"]}})", {"1", "null", "[]"}, {"\"a\"", "{}"});
  check(R"({"type":["integer","string"],"not":{"type":"string"}})", {"1"}, {"\"a\""});
  check(R"({"type":"object","properties":{"a":{},"b":{"not":{}}},"not":{"required":["a"]}})",
        {"{}"}, {R"({"a":1})", R"({"b":1})"});
  check(R"({"not":false})", {"1", "{}"}, {});
  expect_refused(R"({"not":{}})", StatusCode::kInvalidArgument, {"nothing can match"});
  expect_refused(R"({"type":"object","required":["a"],"not":{"required":["a"]}})",
                 StatusCode::kInvalidArgument, {"nothing can match"});
  expect_unsupported(R"({"not":{"type":"integer"}})", "not", "the root");
  expect_unsupported(R"({"not":{"enum":[1]}})", "not", "the root");
}

TEST(JsonSchemaTest, TuplesOfEveryDraft) {
  check(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false})",
        {"[]", "[1]", "[1,\"a\"]"}, {"[\"a\"]", "[1,\"a\",2]", "[1,2]"});
  check(R"({"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"boolean"},
            "minItems":2})",
        {"[1,true]", "[1,true,false]"}, {"[1]", "[1,2]", "[]"});
  check(R"({"type":"array","items":[{"type":"null"},{"type":"integer"}],
            "additionalItems":{"type":"string"}})",
        {"[null]", "[null,1,\"a\",\"b\"]"}, {"[null,1,2]", "[1]"});
  check(R"({"type":"array","items":[{"type":"null"},{"type":"integer"}],"maxItems":1})",
        {"[]", "[null]"}, {"[null,1]"});
  check(R"({"type":"array","uniqueItems":true,"maxItems":1})", {"[]", "[1]"}, {"[1,1]"});
  check(R"({"type":"array","uniqueItems":false})", {"[1,1]"}, {"[1,"});
}

TEST(JsonSchemaTest, PropertyCounts) {
  check(R"({"type":"object","minProperties":1,"maxProperties":2})",
        {R"({"a":1})", R"({"a":1,"b":2})"}, {"{}", R"({"a":1,"b":2,"c":3})"});
  check(R"({"type":"object","properties":{"a":{},"b":{}},"minProperties":1})",
        {R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})"}, {"{}"});
  check(R"({"type":"object","properties":{"a":{}},"required":["a"],"maxProperties":1})",
        {R"({"a":1})"}, {"{}"});
  // Counts between the required and the listed members, in the declared
  // order (an %ordered term).
  check(R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"minProperties":2})",
        {R"({"a":1,"b":2})", R"({"a":1,"c":2})", R"({"b":1,"c":2})", R"({"a":1,"b":2,"c":3})"},
        {"{}", R"({"a":1})", R"({"c":1})", R"({"b":1,"a":2})"});
  check(R"({"type":"object","required":["a"],"properties":{"b":{},"c":{}},"maxProperties":2})",
        {R"({"b":1,"a":2})", R"({"a":2})", R"({"c":1,"a":2})"},
        {R"({"b":1,"c":1,"a":2})", R"({"b":1})", R"({"a":2,"b":1})"});
  // dependentRequired in the declared order: b needs c, which follows it.
  check(R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"dependentRequired":{"b":["c"]}})",
        {"{}", R"({"a":1})", R"({"b":1,"c":2})", R"({"a":1,"b":1,"c":2})", R"({"c":2})"},
        {R"({"b":1})", R"({"a":1,"b":1})", R"({"c":2,"b":1})"});
}

TEST(JsonSchemaTest, WhitespaceOptionAcceptsJsonWhitespaceBetweenTokens) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"array",
      "items":{"type":"integer"}},"b":{"enum":[{"k":[1,2]}]},"c":{"type":"object"}},
      "required":["a"]})";
  std::string gbnf;
  ASSERT_TRUE(json_schema_to_gbnf(schema, &gbnf, {.whitespace = true}).ok());
  Grammar g;
  ASSERT_TRUE(parse_gbnf(gbnf, &g).ok()) << gbnf;
  for (const char* doc : {R"({"a": [1, 2], "b": {"k": [1, 2]}, "c": {"x": [ ]}})",
                          "{\n  \"a\": [\n    1\n  ]\n}", R"({"a":[]})", "{ \"a\" :\t[ ] }"}) {
    EXPECT_TRUE(grammar_accepts(g, doc)) << doc << "\n" << gbnf;
  }
  for (const char* doc : {R"( {"a": []})", R"({"a": []} )", R"({"a": [1 2]})",
                          R"({"a": [], "b": {"k": [1, 3]}})", "{\"a\": [\f]}"}) {
    EXPECT_FALSE(grammar_accepts(g, doc)) << doc << "\n" << gbnf;
  }
  // Compact stays the default.
  Grammar compact;
  ASSERT_TRUE(compile(schema, &compact));
  EXPECT_FALSE(grammar_accepts(compact, R"({"a": []})"));
  Grammar any;
  ASSERT_TRUE(parse_gbnf(json_object_gbnf({.whitespace = true}), &any).ok());
  EXPECT_TRUE(grammar_accepts(any, R"({"x": [1, {"y": null}], "z": { }})"));
  EXPECT_FALSE(grammar_accepts(any, R"({"x": [1, ]})"));
}

}  // namespace
}  // namespace pvllm::structured
