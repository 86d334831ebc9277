// Structured output through the C ABI (pvllm_sampling_params' constraint
// fields, since 0.6, and constraint_flags, since 0.11): each kind of
// constraint on a tiny model with the tiny sentencepiece tokenizer, the
// statuses and messages of bad ones, the fields' checks, the JSON flags'
// effect, and older structs (a 0.5 one without the constraint fields, a 0.6
// one without the flags) read as their callers knew them.
#include <gtest/gtest.h>
#include <pvllm/pvllm.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/capi_helpers.h"
#include "tests/util/tiny_model.h"

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;

using pvllm::testing::EnginePtr;
using pvllm::testing::take_message;

struct Sample {
  std::string text;
  int32_t finish_reason = PVLLM_FINISH_NONE;
  std::string error;
};

class CapiStructuredTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 512;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("capi_structured"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  void SetUp() override {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof p);
    p.model_path = model_dir_->c_str();
    p.device = "cpu";
    p.num_threads = 1;
    p.kv_cache_bytes = 16 << 20;
    pvllm_engine* engine = nullptr;
    pvllm_error* error = nullptr;
    ASSERT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_OK) << take_message(error);
    engine_.reset(engine);
  }

  static pvllm_sampling_params sampling(uint64_t seed) {
    pvllm_sampling_params s;
    pvllm_sampling_params_init(&s, sizeof s);
    s.temperature = 1.0f;
    s.has_seed = 1;
    s.seed = seed;
    s.max_tokens = 400;
    return s;
  }

  pvllm_status submit(const pvllm_sampling_params& s, uint64_t* id, std::string* message) {
    pvllm_request r;
    pvllm_request_init(&r, sizeof r);
    r.prompt_text = "Once upon a time";
    r.sampling = &s;
    pvllm_error* error = nullptr;
    const pvllm_status st = pvllm_submit(engine_.get(), &r, id, &error);
    *message = take_message(error);
    return st;
  }

  // Runs one request to its end.
  Sample run(const pvllm_sampling_params& s) {
    uint64_t id = 0;
    std::string message;
    EXPECT_EQ(submit(s, &id, &message), PVLLM_STATUS_OK) << message;
    Sample out;
    int32_t unfinished = 1;
    for (int step = 0; step < 2000 && unfinished > 0; ++step) {
      pvllm_error* error = nullptr;
      EXPECT_EQ(pvllm_step(engine_.get(), &unfinished, &error), PVLLM_STATUS_OK)
          << take_message(error);
      pvllm_output_batch* batch = nullptr;
      EXPECT_EQ(pvllm_poll(engine_.get(), 0, &batch, &error), PVLLM_STATUS_OK);
      for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
        const pvllm_output* o = pvllm_output_batch_get(batch, i);
        if (o->request_id != id) continue;
        out.text.append(o->text, o->text_len);
        if (o->finish_reason != PVLLM_FINISH_NONE) {
          out.finish_reason = o->finish_reason;
          out.error = o->error_message != nullptr ? o->error_message : "";
        }
      }
      pvllm_output_batch_free(batch);
    }
    return out;
  }

  // One seeded sample of a JSON kind at temperature 1 within 60 tokens:
  // `schema` is JSON_SCHEMA's (JSON_OBJECT has none), `flags` the options.
  Sample run_json(int32_t kind, const char* schema, uint32_t flags, uint64_t seed) {
    pvllm_sampling_params s = sampling(seed);
    s.constraint_kind = kind;
    s.constraint = kind == PVLLM_CONSTRAINT_JSON_SCHEMA ? schema : nullptr;
    s.constraint_flags = flags;
    s.max_tokens = 60;
    const Sample out = run(s);
    EXPECT_NE(out.finish_reason, PVLLM_FINISH_ERROR) << flags << ": " << out.error;
    return out;
  }

  // After refusals: a step finds no request to run.
  void expect_nothing_queued() {
    int32_t unfinished = -1;
    pvllm_error* error = nullptr;
    ASSERT_EQ(pvllm_step(engine_.get(), &unfinished, &error), PVLLM_STATUS_OK)
        << take_message(error);
    EXPECT_EQ(unfinished, 0) << "nothing refused was queued";
  }

  static std::string* model_dir_;
  EnginePtr engine_;
};

