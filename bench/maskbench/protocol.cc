#include "bench/maskbench/protocol.h"

#include <chrono>
#include <memory>
#include <utility>

#include "core/chat/json_value.h"

namespace pvllm::maskbench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t us_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

// The last 200 bytes of `text`, for a report.
void rejected_prefix_of(const std::string& text, std::string* out) {
  *out = text.size() > 200 ? "..." + text.substr(text.size() - 200) : text;
}

}  // namespace

std::string refusal_keyword(const std::string& message) {
  for (const char* marker : {"unsupported keyword \"", "keyword \""}) {
    size_t at = message.find(marker);
    if (at == std::string::npos) continue;
    at += std::string(marker).size();
    size_t end = message.find('"', at);
    if (end == std::string::npos) break;
    std::string key = message.substr(at, end - at);
    // "format" and "$ref" refusals name the value too.
    size_t value = message.find(" value ", end);
    if ((key == "format") && value != std::string::npos && value < end + 3) {
      key += " " + message.substr(value + 7, message.find(' ', value + 7) - value - 7);
    }
    return key;
  }
  if (message.find("nothing can match") != std::string::npos) return "(unsatisfiable)";
  if (message.find("too ambiguous") != std::string::npos) return "(too ambiguous)";
  if (message.find("malformed") != std::string::npos) return "(malformed)";
  return "(other)";
}

nlohmann::ordered_json SchemaResult::to_json(bool with_masks) const {
  nlohmann::ordered_json j;
  j["id"] = id;
  j["num_tests"] = num_tests;
  if (!compiled) {
    j["compile_error"] = compile_error;
    j["compile_keyword"] = compile_keyword;
    return j;
  }
  j["ttfm_us"] = compile_us;
  j["num_valid_tests"] = num_valid_tests;
  j["num_invalid_tests"] = num_invalid_tests;
  if (!validation_error.empty()) j["validation_error"] = validation_error;
  if (!rejected_token.empty()) {
    j["rejected_prefix"] = rejected_prefix;
    j["rejected_token"] = rejected_token;
  }
  j["valid_rejected"] = valid_rejected;
  j["invalid_accepted"] = invalid_accepted;
  if (!engine_error.empty()) j["engine_error"] = engine_error;
  j["num_tokens"] = num_tokens;
  int64_t total = 0, max = 0;
  for (int32_t us : mask_us) {
    total += us;
    max = std::max<int64_t>(max, us);
  }
  j["masks_us"] = total;
  j["max_mask_us"] = max;
  if (with_masks) j["all_mask_us"] = mask_us;
  return j;
}

SchemaResult SchemaResult::from_json(const nlohmann::ordered_json& j) {
  SchemaResult r;
  r.id = j.value("id", "");
  r.num_tests = j.value("num_tests", 0);
  r.compiled = !j.contains("compile_error");
  r.compile_error = j.value("compile_error", "");
  r.compile_keyword = j.value("compile_keyword", "");
  r.compile_us = j.value("ttfm_us", int64_t{0});
  r.num_valid_tests = j.value("num_valid_tests", 0);
  r.num_invalid_tests = j.value("num_invalid_tests", 0);
  r.validation_error = j.value("validation_error", "");
  r.valid_rejected = j.value("valid_rejected", 0);
  r.invalid_accepted = j.value("invalid_accepted", 0);
  r.engine_error = j.value("engine_error", "");
  r.rejected_prefix = j.value("rejected_prefix", "");
  r.rejected_token = j.value("rejected_token", "");
  r.num_tokens = j.value("num_tokens", int64_t{0});
  if (j.contains("all_mask_us")) r.mask_us = j["all_mask_us"].get<std::vector<int32_t>>();
  return r;
}

std::vector<std::string> compiler_token_bytes(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  }
  return bytes;
}

SchemaResult run_schema(const std::string& id, const nlohmann::ordered_json& file,
                        structured::ConstraintCompiler* compiler, const Tokenizer& tokenizer) {
  SchemaResult r;
  r.id = id;
  const auto& tests = file.at("tests");
  r.num_tests = static_cast<int>(tests.size());
  structured::ConstraintSpec spec;
  spec.kind = structured::ConstraintKind::kJsonSchema;
  spec.text = file.at("schema").dump();
  spec.json_whitespace = true;
  spec.json_unlisted_properties = true;  // JSON Schema's own reading
  // JSON Schema's own reading; the benchmark's instances keep members in
  // their source order.
  spec.json_any_order = true;
  std::shared_ptr<const structured::CompiledConstraint> compiled;
  auto t0 = Clock::now();
  Status s = compiler->compile(spec, &compiled);
  r.compile_us = us_since(t0);
  if (!s.ok()) {
    r.compile_error = s.message();
    r.compile_keyword = refusal_keyword(s.message());
    return r;
  }
  r.compiled = true;
  for (size_t i = 0; i < tests.size(); ++i) {
    const auto& test = tests[i];
    const bool valid = test.at("valid").get<bool>();
    std::string instance;
    try {
      // Python's json.dumps(data, ensure_ascii=False), as tojson writes it.
      instance = chat::to_json(chat::from_json(test.at("data")));
    } catch (const std::exception& e) {
      r.engine_error = "test #" + std::to_string(i) + ": serialising: " + e.what();
      continue;
    }
    std::vector<int32_t> tokens;
    Status es = tokenizer.encode(instance, /*add_special=*/false, &tokens);
    if (!es.ok()) {
      r.engine_error = "test #" + std::to_string(i) + ": tokenizer: " + es.message();
      continue;
    }
    structured::TokenMatcher matcher(compiled, /*leading_spaces=*/0);
    bool accepted = true;
    std::string prefix;
    for (int32_t t : tokens) {
      auto t1 = Clock::now();
      auto mask = matcher.allowed();
      const size_t word = static_cast<size_t>(t) / 64;
      bool ok = word < mask->size() && ((*mask)[word] >> (t % 64) & 1);
      if (ok && !matcher.accept(t)) {
        r.engine_error = "test #" + std::to_string(i) + ": token " + std::to_string(t) +
                         " is in the mask but accept() refused it";
        ok = false;
      }
      r.mask_us.push_back(static_cast<int32_t>(us_since(t1)));
      if (ok) prefix += tokenizer.token_bytes(t);
      ++r.num_tokens;
      if (!ok) {
        if (valid) {
          rejected_prefix_of(prefix, &r.rejected_prefix);
          r.rejected_token = tokenizer.token_bytes(t);
        }
        accepted = false;
        if (matcher.failed())
          r.engine_error = "test #" + std::to_string(i) + ": " + matcher.error();
        break;
      }
    }
    if (accepted && !valid) {
      r.validation_error = "test #" + std::to_string(i) + ": should reject but didn't";
      ++r.invalid_accepted;
    } else if (!accepted && valid) {
      r.validation_error = "test #" + std::to_string(i) + ": should accept but didn't";
      ++r.valid_rejected;
    } else if (valid) {
      ++r.num_valid_tests;
    } else {
      ++r.num_invalid_tests;
    }
  }
  return r;
}

}  // namespace pvllm::maskbench
