// The GGUF reader (core/model/gguf_file.h) and the ggml type table: files
// written by tests/util/gguf_writer round-trip every value type, array,
// version, alignment and a split model; every damaged field is refused
// with its status and a message naming it.
#include "core/model/gguf_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>

#include "core/model/ggml_types.h"
#include "tests/util/gguf_writer.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using gguf::ValueType;
using testing::GgufWriter;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// ggml's own numbers (ggml.h's enum, ggml-common.h's block structs).
struct ExpectedType {
  uint32_t id;
  const char* name;
  uint32_t block_size;
  uint32_t block_bytes;
};
const ExpectedType kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
    {41, "Q1_0", 128, 18},
};

TEST(GgmlTypesTest, IdsBlocksAndBytesAreGgmls) {
  for (const ExpectedType& e : kGgmlTypes) {
    const ggml::TypeInfo* info = ggml::find_type(e.id);
    ASSERT_NE(info, nullptr) << e.name;
    EXPECT_EQ(static_cast<uint32_t>(info->type), e.id);
    EXPECT_STREQ(info->name, e.name);
    EXPECT_EQ(info->block_size, e.block_size) << e.name;
    EXPECT_EQ(info->block_bytes, e.block_bytes) << e.name;
  }
  EXPECT_EQ(ggml::all_types().size(), std::size(kGgmlTypes));
  // Removed from ggml, or never defined.
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 42u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(ggml::find_type(id), nullptr) << id;
  }
}

TEST(GgmlTypesTest, ServedTypesAreTheIssuesList) {
  std::set<std::string> served;
  for (const ggml::TypeInfo& info : ggml::all_types()) {
    if (info.served) served.insert(info.name);
  }
  const std::set<std::string> expected = {"F32",  "F16",  "BF16", "Q8_0",   "Q4_0",
                                          "Q4_1", "Q5_0", "Q5_1", "Q2_K",   "Q3_K",
                                          "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"};
  EXPECT_EQ(served, expected);
}

TEST(GgmlTypesTest, RowBytesCountsWholeBlocks) {
  uint64_t bytes = 0;
  ASSERT_TRUE(ggml::row_bytes(ggml::Type::kQ4_K, 4096, "w", &bytes).ok());
  EXPECT_EQ(bytes, 16u * 144);
  ASSERT_TRUE(ggml::row_bytes(ggml::Type::kQ8_0, 64, "w", &bytes).ok());
  EXPECT_EQ(bytes, 68u);
  ASSERT_TRUE(ggml::row_bytes(ggml::Type::kF16, 3, "w", &bytes).ok());
  EXPECT_EQ(bytes, 6u);
  ASSERT_TRUE(ggml::tensor_bytes(ggml::Type::kQ6_K, {512, 3, 2}, "w", &bytes).ok());
  EXPECT_EQ(bytes, 2u * 210 * 3 * 2);
}

TEST(GgmlTypesTest, RowBytesRefusesAPartialBlockNamingTensorAndType) {
  for (int64_t length : {int64_t{33}, int64_t{0}, int64_t{-32}}) {
    uint64_t bytes = 7;
    const Status st = ggml::row_bytes(ggml::Type::kQ4_0, length, "blk.0.ffn_up.weight", &bytes);
    EXPECT_EQ(st.code(), StatusCode::kCorruptModel) << length;
    EXPECT_NE(st.message().find("blk.0.ffn_up.weight"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("Q4_0"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(std::to_string(length)), std::string::npos) << st.message();
    EXPECT_EQ(bytes, 7u);
  }
}

TEST(GgmlTypesTest, SizesPast64BitsAreRefused) {
  uint64_t bytes = 0;
  Status st = ggml::row_bytes(ggml::Type::kF64, std::numeric_limits<int64_t>::max(), "big", &bytes);
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel);
  EXPECT_NE(st.message().find("64 bits"), std::string::npos) << st.message();
  st = ggml::tensor_bytes(ggml::Type::kF32, {int64_t{1} << 40, int64_t{1} << 23}, "big", &bytes);
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel);
  EXPECT_NE(st.message().find("'big'"), std::string::npos) << st.message();
}

class GgufFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("gguf"); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // A small model: a few keys and three tensors of different types.
  static GgufWriter model() {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 1);
    w.add_f32("llama.rope.freq_base", 10000.0f);
    w.add_tensor("token_embd.weight", {32, 5}, ggml::Type::kQ8_0);
    w.add_tensor("blk.0.attn_norm.weight", {32}, ggml::Type::kF32);
    w.add_tensor("output.weight", {256, 2}, ggml::Type::kQ4_K);
    return w;
  }

  Status open(const GgufWriter& w, gguf::File* out) {
    return gguf::open(w.write(path("model.gguf")), out);
  }

  Status open_bytes(const std::vector<unsigned char>& bytes, gguf::File* out) {
    return gguf::open(testing::write_bytes(path("model.gguf"), bytes), out);
  }

  gguf::File open_or_die(const GgufWriter& w) {
    gguf::File file;
    const Status st = open(w, &file);
    EXPECT_TRUE(st.ok()) << st.message();
    return file;
  }

  // The status `w`'s file opens with is `code`, and its message holds
  // every one of `needles`.
  ::testing::AssertionResult refused(const GgufWriter& w, StatusCode code,
                                     const std::vector<std::string>& needles) {
    gguf::File file;
    return check_refusal(open(w, &file), code, needles);
  }

  static ::testing::AssertionResult check_refusal(const Status& st, StatusCode code,
                                                  const std::vector<std::string>& needles) {
    if (st.code() != code) {
      return ::testing::AssertionFailure()
             << "status " << static_cast<int>(st.code()) << ", wanted " << static_cast<int>(code)
             << ": " << st.message();
    }
    for (const std::string& needle : needles) {
      if (st.message().find(needle) == std::string::npos) {
        return ::testing::AssertionFailure() << "'" << needle << "' not in: " << st.message();
      }
    }
    return ::testing::AssertionSuccess();
  }

  std::string dir_;
};

