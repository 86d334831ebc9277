// MaskBench's protocol (bench/maskbench/protocol.h) on the committed subset
// of its schemas, tests/data/structured/maskbench: about 300 schemas from
// sources under permissive licences, with test instances of our own that
// ajv labelled (scripts/reference/make_maskbench_subset.mjs). Each schema's
// outcome is pinned in expected.json, so the test catches a change either
// way: a schema that starts being refused or stopping a valid instance, and
// one that starts passing while expected.json still calls it refused or
// stricter (then expected.json is updated with the improvement).
//
// Whatever expected.json says, no invalid instance may pass every mask and
// the engine may never be inconsistent (a mask that allows a token accept()
// refuses).
//
// Needs the Llama 3.1 tokenizer.json, the benchmark's, from
// $PVLLM_REFERENCE_TOKENIZERS (scripts/reference/install.sh; scripts/test.sh
// sets it), and $PVLLM_TEST_DATA (ctest sets it); skips without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/maskbench/protocol.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using maskbench::SchemaResult;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path subset_dir() {
  const std::string data = env_or_empty("PVLLM_TEST_DATA");
  return data.empty() ? fs::path() : fs::path(data) / "structured" / "maskbench";
}

Json read_json(const fs::path& file) {
  std::ifstream in(file);
  return Json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// The schema files of the subset, by name.
std::vector<std::string> schema_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".json" && name != "expected.json") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// What a run did, in expected.json's words: "passing",
// "compile_error:<keyword>", or "stricter" (a valid instance stopped).
std::string outcome_of(const SchemaResult& r) {
  if (!r.compiled) return "compile_error:" + r.compile_keyword;
  if (r.valid_rejected > 0) return "stricter";
  return "passing";
}

// expected.json's "stricter:<reason>" compares as "stricter".
std::string kind_of(const std::string& expected) {
  return expected.rfind("stricter:", 0) == 0 ? "stricter" : expected;
}

TEST(MaskbenchSubsetTest, ExpectedOutcomesNameEveryFile) {
  const fs::path dir = subset_dir();
  if (dir.empty()) GTEST_SKIP() << "needs $PVLLM_TEST_DATA (ctest sets it)";
  const Json expected = read_json(dir / "expected.json");
  ASSERT_TRUE(expected.is_object()) << "cannot read " << (dir / "expected.json");
  const std::vector<std::string> files = schema_files(dir);
  EXPECT_GE(files.size(), 250u);
  for (const std::string& name : files) {
    EXPECT_TRUE(expected.contains(name)) << name << " has no expected outcome";
  }
  for (const auto& [name, outcome] : expected.items()) {
    EXPECT_TRUE(fs::exists(dir / name)) << "expected.json names a missing file " << name;
    const std::string o = outcome.get<std::string>();
    EXPECT_TRUE(o == "passing" || o.rfind("compile_error:", 0) == 0 ||
                (o.rfind("stricter:", 0) == 0 && o.size() > 9))
        << name << ": " << o;
  }
  for (const std::string& name : files) {
    const Json file = read_json(dir / name);
    ASSERT_TRUE(file.is_object()) << name;
    EXPECT_FALSE(file.value("source", "").empty()) << name;
    EXPECT_FALSE(file.value("licence", "").empty()) << name;
    EXPECT_TRUE(file.contains("schema") && file["tests"].is_array()) << name;
  }
}

TEST(MaskbenchSubsetTest, EverySchemaMeetsItsExpectedOutcome) {
  const fs::path dir = subset_dir();
  const std::string refs = env_or_empty("PVLLM_REFERENCE_TOKENIZERS");
  if (dir.empty() || refs.empty()) {
    GTEST_SKIP() << "needs $PVLLM_REFERENCE_TOKENIZERS (bash scripts/reference/install.sh; "
                    "scripts/test.sh sets it) and $PVLLM_TEST_DATA (ctest sets it)";
  }
  std::unique_ptr<Tokenizer> tokenizer;
  const Status loaded = Tokenizer::load(refs + "/tokenizer-llama3_1/models", &tokenizer);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  structured::ConstraintCompiler compiler(maskbench::compiler_token_bytes(*tokenizer));
  const Json expected = read_json(dir / "expected.json");
  ASSERT_TRUE(expected.is_object()) << "cannot read " << (dir / "expected.json");

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, int> outcomes;  // by kind
  int num_valid = 0, num_invalid = 0;
  int64_t num_tokens = 0;
  for (const std::string& name : schema_files(dir)) {
    const Json file = read_json(dir / name);
    ASSERT_TRUE(file.is_object()) << name;
    const SchemaResult r = maskbench::run_schema(name, file, &compiler, *tokenizer);
    const std::string got = outcome_of(r);
    ++outcomes[got.rfind("compile_error:", 0) == 0 ? "compile_error" : got];
    num_valid += r.num_valid_tests;
    num_invalid += r.num_invalid_tests;
    num_tokens += r.num_tokens;

    EXPECT_EQ(r.invalid_accepted, 0) << name << ": " << r.validation_error;
    EXPECT_EQ(r.engine_error, "") << name;
    const std::string want = expected.value(name, std::string("(none)"));
    EXPECT_EQ(got, kind_of(want)) << name << ": expected.json says \"" << want << "\""
                                  << (r.compiled ? "" : "; refused: " + r.compile_error)
                                  << (r.valid_rejected
                                          ? "; " + r.validation_error + ", stopped at \"" +
                                                r.rejected_token + "\" after \"" +
                                                r.rejected_prefix + "\""
                                          : "");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "maskbench subset: %d passing, %d compile errors, %d stricter; %d valid instances "
      "accepted, %d invalid ones stopped, %lld tokens, %.1f s\n",
      outcomes["passing"], outcomes["compile_error"], outcomes["stricter"], num_valid, num_invalid,
      static_cast<long long>(num_tokens), seconds);
}

}  // namespace
}  // namespace pvllm