std::string* CapiStructuredTest::model_dir_ = nullptr;

// Whether JSON text has whitespace between its tokens (outside strings).
bool has_whitespace_between_tokens(const std::string& json) {
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      return true;
    }
  }
  return false;
}

TEST_F(CapiStructuredTest, EachKindOfConstraintShapesTheText) {
  const char* schema = R"({"type": "object", "properties": {
      "word": {"type": "string", "maxLength": 8}, "n": {"type": "integer"},
      "ok": {"type": "boolean"}}, "required": ["word", "n"], "additionalProperties": false})";
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    pvllm_sampling_params s = sampling(seed);
    s.constraint_kind = PVLLM_CONSTRAINT_JSON_SCHEMA;
    s.constraint = schema;
    const Sample out = run(s);
    ASSERT_EQ(out.finish_reason, PVLLM_FINISH_STOP) << out.text << " " << out.error;
    const nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << out.text;
    EXPECT_TRUE(doc["word"].is_string() && doc["n"].is_number_integer()) << out.text;
    for (const auto& [key, value] : doc.items()) {
      EXPECT_TRUE(key == "word" || key == "n" || key == "ok") << out.text;
    }
  }
  pvllm_sampling_params obj = sampling(3);
  obj.constraint_kind = PVLLM_CONSTRAINT_JSON_OBJECT;
  obj.max_tokens = 20;
  EXPECT_EQ(run(obj).text.substr(0, 1), "{");

  pvllm_sampling_params re = sampling(4);
  re.constraint_kind = PVLLM_CONSTRAINT_REGEX;
  re.constraint = "[A-Z][a-z]{1,6} (ran|sat)\\.";
  const Sample r = run(re);
  EXPECT_EQ(r.finish_reason, PVLLM_FINISH_STOP);
  EXPECT_TRUE(std::regex_match(r.text, std::regex(re.constraint))) << r.text;

  pvllm_sampling_params g = sampling(5);
  g.constraint_kind = PVLLM_CONSTRAINT_GRAMMAR;
  g.constraint = "root ::= \"yes\" | \"no\" | \"it \" (\"is\" | \"was\") \" \" [a-z]{1,5}";
  const Sample gs = run(g);
  EXPECT_TRUE(gs.text == "yes" || gs.text == "no" ||
              std::regex_match(gs.text, std::regex("it (is|was) [a-z]{1,5}")))
      << gs.text;

  const char* choices[] = {"red", "green", "blue sky"};
  pvllm_sampling_params c = sampling(6);
  c.constraint_kind = PVLLM_CONSTRAINT_CHOICE;
  c.choices = choices;
  c.num_choices = 3;
  const std::string chosen = run(c).text;
  EXPECT_TRUE(chosen == "red" || chosen == "green" || chosen == "blue sky") << chosen;
}