template <typename T>
T element(const gguf::Array& array, size_t i) {
  T v;
  std::memcpy(&v, array.data + i * sizeof(T), sizeof(T));
  return v;
}

TEST_F(GgufFileTest, EveryScalarTypeRoundTrips) {
  GgufWriter w;
  w.add_u8("u8", 250);
  w.add_i8("i8", -120);
  w.add_u16("u16", 65000);
  w.add_i16("i16", -32000);
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  w.add_f32("f32", 0.1f);
  w.add_bool("yes", true);
  w.add_bool("no", false);
  w.add_string("string", std::string("h\xc3\xa9llo\0z", 8));
  w.add_string("empty", "");
  w.add_u64("u64", kU64Max - 1);
  w.add_i64("i64", std::numeric_limits<int64_t>::min());
  w.add_f64("f64", -1e300);
  const gguf::File file = open_or_die(w);
  const gguf::Metadata& md = file.metadata();
  ASSERT_EQ(md.entries().size(), 14u);
  EXPECT_EQ(md.entries()[0].key, "u8");  // file order
  EXPECT_EQ(md.entries()[13].key, "f64");

  EXPECT_EQ(md.find("u8")->type, ValueType::kU8);
  EXPECT_EQ(md.find("u8")->u, 250u);
  EXPECT_EQ(md.find("i8")->type, ValueType::kI8);
  EXPECT_EQ(md.find("i8")->i, -120);
  EXPECT_EQ(md.find("u16")->u, 65000u);
  EXPECT_EQ(md.find("i16")->i, -32000);
  EXPECT_EQ(md.find("i16")->type, ValueType::kI16);
  uint32_t u32 = 0;
  ASSERT_TRUE(md.get_u32("u32", &u32).ok());
  EXPECT_EQ(u32, 4000000000u);
  int32_t i32 = 0;
  ASSERT_TRUE(md.get_i32("i32", &i32).ok());
  EXPECT_EQ(i32, -2000000000);
  float f32 = 0;
  ASSERT_TRUE(md.get_f32("f32", &f32).ok());
  EXPECT_EQ(f32, 0.1f);
  bool b = false;
  ASSERT_TRUE(md.get_bool("yes", &b).ok());
  EXPECT_TRUE(b);
  ASSERT_TRUE(md.get_bool("no", &b).ok());
  EXPECT_FALSE(b);
  std::string s;
  ASSERT_TRUE(md.get_string("string", &s).ok());
  EXPECT_EQ(s, std::string("h\xc3\xa9llo\0z", 8));
  ASSERT_TRUE(md.get_string("empty", &s).ok());
  EXPECT_EQ(s, "");
  uint64_t u64 = 0;
  ASSERT_TRUE(md.get_u64("u64", &u64).ok());
  EXPECT_EQ(u64, kU64Max - 1);
  EXPECT_EQ(md.find("i64")->type, ValueType::kI64);
  EXPECT_EQ(md.find("i64")->i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(md.find("f64")->type, ValueType::kF64);
  EXPECT_EQ(md.find("f64")->f, -1e300);
}

TEST_F(GgufFileTest, EveryArrayTypeRoundTrips) {
  GgufWriter w;
  w.add_array<uint8_t>("u8", ValueType::kU8, {0, 7, 255});
  w.add_array<int8_t>("i8", ValueType::kI8, {-128, 5});
  w.add_array<uint16_t>("u16", ValueType::kU16, {1, 65535});
  w.add_array<int16_t>("i16", ValueType::kI16, {-32768, 3});
  w.add_array<uint32_t>("u32", ValueType::kU32, {0xdeadbeef});
  w.add_array<int32_t>("i32", ValueType::kI32, {-1, 2, -3});
  w.add_array<float>("f32", ValueType::kF32, {0.5f, -2.25f});
  w.add_array<uint8_t>("bool", ValueType::kBool, {1, 0, 1});
  w.add_string_array("strings", {"a", "", "\xe2\x96\x81the", std::string(300, 'x')});
  w.add_array<uint64_t>("u64", ValueType::kU64, {kU64Max});
  w.add_array<int64_t>("i64", ValueType::kI64, {std::numeric_limits<int64_t>::min(), 9});
  w.add_array<double>("f64", ValueType::kF64, {1.0 / 3});
  w.add_array<uint32_t>("empty", ValueType::kU32, {});
  w.add_string_array("empty_strings", {});
  const gguf::File file = open_or_die(w);
  const gguf::Metadata& md = file.metadata();

  const gguf::Array* a = nullptr;
  ASSERT_TRUE(md.get_array("u8", ValueType::kU8, &a).ok());
  ASSERT_EQ(a->size, 3u);
  EXPECT_EQ(element<uint8_t>(*a, 2), 255);
  ASSERT_TRUE(md.get_array("i8", ValueType::kI8, &a).ok());
  EXPECT_EQ(element<int8_t>(*a, 0), -128);
  ASSERT_TRUE(md.get_array("u16", ValueType::kU16, &a).ok());
  EXPECT_EQ(element<uint16_t>(*a, 1), 65535);
  ASSERT_TRUE(md.get_array("i16", ValueType::kI16, &a).ok());
  EXPECT_EQ(element<int16_t>(*a, 0), -32768);
  ASSERT_TRUE(md.get_array("u32", ValueType::kU32, &a).ok());
  EXPECT_EQ(element<uint32_t>(*a, 0), 0xdeadbeefu);
  std::vector<int32_t> i32;
  ASSERT_TRUE(md.get_i32_array("i32", &i32).ok());
  EXPECT_EQ(i32, (std::vector<int32_t>{-1, 2, -3}));
  std::vector<float> f32;
  ASSERT_TRUE(md.get_f32_array("f32", &f32).ok());
  EXPECT_EQ(f32, (std::vector<float>{0.5f, -2.25f}));
  ASSERT_TRUE(md.get_array("bool", ValueType::kBool, &a).ok());
  EXPECT_EQ(std::vector<uint8_t>(a->data, a->data + a->size), (std::vector<uint8_t>{1, 0, 1}));
  std::vector<std::string> strings;
  ASSERT_TRUE(md.get_string_array("strings", &strings).ok());
  EXPECT_EQ(strings, (std::vector<std::string>{"a", "", "\xe2\x96\x81the", std::string(300, 'x')}));
  ASSERT_TRUE(md.get_array("u64", ValueType::kU64, &a).ok());
  EXPECT_EQ(element<uint64_t>(*a, 0), kU64Max);
  ASSERT_TRUE(md.get_array("i64", ValueType::kI64, &a).ok());
  EXPECT_EQ(element<int64_t>(*a, 0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(element<int64_t>(*a, 1), 9);
  ASSERT_TRUE(md.get_array("f64", ValueType::kF64, &a).ok());
  EXPECT_EQ(element<double>(*a, 0), 1.0 / 3);
  ASSERT_TRUE(md.get_array("empty", ValueType::kU32, &a).ok());
  EXPECT_EQ(a->size, 0u);
  ASSERT_TRUE(md.get_string_array("empty_strings", &strings).ok());
  EXPECT_TRUE(strings.empty());

  // Any integer array widens; a u64 past int64 does not.
  std::vector<int64_t> ints;
  ASSERT_TRUE(md.get_int_array("i16", &ints).ok());
  EXPECT_EQ(ints, (std::vector<int64_t>{-32768, 3}));
  ASSERT_TRUE(md.get_int_array("u32", &ints).ok());
  EXPECT_EQ(ints, (std::vector<int64_t>{0xdeadbeef}));
  EXPECT_TRUE(check_refusal(md.get_int_array("u64", &ints), StatusCode::kCorruptModel,
                            {"'u64'", "element 0"}));
  EXPECT_TRUE(check_refusal(md.get_int_array("f32", &ints), StatusCode::kCorruptModel,
                            {"'f32'", "array of f32"}));
}

TEST_F(GgufFileTest, GettersNameTheKeyWhenMissingOrOfAnotherType) {
  GgufWriter w;
  w.add_u16("llama.context_length", 2048);
  w.add_string_array("tokenizer.ggml.tokens", {"a"});
  w.add_i32("llama.negative", -1);
  const gguf::File file = open_or_die(w);
  const gguf::Metadata& md = file.metadata();
  uint32_t u32 = 0;
  EXPECT_TRUE(check_refusal(md.get_u32("llama.block_count", &u32), StatusCode::kNotFound,
                            {"'llama.block_count'", "missing", "model.gguf"}));
  EXPECT_TRUE(check_refusal(md.get_u32("llama.context_length", &u32), StatusCode::kCorruptModel,
                            {"'llama.context_length'", "u16", "u32", "model.gguf"}));
  std::vector<float> f32;
  EXPECT_TRUE(check_refusal(md.get_f32_array("tokenizer.ggml.tokens", &f32),
                            StatusCode::kCorruptModel,
                            {"'tokenizer.ggml.tokens'", "array of string", "array of f32"}));
  std::string s;
  EXPECT_TRUE(check_refusal(md.get_string("tokenizer.ggml.tokens", &s), StatusCode::kCorruptModel,
                            {"'tokenizer.ggml.tokens'", "not string"}));
  // get_uint takes any integer width, but not a negative value or a string.
  uint64_t n = 0;
  ASSERT_TRUE(md.get_uint("llama.context_length", &n).ok());
  EXPECT_EQ(n, 2048u);
  EXPECT_TRUE(check_refusal(md.get_uint("llama.negative", &n), StatusCode::kCorruptModel,
                            {"'llama.negative'", "-1"}));
  EXPECT_TRUE(check_refusal(md.get_uint("tokenizer.ggml.tokens", &n), StatusCode::kCorruptModel,
                            {"'tokenizer.ggml.tokens'", "an integer"}));
}

TEST_F(GgufFileTest, TensorsRoundTripWithTheirBytes) {
  GgufWriter w = model();
  w.add_tensor("blk.0.attn_q.weight", {256, 3}, ggml::Type::kIQ4_XS);
  w.add_tensor("blk.0.ffn_up.weight", {4, 3, 2, 2}, ggml::Type::kBF16);
  uint64_t data_offset = 0;
  const std::vector<unsigned char> bytes = w.bytes(&data_offset);
  gguf::File file;
  ASSERT_TRUE(open_bytes(bytes, &file).ok());
  ASSERT_EQ(file.parts.size(), 1u);
  const gguf::Part& part = file.parts[0];
  EXPECT_EQ(part.version, 3u);
  EXPECT_EQ(part.alignment, 32u);
  EXPECT_EQ(part.data_offset, data_offset);
  EXPECT_EQ(part.num_tensors, 5u);
  ASSERT_EQ(file.tensors.size(), w.tensors.size());
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    const testing::GgufTensorSpec& spec = w.tensors[i];
    const gguf::TensorInfo& t = file.tensors[i];  // file order
    EXPECT_EQ(file.find_tensor(spec.name), &t);
    EXPECT_EQ(t.name, spec.name);
    EXPECT_EQ(std::vector<uint64_t>(t.dims.begin(), t.dims.end()), spec.dims);
    EXPECT_EQ(static_cast<uint32_t>(t.type), spec.type);
    EXPECT_EQ(t.part, 0u);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(t.file_offset, data_offset + t.offset);
    ASSERT_EQ(t.size, spec.data.size()) << t.name;
    EXPECT_EQ(std::memcmp(file.tensor_data(t), spec.data.data(), t.size), 0) << t.name;
    EXPECT_EQ(std::memcmp(bytes.data() + t.file_offset, spec.data.data(), t.size), 0);
  }
  const gguf::TensorInfo* q = file.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, ggml::Type::kIQ4_XS);
  EXPECT_EQ(q->size, 3u * 136);
  EXPECT_EQ(q->num_elements(), 768);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_up.weight")->num_elements(), 48);
  EXPECT_EQ(file.find_tensor("missing"), nullptr);
}

TEST_F(GgufFileTest, Versions2And3ReadAlike) {
  GgufWriter w = model();
  w.version = 2;
  const gguf::File v2 = open_or_die(w);
  w.version = 3;
  const gguf::File v3 = open_or_die(w);
  EXPECT_EQ(v2.parts[0].version, 2u);
  EXPECT_EQ(v3.parts[0].version, 3u);
  ASSERT_EQ(v2.metadata().entries().size(), v3.metadata().entries().size());
  ASSERT_EQ(v2.tensors.size(), v3.tensors.size());
  for (size_t i = 0; i < v2.tensors.size(); ++i) {
    EXPECT_EQ(v2.tensors[i].name, v3.tensors[i].name);
    EXPECT_EQ(v2.tensors[i].file_offset, v3.tensors[i].file_offset);
  }
}

TEST_F(GgufFileTest, Version1IsRefusedByName) {
  GgufWriter w = model();
  w.version = 1;
  EXPECT_TRUE(refused(w, StatusCode::kUnsupported, {"model.gguf", "version 1"}));
}

TEST_F(GgufFileTest, LaterAndZeroVersionsAreRefused) {
  GgufWriter w = model();
  w.version = 4;
  EXPECT_TRUE(refused(w, StatusCode::kUnsupported, {"version 4", "2 and 3"}));
  w.version = 0;
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"version 0"}));
}

