// Chat templates: the input is a template's source, optionally followed by
// a NUL byte and a JSON object of variables. Without one (or when it does
// not parse as an object) the template renders a fixed small conversation.
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/chat/template.h"

namespace {

const nlohmann::ordered_json& fixed_context() {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <b>there</b>"},
      {"role": "assistant", "content": "Hello!", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"x": 1, "y": [1.5, null]}}}]},
      {"role": "tool", "content": "{\"ok\": true}"},
      {"role": "user", "content": [{"type": "text", "text": "parts"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
  })");
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* begin = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(memchr(begin, '\0', size));
  std::string_view source(begin, nul ? static_cast<size_t>(nul - begin) : size);

  std::unique_ptr<pvllm::chat::Template> parsed;
  if (!pvllm::chat::Template::parse(source, &parsed).ok()) return 0;

  nlohmann::ordered_json context = fixed_context();
  if (nul) {
    auto given = nlohmann::ordered_json::parse(nul + 1, begin + size, nullptr, false);
    if (given.is_object()) context = std::move(given);
  }
  std::string out;
  (void)parsed->render(context, &out);
  return 0;
}