TEST_F(CapiStructuredTest, BadConstraintsAndFieldsAreRefusedAtSubmit) {
  struct Case {
    int32_t kind;
    const char* text;
    pvllm_status status;
    const char* needle;
  };
  const Case cases[] = {
      {PVLLM_CONSTRAINT_JSON_SCHEMA, "{\"type\": ", PVLLM_STATUS_INVALID_ARGUMENT, "byte"},
      {PVLLM_CONSTRAINT_JSON_SCHEMA, R"({"type": "array", "uniqueItems": true})",
       PVLLM_STATUS_UNSUPPORTED, "uniqueItems"},
      {PVLLM_CONSTRAINT_GRAMMAR, "root ::= [a-", PVLLM_STATUS_INVALID_ARGUMENT, "line 1"},
      {PVLLM_CONSTRAINT_REGEX, "a{3,1}", PVLLM_STATUS_INVALID_ARGUMENT, "offset"},
      {PVLLM_CONSTRAINT_REGEX, "(?=a)b", PVLLM_STATUS_UNSUPPORTED, "offset"},
      {PVLLM_CONSTRAINT_JSON_SCHEMA, nullptr, PVLLM_STATUS_INVALID_ARGUMENT, "constraint is NULL"},
      {9, "x", PVLLM_STATUS_INVALID_ARGUMENT, "constraint_kind"},
      {-1, "x", PVLLM_STATUS_INVALID_ARGUMENT, "constraint_kind"},
  };
  for (const Case& c : cases) {
    pvllm_sampling_params s = sampling(1);
    s.constraint_kind = c.kind;
    s.constraint = c.text;
    uint64_t id = 0;
    std::string message;
    EXPECT_EQ(submit(s, &id, &message), c.status) << (c.text ? c.text : "NULL") << ": " << message;
    EXPECT_NE(message.find(c.needle), std::string::npos) << message;
  }
  pvllm_sampling_params s = sampling(1);
  s.constraint_kind = PVLLM_CONSTRAINT_CHOICE;
  s.num_choices = 2;
  uint64_t id = 0;
  std::string message;
  EXPECT_EQ(submit(s, &id, &message), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("choices is NULL"), std::string::npos) << message;
  const char* with_null[] = {"a", nullptr};
  s.choices = with_null;
  EXPECT_EQ(submit(s, &id, &message), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("choices[1] is NULL"), std::string::npos) << message;
  s.num_choices = 0;
  EXPECT_EQ(submit(s, &id, &message), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("empty"), std::string::npos) << message;
  expect_nothing_queued();
}

// The JSON flags (since 0.11) reach the grammar: at temperature 1 over a
// few seeds, whitespace and unlisted members show up only when asked for.
// An unlisted member's name is a free string the tiny model rarely closes,
// so a member counts once its comma is there; texts that end with STOP
// parse to what the schema allows.
TEST_F(CapiStructuredTest, JsonFlagsAllowWhitespaceAndUnlistedMembers) {
  const char* schema = R"({"type": "object", "properties": {"a": {"const": 1}},
      "required": ["a"], "additionalProperties": {"type": "boolean"}})";
  struct Seen {
    int whitespace = 0;
    int unlisted = 0;
  };
  const auto sample = [&](int32_t kind, uint32_t flags) -> Seen {
    Seen seen;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const Sample out = run_json(kind, schema, flags, seed);
      if (has_whitespace_between_tokens(out.text)) ++seen.whitespace;
      if (kind == PVLLM_CONSTRAINT_JSON_SCHEMA && out.text.rfind(R"({"a":1,)", 0) == 0) {
        ++seen.unlisted;
      }
      if (out.finish_reason != PVLLM_FINISH_STOP) continue;
      const nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, false);
      EXPECT_TRUE(doc.is_object()) << out.text;
      if (!doc.is_object() || kind != PVLLM_CONSTRAINT_JSON_SCHEMA) continue;
      EXPECT_EQ(doc.value("a", 0), 1) << out.text;
      for (const auto& [key, value] : doc.items()) {
        EXPECT_TRUE(key == "a" || value.is_boolean()) << out.text;
      }
    }
    return seen;
  };
  const Seen plain = sample(PVLLM_CONSTRAINT_JSON_SCHEMA, 0);
  EXPECT_EQ(plain.whitespace, 0);
  EXPECT_EQ(plain.unlisted, 0);
  const Seen spaced = sample(PVLLM_CONSTRAINT_JSON_SCHEMA, PVLLM_CONSTRAINT_JSON_WHITESPACE);
  EXPECT_GT(spaced.whitespace, 0);
  const Seen open = sample(PVLLM_CONSTRAINT_JSON_SCHEMA, PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES);
  EXPECT_EQ(open.whitespace, 0);
  EXPECT_GT(open.unlisted, 0);
  EXPECT_EQ(sample(PVLLM_CONSTRAINT_JSON_OBJECT, 0).whitespace, 0);
  EXPECT_GT(sample(PVLLM_CONSTRAINT_JSON_OBJECT, PVLLM_CONSTRAINT_JSON_WHITESPACE).whitespace, 0);
  // Any object takes any member already: the bit is accepted and changes
  // nothing.
  EXPECT_EQ(
      sample(PVLLM_CONSTRAINT_JSON_OBJECT, PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES).whitespace,
      0);
}