TEST_F(GgufFileTest, BigEndianFilesAreRefusedByName) {
  GgufWriter w = model();
  w.version = 0x03000000;  // 3, as a big-endian writer stores it
  EXPECT_TRUE(refused(w, StatusCode::kUnsupported, {"big-endian", "0x03000000"}));
  w.version = 0x02000000;
  EXPECT_TRUE(refused(w, StatusCode::kUnsupported, {"big-endian"}));
}

TEST_F(GgufFileTest, AWrongMagicIsNotGguf) {
  GgufWriter w = model();
  w.magic = {'G', 'G', 'J', 'T'};
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"not a GGUF file", "47 47 4a 54"}));
}

TEST_F(GgufFileTest, EmptyAndMissingFiles) {
  gguf::File file;
  EXPECT_TRUE(check_refusal(open_bytes({}, &file), StatusCode::kCorruptModel, {"the magic"}));
  EXPECT_TRUE(check_refusal(gguf::open(path("absent.gguf"), &file), StatusCode::kNotFound,
                            {"absent.gguf"}));
}

TEST_F(GgufFileTest, AFileWithoutTensorsNeedsNoDataSection) {
  GgufWriter w;
  w.add_string("general.name", "x");
  w.alignment = 1;  // no padding: the file ends right after the metadata
  const std::vector<unsigned char> bytes = w.bytes();
  ASSERT_NE(bytes.size() % 32, 0u);
  gguf::File file;
  ASSERT_TRUE(open_bytes(bytes, &file).ok());
  EXPECT_TRUE(file.tensors.empty());
}

