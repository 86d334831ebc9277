// GGUF files made by llama.cpp's own tools (tests/data/gguf, remade by
// scripts/reference/make_gguf_fixtures.sh), read by gguf::open, against
// what two readers nobody here wrote read from the same files: the
// @huggingface/gguf npm package (ref/<file>.metadata.json: every key, its
// type and value; every tensor's name, shape, type and offset) and ggml's
// own reader (ref/<file>.tensors.json: byte sizes and the data section).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model/gguf_file.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string data_dir() {
  const char* dir = std::getenv("PVLLM_TEST_DATA");
  return dir != nullptr ? std::string(dir) + "/gguf" : std::string();
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

// The fixtures: every .gguf file in tests/data/gguf.
std::vector<std::string> fixtures() {
  std::vector<std::string> out;
  const std::string dir = data_dir();
  if (dir.empty() || !fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".gguf") out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// @huggingface/gguf's type names for GGUF's value types.
const char* npm_type_name(gguf::ValueType t) {
  switch (t) {
    case gguf::ValueType::kU8:
      return "UINT8";
    case gguf::ValueType::kI8:
      return "INT8";
    case gguf::ValueType::kU16:
      return "UINT16";
    case gguf::ValueType::kI16:
      return "INT16";
    case gguf::ValueType::kU32:
      return "UINT32";
    case gguf::ValueType::kI32:
      return "INT32";
    case gguf::ValueType::kF32:
      return "FLOAT32";
    case gguf::ValueType::kBool:
      return "BOOL";
    case gguf::ValueType::kString:
      return "STRING";
    case gguf::ValueType::kArray:
      return "ARRAY";
    case gguf::ValueType::kU64:
      return "UINT64";
    case gguf::ValueType::kI64:
      return "INT64";
    case gguf::ValueType::kF64:
      return "FLOAT64";
  }
  return "?";
}

double scalar(const gguf::Value& v) {
  switch (v.type) {
    case gguf::ValueType::kI8:
    case gguf::ValueType::kI16:
    case gguf::ValueType::kI32:
    case gguf::ValueType::kI64:
      return static_cast<double>(v.i);
    case gguf::ValueType::kF32:
    case gguf::ValueType::kF64:
      return v.f;
    default:
      return static_cast<double>(v.u);
  }
}

// Numbers as the npm package writes them: floats through a JS number (a
// float32 widened to double, so equal), integers exactly.
void expect_number(double ours, const json& theirs, const std::string& where) {
  ASSERT_TRUE(theirs.is_number()) << where << ": " << theirs.dump();
  EXPECT_EQ(ours, theirs.get<double>()) << where;
}

// One file on its own (a split part is one GGUF file too), as both
// references read single files.
void check_fixture(const std::string& name) {
  const std::string path = data_dir() + "/" + name;
  std::shared_ptr<MappedFile> mapped;
  ASSERT_TRUE(MappedFile::open(path, &mapped).ok()) << path;
  gguf::Part part;
  std::vector<gguf::TensorInfo> tensors;
  const Status st = gguf::parse(mapped, 0, &part, &tensors);
  ASSERT_TRUE(st.ok()) << st.message();

  const std::string stem = name.substr(0, name.size() - 5);
  const json ref = read_json(data_dir() + "/ref/" + stem + ".metadata.json");
  EXPECT_EQ(part.version, ref.at("version").get<uint32_t>());
  EXPECT_EQ(part.data_offset, ref.at("tensor_data_offset").get<uint64_t>());
  ASSERT_EQ(part.metadata.entries().size(), ref.at("kv").size());
  for (size_t k = 0; k < ref.at("kv").size(); ++k) {
    const json& kv = ref["kv"][k];
    const gguf::KeyValue& ours = part.metadata.entries()[k];
    const std::string key = kv.at("key").get<std::string>();
    EXPECT_EQ(ours.key, key) << "entry " << k << " (file order)";
    EXPECT_STREQ(npm_type_name(ours.value.type), kv.at("type").get<std::string>().c_str()) << key;
    const json& value = kv.at("value");
    if (ours.value.type == gguf::ValueType::kString) {
      EXPECT_EQ(ours.value.string, value.get<std::string>()) << key;
    } else if (ours.value.type == gguf::ValueType::kBool) {
      EXPECT_EQ(ours.value.u != 0, value.get<bool>()) << key;
    } else if (ours.value.type == gguf::ValueType::kArray) {
      const gguf::Array& a = ours.value.array;
      EXPECT_STREQ(npm_type_name(a.type), kv.at("subType").get<std::string>().c_str()) << key;
      ASSERT_EQ(a.size, value.size()) << key;
      // Through the reader's own getters, as the loader will read them.
      std::vector<double> numbers;
      if (a.type == gguf::ValueType::kString) {
        std::vector<std::string> strings;
        ASSERT_TRUE(part.metadata.get_string_array(key, &strings).ok()) << key;
        ASSERT_EQ(strings, value.get<std::vector<std::string>>()) << key;
      } else if (a.type == gguf::ValueType::kF32) {
        std::vector<float> floats;
        ASSERT_TRUE(part.metadata.get_f32_array(key, &floats).ok()) << key;
        numbers.assign(floats.begin(), floats.end());
      } else {
        std::vector<int64_t> ints;
        const Status got = part.metadata.get_int_array(key, &ints);
        ASSERT_TRUE(got.ok()) << key << ": " << got.message();
        numbers.assign(ints.begin(), ints.end());
      }
      for (size_t i = 0; i < numbers.size(); ++i) {
        ASSERT_EQ(numbers[i], value[i].get<double>()) << key << "[" << i << "]";
      }
    } else {
      expect_number(scalar(ours.value), value, key);
    }
  }

  const json& ref_tensors = ref.at("tensors");
  ASSERT_EQ(tensors.size(), ref_tensors.size());
  const json ggml = read_json(data_dir() + "/ref/" + stem + ".tensors.json");
  EXPECT_EQ(part.alignment, ggml.at("alignment").get<uint64_t>());
  EXPECT_EQ(part.data_offset, ggml.at("data_offset").get<uint64_t>());
  ASSERT_EQ(tensors.size(), ggml.at("tensors").size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const gguf::TensorInfo& ours = tensors[t];
    const json& theirs = ref_tensors[t];
    EXPECT_EQ(ours.name, theirs.at("name").get<std::string>());
    EXPECT_EQ(ours.dims, theirs.at("shape").get<std::vector<int64_t>>()) << ours.name;
    EXPECT_EQ(static_cast<uint32_t>(ours.type), theirs.at("dtype").get<uint32_t>()) << ours.name;
    EXPECT_EQ(ours.offset, theirs.at("offset").get<uint64_t>()) << ours.name;
    // ggml's byte size of the tensor, and where its data starts.
    const json& g = ggml["tensors"][t];
    EXPECT_EQ(ours.name, g.at("name").get<std::string>());
    EXPECT_EQ(ours.size, g.at("nbytes").get<uint64_t>()) << ours.name;
    EXPECT_EQ(ours.file_offset, part.data_offset + g.at("offset").get<uint64_t>()) << ours.name;
  }
}

TEST(GgufReference, EveryFixtureMatchesHuggingFacesAndGgmlsReaders) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  const std::vector<std::string> names = fixtures();
  EXPECT_GE(names.size(), 20u) << "tests/data/gguf holds the fixtures of every type";
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    check_fixture(name);
  }
}