// PVLLM_CONSTRAINT_JSON_ANY_ORDER is taken by both JSON kinds, alone and
// with the other bits, and what comes out is still what the schema allows:
// both required members, each once, compact (in whichever order the
// grammar lets them come).
TEST_F(CapiStructuredTest, JsonAnyOrderIsTakenByTheJsonKinds) {
  const char* schema = R"({"type": "object", "properties": {"a": {"const": 1},
      "b": {"const": true}}, "required": ["a", "b"], "additionalProperties": false})";
  const auto sample = [&](int32_t kind, uint32_t flags) {
    int stopped = 0;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const Sample out = run_json(kind, schema, flags, seed);
      if (out.finish_reason != PVLLM_FINISH_STOP) continue;
      ++stopped;
      const nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, false);
      EXPECT_TRUE(doc.is_object()) << out.text;
      if ((flags & PVLLM_CONSTRAINT_JSON_WHITESPACE) == 0) {
        EXPECT_FALSE(has_whitespace_between_tokens(out.text)) << out.text;
      }
      if (!doc.is_object() || kind != PVLLM_CONSTRAINT_JSON_SCHEMA) continue;
      EXPECT_EQ(doc.size(), 2u) << out.text;
      EXPECT_EQ(doc.value("a", 0), 1) << out.text;
      EXPECT_EQ(doc.value("b", false), true) << out.text;
    }
    return stopped;
  };
  // The schema's members are constants: the text has nothing to choose but
  // their order, so it ends well within max_tokens.
  EXPECT_GT(sample(PVLLM_CONSTRAINT_JSON_SCHEMA, PVLLM_CONSTRAINT_JSON_ANY_ORDER), 0);
  sample(PVLLM_CONSTRAINT_JSON_SCHEMA, PVLLM_CONSTRAINT_JSON_ANY_ORDER |
                                           PVLLM_CONSTRAINT_JSON_WHITESPACE |
                                           PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES);
  // Any object takes its members in any order already: the bit is accepted
  // and changes nothing.
  sample(PVLLM_CONSTRAINT_JSON_OBJECT, PVLLM_CONSTRAINT_JSON_ANY_ORDER);
}