TEST_F(GgufFileTest, DefaultAlignmentIs32) {
  GgufWriter w = model();
  w.add_string("general.name", "odd");  // a header length that needs padding
  uint64_t data_offset = 0;
  const std::vector<unsigned char> bytes = w.bytes(&data_offset);
  gguf::File file;
  ASSERT_TRUE(open_bytes(bytes, &file).ok());
  EXPECT_EQ(file.parts[0].alignment, 32u);
  EXPECT_EQ(file.parts[0].data_offset, data_offset);
  EXPECT_EQ(data_offset % 32, 0u);
  for (const gguf::TensorInfo& t : file.tensors) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  EXPECT_EQ(file.tensors[1].offset, 192u);  // after 5 blocks of Q8_0 (170 bytes), padded
}

TEST_F(GgufFileTest, GeneralAlignmentIsHonoured) {
  GgufWriter w = model();
  w.set_alignment(256);
  uint64_t data_offset = 0;
  const std::vector<unsigned char> bytes = w.bytes(&data_offset);
  gguf::File file;
  ASSERT_TRUE(open_bytes(bytes, &file).ok());
  EXPECT_EQ(file.parts[0].alignment, 256u);
  EXPECT_EQ(file.parts[0].data_offset, data_offset);
  EXPECT_EQ(data_offset % 256, 0u);
  EXPECT_EQ(file.tensors[1].offset, 256u);
  EXPECT_EQ(file.tensors[2].offset, 512u);
  EXPECT_EQ(std::memcmp(file.tensor_data(file.tensors[2]), w.tensors[2].data.data(),
                        w.tensors[2].data.size()),
            0);
}