// The three parts of the split Q4_K_M file open as one model whose tensors
// are the whole file's, byte for byte.
TEST(GgufReference, SplitPartsOpenAsTheWholeModelByteForByte) {
  if (data_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  gguf::File split;
  const Status st =
      gguf::open(data_dir() + "/stories260K-Q4_K_M-split-00002-of-00003.gguf", &split);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(split.parts.size(), 3u);
  gguf::File whole;
  ASSERT_TRUE(gguf::open(data_dir() + "/stories260K-Q4_K_M.gguf", &whole).ok());
  ASSERT_EQ(split.tensors.size(), whole.tensors.size());
  for (const gguf::TensorInfo& w : whole.tensors) {
    const gguf::TensorInfo* s = split.find_tensor(w.name);
    ASSERT_NE(s, nullptr) << w.name;
    EXPECT_EQ(s->dims, w.dims) << w.name;
    EXPECT_EQ(s->type, w.type) << w.name;
    ASSERT_EQ(s->size, w.size) << w.name;
    EXPECT_EQ(std::memcmp(split.tensor_data(*s), whole.tensor_data(w), w.size), 0) << w.name;
  }
  std::string arch;
  ASSERT_TRUE(split.metadata().get_string("general.architecture", &arch).ok());
  EXPECT_EQ(arch, "llama");
}

}  // namespace
}  // namespace pvllm
