// The dequantizers against ggml's own: every tensor of every GGUF fixture
// in tests/data/gguf (ggml-type-zoo.gguf holds all 15 types), dequantized
// here, must hash to the SHA-256 that ggml's to_float gave
// (ref/<file>.tensors.json, f32_sha256: little-endian floats in element
// order), i.e. be bit for bit ggml's values. Plus the block structs
// against tensor.h's table.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/quant/block_formats.h"
#include "core/quant/dequantize.h"
#include "tests/unit/quant_fixtures.h"

namespace pvllm::quant {
namespace {

using quant_test::dtype_of;
using quant_test::gguf_dir;
using quant_test::gguf_fixtures;
using quant_test::lower;
using quant_test::sha256_hex;
using quant_test::tensor_refs;

template <typename Block>
void expect_block_matches_table() {
  EXPECT_EQ(sizeof(Block), dtype_block_bytes(Block::kType)) << dtype_name(Block::kType);
  EXPECT_EQ(Block::kElems, dtype_block_elems(Block::kType)) << dtype_name(Block::kType);
  EXPECT_TRUE(dtype_is_quantized(Block::kType));
}

TEST(QuantFormatsTest, BlockStructsMatchTheDTypeTable) {
  expect_block_matches_table<BlockQ8_0>();
  expect_block_matches_table<BlockQ4_0>();
  expect_block_matches_table<BlockQ4_1>();
  expect_block_matches_table<BlockQ5_0>();
  expect_block_matches_table<BlockQ5_1>();
  expect_block_matches_table<BlockIQ4_NL>();
  expect_block_matches_table<BlockQ2_K>();
  expect_block_matches_table<BlockQ3_K>();
  expect_block_matches_table<BlockQ4_K>();
  expect_block_matches_table<BlockQ5_K>();
  expect_block_matches_table<BlockQ6_K>();
  expect_block_matches_table<BlockIQ4_XS>();
}

TEST(QuantDequantizeTest, EveryFixtureTensorIsGgmlsDequantization) {
  static_assert(std::endian::native == std::endian::little,
                "f32_sha256 hashes little-endian floats");
  const std::vector<std::string> files = gguf_fixtures();
  if (files.empty()) GTEST_SKIP() << "PVLLM_TEST_DATA names no tests/data folder";
  std::set<DType> types_seen;
  int num_tensors = 0;
  for (const std::string& name : files) {
    SCOPED_TRACE(name);
    gguf::File file;
    const Status st = gguf::open(gguf_dir() + "/" + name, &file);
    ASSERT_TRUE(st.ok()) << st.message();
    const nlohmann::json ref = tensor_refs(name);
    ASSERT_FALSE(ref.at("tensors").empty());
    for (const nlohmann::json& r : ref.at("tensors")) {
      const std::string tensor_name = r.at("name").get<std::string>();
      SCOPED_TRACE(tensor_name);
      const gguf::TensorInfo* info = file.find_tensor(tensor_name);
      ASSERT_NE(info, nullptr);
      DType dtype;
      ASSERT_TRUE(dtype_of(info->type, &dtype)) << ggml::type_name(info->type);
      ASSERT_EQ(lower(dtype_name(dtype)), lower(r.at("type").get<std::string>()));
      const unsigned char* data = file.tensor_data(*info);
      ASSERT_EQ(info->size, r.at("nbytes").get<uint64_t>());
      ASSERT_EQ(sha256_hex(data, info->size), r.at("raw_sha256").get<std::string>());

      Tensor t;
      t.dtype = dtype;
      t.data = data;
      for (auto d = info->dims.rbegin(); d != info->dims.rend(); ++d) t.shape.push_back(*d);
      ASSERT_EQ(t.nbytes(), info->size);
      std::vector<float> values(static_cast<size_t>(t.numel()));
      tensor_to_floats(t, 0, t.numel(), values.data());
      EXPECT_EQ(sha256_hex(values.data(), values.size() * sizeof(float)),
                r.at("f32_sha256").get<std::string>());
      const std::vector<float> first8 = r.at("first8").get<std::vector<float>>();
      // By value: the JSON reader takes "-0" for the integer 0 (the hash
      // above has the sign bits).
      ASSERT_EQ(first8.size(), std::min<size_t>(8, values.size()));
      for (size_t i = 0; i < first8.size(); ++i) EXPECT_EQ(values[i], first8[i]) << "element " << i;
      types_seen.insert(dtype);
      ++num_tensors;
    }
  }
  // The zoo alone has all 15 types; the fixtures 48 tensors a model file.
  EXPECT_EQ(types_seen.size(), static_cast<size_t>(kNumDTypes));
  EXPECT_GE(num_tensors, 15 * 48);
}

// A row at a time, as an embedding lookup reads: the same floats as the
// whole tensor, for every type of the zoo.
TEST(QuantDequantizeTest, RowRangesReadLikeTheWholeTensor) {
  if (gguf_dir().empty()) GTEST_SKIP() << "PVLLM_TEST_DATA names no tests/data folder";
  gguf::File file;
  ASSERT_TRUE(gguf::open(gguf_dir() + "/ggml-type-zoo.gguf", &file).ok());
  int checked = 0;
  for (const gguf::TensorInfo& info : file.tensors) {
    SCOPED_TRACE(info.name);
    Tensor t;
    ASSERT_TRUE(dtype_of(info.type, &t.dtype));
    t.data = file.tensor_data(info);
    t.shape = {info.dims[1], info.dims[0]};
    std::vector<float> whole(static_cast<size_t>(t.numel()));
    tensor_to_floats(t, 0, t.numel(), whole.data());
    const int64_t cols = t.shape[1];
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = t.shape[0] - 1; r >= 0; --r) {
      tensor_to_floats(t, r * cols, cols, row.data());
      ASSERT_EQ(std::memcmp(row.data(), whole.data() + r * cols, cols * sizeof(float)), 0)
          << "row " << r;
    }
    // The same bytes through dequantize_row, a block-aligned middle range.
    const int64_t block = dtype_block_elems(t.dtype);
    std::vector<float> part(static_cast<size_t>(block));
    dequantize_row(t.dtype,
                   static_cast<const unsigned char*>(t.data) + dtype_row_bytes(t.dtype, 3 * block),
                   block, part.data());
    EXPECT_EQ(std::memcmp(part.data(), whole.data() + 3 * block, block * sizeof(float)), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 15);
}

TEST(QuantDequantizeDeathTest, RangesOffTheBlockGridAreBrokenInvariants) {
  std::vector<unsigned char> bytes(dtype_row_bytes(DType::kQ4_K, 512));
  Tensor t;
  t.dtype = DType::kQ4_K;
  t.shape = {2, 256};
  t.data = bytes.data();
  std::vector<float> out(512);
  EXPECT_DEATH(tensor_to_floats(t, 32, 256, out.data()), "block aligned");
  EXPECT_DEATH(tensor_to_floats(t, 256, 512, out.data()), "past the tensor");
  EXPECT_DEATH(dequantize_row(DType::kQ8_0, bytes.data(), 40, out.data()), "whole number");
}

}  // namespace
}  // namespace pvllm::quant