TEST_F(GgufFileTest, AlignmentMustBeAU32PowerOfTwo) {
  GgufWriter zero = model();
  zero.add_u32("general.alignment", 0);
  EXPECT_TRUE(refused(zero, StatusCode::kCorruptModel, {"general.alignment", "is 0"}));
  GgufWriter odd = model();
  odd.add_u32("general.alignment", 48);
  EXPECT_TRUE(refused(odd, StatusCode::kCorruptModel, {"general.alignment", "48", "power of two"}));
  GgufWriter wide = model();
  wide.add_u64("general.alignment", 32);
  EXPECT_TRUE(refused(wide, StatusCode::kCorruptModel, {"general.alignment", "u64", "u32"}));
}

// A model split in three parts of two tensors each, as llama.cpp's
// gguf-split writes it: the metadata in part 1, the split keys in all.
class GgufSplitTest : public GgufFileTest {
 protected:
  static constexpr int kParts = 3;

  // The parts' writers; `damage` may change part i's before it is written.
  std::vector<std::string> write_split(
      const std::function<void(int, GgufWriter&)>& damage = nullptr) {
    std::vector<std::string> paths;
    for (int i = 0; i < kParts; ++i) {
      GgufWriter w = part_writer(i);
      if (damage) damage(i, w);
      paths.push_back(w.write(gguf::split_path(path("model"), i + 1, kParts)));
    }
    return paths;
  }

  static GgufWriter part_writer(int i) {
    GgufWriter w;
    if (i == 0) {
      w.add_string("general.architecture", "llama");
      w.add_u32("llama.block_count", 3);
    }
    w.add_u16(gguf::kSplitNoKey, static_cast<uint16_t>(i));
    w.add_u16(gguf::kSplitCountKey, kParts);
    w.add_i32(gguf::kSplitTensorsCountKey, 2 * kParts);
    w.add_tensor("blk." + std::to_string(i) + ".attn_norm.weight", {32}, ggml::Type::kF32);
    w.add_tensor("blk." + std::to_string(i) + ".ffn_down.weight", {64, 2}, ggml::Type::kQ5_0);
    return w;
  }

  ::testing::AssertionResult split_refused(StatusCode code,
                                           const std::vector<std::string>& needles) {
    gguf::File file;
    return check_refusal(gguf::open(gguf::split_path(path("model"), 1, kParts), &file), code,
                         needles);
  }
};

TEST_F(GgufSplitTest, ThreePartsOpenAsOneModel) {
  const std::vector<std::string> paths = write_split();
  for (const std::string& given : paths) {  // any part's name opens them all
    gguf::File file;
    const Status st = gguf::open(given, &file);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(file.parts.size(), 3u);
    for (int i = 0; i < kParts; ++i) EXPECT_EQ(file.parts[i].path, paths[i]);
    std::string arch;
    ASSERT_TRUE(file.metadata().get_string("general.architecture", &arch).ok());
    EXPECT_EQ(arch, "llama");
    ASSERT_EQ(file.tensors.size(), 6u);
    for (int i = 0; i < kParts; ++i) {
      const GgufWriter w = part_writer(i);
      for (const testing::GgufTensorSpec& spec : w.tensors) {
        const gguf::TensorInfo* t = file.find_tensor(spec.name);
        ASSERT_NE(t, nullptr) << spec.name;
        EXPECT_EQ(t->part, static_cast<uint32_t>(i));
        ASSERT_EQ(t->size, spec.data.size());
        EXPECT_EQ(std::memcmp(file.tensor_data(*t), spec.data.data(), t->size), 0) << spec.name;
      }
    }
  }
}

