// Reading the chat-template goldens (tests/data/chat_goldens, made by
// scripts/reference/make_chat_goldens.mjs with @huggingface/jinja). ctest
// sets PVLLM_TEST_DATA to tests/data.
#pragma once

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace pvllm::testing {

// tests/data, or "" when PVLLM_TEST_DATA is unset.
inline std::string test_data_dir() {
  const char* dir = std::getenv("PVLLM_TEST_DATA");
  return dir != nullptr ? dir : "";
}

// The golden file tests/data/chat_goldens/<name>.json; null when unreadable.
inline nlohmann::ordered_json read_chat_golden(const std::string& name) {
  std::ifstream in(test_data_dir() + "/chat_goldens/" + name + ".json");
  if (!in) return nullptr;
  std::stringstream buf;
  buf << in.rdbuf();
  return nlohmann::ordered_json::parse(buf.str(), nullptr, false);
}

}  // namespace pvllm::testing
