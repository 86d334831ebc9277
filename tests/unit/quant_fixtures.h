// What the quant suites share: the GGUF fixtures of tests/data/gguf (named
// by $PVLLM_TEST_DATA; the suites skip without it), their references
// (ref/<file>.tensors.json, written by ggml), SHA-256 through OpenSSL's
// libcrypto, and a tensor's DType from its ggml type.
#pragma once

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "core/model/ggml_types.h"
#include "core/model/gguf_file.h"

namespace pvllm::quant_test {

inline std::string gguf_dir() {
  const char* dir = std::getenv("PVLLM_TEST_DATA");
  return dir != nullptr ? std::string(dir) + "/gguf" : std::string();
}

// Every .gguf file of the fixture folder, sorted; empty without the folder.
inline std::vector<std::string> gguf_fixtures() {
  std::vector<std::string> out;
  const std::string dir = gguf_dir();
  if (dir.empty() || !std::filesystem::is_directory(dir)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".gguf") out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ref/<stem>.tensors.json of fixture `name`.
inline nlohmann::json tensor_refs(const std::string& name) {
  const std::string path = gguf_dir() + "/ref/" + name.substr(0, name.size() - 5) + ".tensors.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

// Lowercase hex SHA-256 of `size` bytes.
inline std::string sha256_hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EXPECT_EQ(EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr), 1);
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

// The DType of a ggml type (by name: "Q4_K" is both); false for a type
// pvllm has no DType for.
inline bool dtype_of(ggml::Type type, DType* out) {
  return dtype_from_name(ggml::type_name(type), out);
}

// Lowercase, for comparing ggml's type names ("q4_K") with ours ("Q4_K").
inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace pvllm::quant_test