TEST_F(GgufSplitTest, SplitNamesParse) {
  gguf::SplitName name;
  ASSERT_TRUE(gguf::parse_split_name("/m/qwen-00002-of-00010.gguf", &name));
  EXPECT_EQ(name.prefix, "/m/qwen");
  EXPECT_EQ(name.part, 2u);
  EXPECT_EQ(name.count, 10u);
  EXPECT_EQ(gguf::split_path(name.prefix, 3, 10), "/m/qwen-00003-of-00010.gguf");
  for (const char* plain : {"/m/qwen.gguf", "/m/qwen-2-of-10.gguf", "/m/qwen-00011-of-00010.gguf",
                            "/m/qwen-00000-of-00010.gguf", "/m/qwen-0000a-of-00010.gguf",
                            "/m/qwen-00001-of-00010.bin"}) {
    EXPECT_FALSE(gguf::parse_split_name(plain, &name)) << plain;
  }
}

TEST_F(GgufSplitTest, AMissingPartIsNamed) {
  const std::vector<std::string> paths = write_split();
  fs::remove(paths[2]);
  EXPECT_TRUE(split_refused(StatusCode::kNotFound, {"part 3 of 3", paths[2]}));
}

TEST_F(GgufSplitTest, ADamagedPartIsNamed) {
  const std::vector<std::string> paths = write_split([](int i, GgufWriter& w) {
    if (i == 1) w.tensors[0].n_dims = 7;
  });
  EXPECT_TRUE(split_refused(StatusCode::kCorruptModel, {"part 2 of 3", paths[1], "n_dims 7"}));
}

TEST_F(GgufSplitTest, AWrongSplitNoIsNamed) {
  const std::vector<std::string> paths = write_split([](int i, GgufWriter& w) {
    if (i != 2) return;
    w.kvs.erase(w.kvs.begin());  // split.no
    w.add_u16(gguf::kSplitNoKey, 1);
  });
  EXPECT_TRUE(split_refused(StatusCode::kCorruptModel, {paths[2], "split.no is 1", "part 3"}));
}

TEST_F(GgufSplitTest, AWrongSplitCountIsNamed) {
  const std::vector<std::string> paths = write_split([](int i, GgufWriter& w) {
    if (i != 1) return;
    w.kvs.erase(w.kvs.begin() + 1);
    w.add_u16(gguf::kSplitCountKey, 4);
  });
  EXPECT_TRUE(split_refused(StatusCode::kCorruptModel, {paths[1], "split.count is 4"}));
}

TEST_F(GgufSplitTest, SplitTensorCountsMustAgreeAndAddUp) {
  std::vector<std::string> paths = write_split([](int i, GgufWriter& w) {
    if (i != 2) return;
    w.kvs.pop_back();
    w.add_i32(gguf::kSplitTensorsCountKey, 7);
  });
  EXPECT_TRUE(split_refused(StatusCode::kCorruptModel,
                            {paths[2], "split.tensors.count is 7", "part 1 says 6"}));
  paths = write_split([](int, GgufWriter& w) {
    w.kvs.pop_back();
    w.add_u32(gguf::kSplitTensorsCountKey, 5);  // any integer width, but the wrong total
  });
  EXPECT_TRUE(split_refused(StatusCode::kCorruptModel,
                            {paths[0], "split.tensors.count is 5", "hold 6 tensors"}));
}

TEST_F(GgufSplitTest, APartWithoutSplitKeysIsNamed) {
  const std::vector<std::string> paths = write_split([](int i, GgufWriter& w) {
    if (i == 1) w.kvs.clear();
  });
  EXPECT_TRUE(
      split_refused(StatusCode::kCorruptModel, {paths[1], "part 2 of 3", "lacks split.no"}));
}

TEST_F(GgufSplitTest, ATensorInTwoPartsIsNamed) {
  const std::vector<std::string> paths = write_split([](int i, GgufWriter& w) {
    if (i == 2) w.tensors[1].name = "blk.0.attn_norm.weight";
  });
  EXPECT_TRUE(
      split_refused(StatusCode::kCorruptModel, {"'blk.0.attn_norm.weight'", paths[2], paths[0]}));
}

TEST_F(GgufSplitTest, APlainNameWithSplitCountIsRefused) {
  GgufWriter w = part_writer(0);
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"model.gguf", "split.count is 3"}));
}