TEST_F(CapiStructuredTest, JsonFlagsAreRefusedWhereTheyMeanNothing) {
  struct Case {
    int32_t kind;
    const char* text;
    uint32_t flags;
    const char* needle;
  };
  const Case cases[] = {
      {PVLLM_CONSTRAINT_JSON_SCHEMA, "{}", 8, "unknown bits 0x8"},
      {PVLLM_CONSTRAINT_JSON_SCHEMA, "{}", 8, "PVLLM_CONSTRAINT_JSON_ANY_ORDER (4)"},
      {PVLLM_CONSTRAINT_JSON_OBJECT, nullptr, 0x80000001u, "unknown bits 0x80000000"},
      {PVLLM_CONSTRAINT_NONE, nullptr, PVLLM_CONSTRAINT_JSON_WHITESPACE, "not 0"},
      {PVLLM_CONSTRAINT_REGEX, "a+", PVLLM_CONSTRAINT_JSON_WHITESPACE, "not 4"},
      {PVLLM_CONSTRAINT_GRAMMAR, "root ::= \"a\"", PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES,
       "not 3"},
      {PVLLM_CONSTRAINT_NONE, nullptr, PVLLM_CONSTRAINT_JSON_ANY_ORDER, "not 0"},
      {PVLLM_CONSTRAINT_REGEX, "a+", PVLLM_CONSTRAINT_JSON_ANY_ORDER, "not 4"},
      {PVLLM_CONSTRAINT_GRAMMAR, "root ::= \"a\"", PVLLM_CONSTRAINT_JSON_ANY_ORDER, "not 3"},
  };
  for (const Case& c : cases) {
    pvllm_sampling_params s = sampling(1);
    s.constraint_kind = c.kind;
    s.constraint = c.text;
    s.constraint_flags = c.flags;
    uint64_t id = 0;
    std::string message;
    EXPECT_EQ(submit(s, &id, &message), PVLLM_STATUS_INVALID_ARGUMENT) << c.flags;
    EXPECT_NE(message.find("constraint_flags"), std::string::npos) << message;
    EXPECT_NE(message.find(c.needle), std::string::npos) << message;
    EXPECT_EQ(id, 0u);
  }
  // CHOICE too, and a struct_size that ends inside the field.
  const char* choices[] = {"a"};
  pvllm_sampling_params s = sampling(1);
  s.constraint_kind = PVLLM_CONSTRAINT_CHOICE;
  s.choices = choices;
  s.num_choices = 1;
  uint64_t id = 0;
  std::string message;
  for (const uint32_t flags : {PVLLM_CONSTRAINT_JSON_WHITESPACE, PVLLM_CONSTRAINT_JSON_ANY_ORDER}) {
    s.constraint_flags = flags;
    EXPECT_EQ(submit(s, &id, &message), PVLLM_STATUS_INVALID_ARGUMENT) << flags;
    EXPECT_NE(message.find("constraint_flags"), std::string::npos) << message;
    EXPECT_NE(message.find("not 5"), std::string::npos) << message;
  }
  s.constraint_flags = 0;
  s.struct_size = static_cast<uint32_t>(offsetof(pvllm_sampling_params, constraint_flags) + 2);
  EXPECT_EQ(submit(s, &id, &message), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(message.find("inside field constraint_flags"), std::string::npos) << message;
  expect_nothing_queued();
}

TEST_F(CapiStructuredTest, TheFlagsDefaultToZeroAndAnOlderStructGoesWithout) {
  pvllm_sampling_params s;
  std::memset(&s, 0xAB, sizeof s);
  pvllm_sampling_params_init(&s, sizeof s);
  EXPECT_EQ(s.constraint_flags, 0u);
  // A 0.6-0.10 caller's struct ends at num_choices: the flags past it are
  // not read, whatever the memory there holds, so the JSON is compact.
  pvllm_sampling_params old = sampling(3);
  old.constraint_kind = PVLLM_CONSTRAINT_JSON_OBJECT;
  old.max_tokens = 60;
  old.constraint_flags = 0xFFFFFFFFu;
  old.struct_size = static_cast<uint32_t>(offsetof(pvllm_sampling_params, constraint_flags));
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    old.seed = seed;
    const Sample out = run(old);
    EXPECT_NE(out.finish_reason, PVLLM_FINISH_ERROR) << out.error;
    if (out.finish_reason != PVLLM_FINISH_STOP) continue;
    const nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << out.text;
    EXPECT_FALSE(has_whitespace_between_tokens(out.text)) << out.text;
  }
}

TEST_F(CapiStructuredTest, AnOlderStructWithoutTheFieldsIsUnconstrained) {
  // A 0.5 caller's struct ends at early_stopping: the constraint fields
  // past it are not read, whatever the memory there holds.
  pvllm_sampling_params s = sampling(2);
  s.constraint_kind = PVLLM_CONSTRAINT_REGEX;
  s.constraint = "x";
  s.struct_size = static_cast<uint32_t>(offsetof(pvllm_sampling_params, early_stopping) +
                                        sizeof(s.early_stopping));
  s.max_tokens = 12;
  s.ignore_eos = 1;
  const Sample out = run(s);
  EXPECT_EQ(out.finish_reason, PVLLM_FINISH_LENGTH);
  EXPECT_NE(out.text, "x");
}

}  // namespace