TEST_F(GgufFileTest, TruncatedAnywhereIsRefusedNamingWhatWasCut) {
  GgufWriter w = model();
  w.add_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "a"});
  w.add_array<float>("tokenizer.ggml.scores", ValueType::kF32, {0, 0, -1});
  uint64_t data_offset = 0;
  const std::vector<unsigned char> bytes = w.bytes(&data_offset);
  // Where the tensor infos end: the same file with no data and no padding.
  GgufWriter header = w;
  header.alignment = 1;
  for (testing::GgufTensorSpec& t : header.tensors) t.data.clear();
  const size_t header_end = header.bytes().size();
  ASSERT_LT(header_end, data_offset);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    gguf::File file;
    const Status st =
        open_bytes(std::vector<unsigned char>(bytes.begin(), bytes.begin() + cut), &file);
    ASSERT_EQ(st.code(), StatusCode::kCorruptModel) << cut << ": " << st.message();
    if (cut < header_end) {
      EXPECT_TRUE(st.message().find(" of " + std::to_string(cut) + " reading") !=
                      std::string::npos ||
                  st.message().find("bytes left in the file") != std::string::npos)
          << cut << ": " << st.message();
    } else {
      EXPECT_NE(st.message().find("past the end of the data section"), std::string::npos)
          << cut << ": " << st.message();
    }
  }
  // A few cuts name their field.
  const std::pair<size_t, std::string> fields[] = {{2, "the magic"},
                                                   {6, "the version"},
                                                   {12, "the header's tensor count"},
                                                   {20, "the header's metadata count"}};
  for (const auto& [cut, field] : fields) {
    gguf::File file;
    const Status st =
        open_bytes(std::vector<unsigned char>(bytes.begin(), bytes.begin() + cut), &file);
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  }
}

TEST_F(GgufFileTest, CountsPastTheFileAreRefusedBeforeAllocating) {
  GgufWriter w = model();
  w.tensor_count = kU64Max;
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"tensor count 18446744073709551615"}));
  w = model();
  w.kv_count = kU64Max;
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"metadata count 18446744073709551615"}));
}

TEST_F(GgufFileTest, LengthsPastTheFileAreRefusedBeforeAllocating) {
  GgufWriter w = model();
  w.kvs[1].key_length = kU64Max;
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel,
                      {"the key of metadata entry 1", "length 18446744073709551615"}));
  w = model();
  std::vector<unsigned char> value;
  testing::gguf_put_u64(&value, uint64_t{1} << 63);
  w.add_raw("general.name", static_cast<uint32_t>(ValueType::kString), value);
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"the value of 'general.name'", "length"}));
  w = model();
  w.add_raw_array("tokenizer.ggml.scores", static_cast<uint32_t>(ValueType::kF32), kU64Max / 2, {});
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'tokenizer.ggml.scores'", "array of"}));
  w = model();
  w.add_raw_array("tokenizer.ggml.tokens", static_cast<uint32_t>(ValueType::kString),
                  uint64_t{1} << 61, {});
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'tokenizer.ggml.tokens'", "strings"}));
  w = model();
  std::vector<unsigned char> element;
  testing::gguf_put_u64(&element, kU64Max - 3);
  w.add_raw_array("tokenizer.ggml.merges", static_cast<uint32_t>(ValueType::kString), 1, element);
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"element 0 of 'tokenizer.ggml.merges'"}));
  w = model();
  w.tensors[2].name_length = kU64Max;
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"the name of tensor 2"}));
}

TEST_F(GgufFileTest, UnknownValueTypesAreRefused) {
  GgufWriter w = model();
  w.add_raw("general.oddity", 13, {0, 0, 0, 0});
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'general.oddity'", "value type 13"}));
  w = model();
  w.add_raw_array("general.oddities", 0x80000000u, 1, {0});
  EXPECT_TRUE(
      refused(w, StatusCode::kCorruptModel, {"'general.oddities'", "value type 2147483648"}));
}

TEST_F(GgufFileTest, ArraysOfArraysAreRefusedByName) {
  GgufWriter w = model();
  std::vector<unsigned char> inner;
  testing::gguf_put_u32(&inner, static_cast<uint32_t>(ValueType::kU8));
  testing::gguf_put_u64(&inner, 1);
  inner.push_back(7);
  w.add_raw_array("general.nested", static_cast<uint32_t>(ValueType::kArray), 1, inner);
  EXPECT_TRUE(refused(w, StatusCode::kUnsupported, {"'general.nested'", "array of arrays"}));
}

TEST_F(GgufFileTest, BoolsOtherThan0Or1AreRefused) {
  GgufWriter w = model();
  w.add_raw("general.flag", static_cast<uint32_t>(ValueType::kBool), {2});
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'general.flag'", "stored as 2"}));
  w = model();
  w.add_array<uint8_t>("general.flags", ValueType::kBool, {0, 1, 255});
  EXPECT_TRUE(
      refused(w, StatusCode::kCorruptModel, {"'general.flags'", "element 2", "stored as 255"}));
}

TEST_F(GgufFileTest, DuplicateKeysAreRefused) {
  GgufWriter w = model();
  w.add_u32("llama.block_count", 2);
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'llama.block_count'", "twice"}));
}

TEST_F(GgufFileTest, DuplicateTensorNamesAreRefused) {
  GgufWriter w = model();
  w.tensors[2].name = "token_embd.weight";
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel,
                      {"'token_embd.weight'", "twice", "tensor infos 0 and 2"}));
}

TEST_F(GgufFileTest, NDimsOutsideOneToFourAreRefused) {
  for (uint32_t n_dims : {0u, 5u, 0xffffffffu}) {
    GgufWriter w = model();
    w.tensors[1].n_dims = n_dims;
    EXPECT_TRUE(refused(w, StatusCode::kCorruptModel,
                        {"'blk.0.attn_norm.weight'", "n_dims " + std::to_string(n_dims)}));
  }
}

TEST_F(GgufFileTest, ZeroAndHugeDimensionsAreRefused) {
  GgufWriter w = model();
  w.tensors[0].dims = {32, 0};
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'token_embd.weight'", "dimension 1 = 0"}));
  w = model();
  w.tensors[0].dims = {32, uint64_t{1} << 63};
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel,
                      {"'token_embd.weight'", "dimension 1 = 9223372036854775808"}));
  w = model();
  w.tensors[0].dims = {uint64_t{1} << 32, uint64_t{1} << 31};
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'token_embd.weight'", "overflows int64"}));
}

TEST_F(GgufFileTest, ByteSizesPast64BitsAreRefused) {
  GgufWriter w = model();
  w.tensors[1].dims = {uint64_t{1} << 61, 2};  // 2^62 elements, 2^64 bytes of f32
  EXPECT_TRUE(
      refused(w, StatusCode::kCorruptModel, {"'blk.0.attn_norm.weight'", "F32", "64 bits"}));
}

TEST_F(GgufFileTest, RowsThatAreNotWholeBlocksAreRefused) {
  GgufWriter w = model();
  w.tensors[0].dims = {48, 5};  // Q8_0's block is 32
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"'token_embd.weight'", "Q8_0", "48"}));
}

TEST_F(GgufFileTest, UnknownGgmlTypesAreRefusedByNumber) {
  for (uint32_t id : {4u, 31u, 42u, 99u}) {
    GgufWriter w = model();
    w.tensors[2].type = id;
    EXPECT_TRUE(refused(w, StatusCode::kUnsupported,
                        {"'output.weight'", "ggml type id " + std::to_string(id)}));
  }
}

TEST_F(GgufFileTest, MisalignedOffsetsAreRefused) {
  GgufWriter w = model();
  w.tensors[1].offset = 193;
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel,
                      {"'blk.0.attn_norm.weight'", "data offset 193", "alignment 32"}));
}

TEST_F(GgufFileTest, OffsetsPastTheEndAreRefused) {
  for (uint64_t offset : {uint64_t{1} << 40, kU64Max - 31}) {
    GgufWriter w = model();
    w.tensors[2].offset = offset;
    EXPECT_TRUE(refused(w, StatusCode::kCorruptModel,
                        {"'output.weight'", "data offset " + std::to_string(offset),
                         "past the end of the data section"}));
  }
}

TEST_F(GgufFileTest, OverlappingTensorsAreRefused) {
  GgufWriter w = model();
  w.tensors[2].offset = 256;  // inside blk.0.attn_norm.weight's 128 bytes at 192
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel,
                      {"'blk.0.attn_norm.weight'", "'output.weight'", "overlap"}));
  w = model();
  w.tensors[0].offset = 192;  // the same place as blk.0.attn_norm.weight
  w.tensors[1].offset = 192;
  EXPECT_TRUE(refused(w, StatusCode::kCorruptModel, {"overlap"}));
}

TEST_F(GgufFileTest, UnservedTypesParseAndAreListed) {
  GgufWriter w = model();
  w.add_tensor("a", {256}, ggml::Type::kTQ1_0);
  w.add_tensor("b", {4}, ggml::Type::kI32);
  w.add_tensor("c", {32}, ggml::Type::kQ8_1);
  w.add_tensor("d", {8}, ggml::Type::kI32);
  const gguf::File file = open_or_die(w);
  const std::vector<gguf::UnservedType> unserved = gguf::unserved_types(file);
  ASSERT_EQ(unserved.size(), 3u);
  EXPECT_EQ(unserved[0].type, ggml::Type::kQ8_1);
  EXPECT_EQ(unserved[0].first_tensor, "c");
  EXPECT_EQ(unserved[1].type, ggml::Type::kI32);
  EXPECT_EQ(unserved[1].num_tensors, 2u);
  EXPECT_EQ(unserved[1].first_tensor, "b");
  EXPECT_EQ(unserved[2].type, ggml::Type::kTQ1_0);
  EXPECT_TRUE(gguf::unserved_types(open_or_die(model())).empty());
}

TEST_F(GgufFileTest, HostileNamesAreQuotedShortAndPrintable) {
  GgufWriter w = model();
  w.tensors[0].name = std::string(1000, 'n') + "\x01";
  w.tensors[0].dims = {33, 5};
  gguf::File file;
  const Status st = open(w, &file);
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel);
  EXPECT_LT(st.message().size(), 500u) << st.message();
  EXPECT_EQ(st.message().find('\x01'), std::string::npos);
}

}  // namespace
}  // namespace pvllm
