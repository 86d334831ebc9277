// The quantizers against ggml's: every tensor of every GGUF fixture was
// made from its family's F32 file's tensor of the same name
// (stories260K-F32.gguf, tiny-qwen2-F32.gguf, tiny-qwen3-F32.gguf) by
// ggml's quantizers without an importance matrix (llama-quantize, or
// ggml_quantize_chunk in gguf_quantize_pure: tests/data/gguf/SOURCE.md),
// and ggml-type-zoo.gguf's tensors from its own `source` rows. Quantizing
// those floats here must give the same bytes (raw_sha256), for every type:
// the 12 block types and the F16/BF16 conversions. Plus the properties a
// quantizer must have on any input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/quant/dequantize.h"
#include "core/quant/quantize.h"
#include "tests/unit/quant_fixtures.h"

namespace pvllm::quant {
namespace {

using quant_test::dtype_of;
using quant_test::gguf_dir;
using quant_test::gguf_fixtures;
using quant_test::sha256_hex;
using quant_test::tensor_refs;

// Quantizes `source` (F32 values) to `target`'s type and shape and checks
// the bytes; counts the tensors checked by type.
void expect_same_bytes(const gguf::File& source_file, const gguf::TensorInfo& source,
                       const gguf::File& target_file, const gguf::TensorInfo& target,
                       const std::string& raw_sha256, std::map<DType, int>* counts) {
  SCOPED_TRACE(target.name);
  ASSERT_EQ(source.type, ggml::Type::kF32);
  ASSERT_EQ(source.num_elements(), target.num_elements());
  DType dtype;
  ASSERT_TRUE(dtype_of(target.type, &dtype));
  std::vector<float> x(static_cast<size_t>(source.num_elements()));
  std::memcpy(x.data(), source_file.tensor_data(source), x.size() * sizeof(float));
  std::vector<unsigned char> ours(target.size);
  // Row by row, as the row width is what the block grid follows.
  const int64_t cols = target.dims[0];
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  ASSERT_EQ(row_bytes * static_cast<size_t>(target.num_elements() / cols), target.size);
  for (int64_t r = 0; r < target.num_elements() / cols; ++r) {
    const Status st = quantize_row(dtype, x.data() + r * cols, cols, ours.data() + r * row_bytes);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  const unsigned char* theirs = target_file.tensor_data(target);
  if (std::memcmp(ours.data(), theirs, ours.size()) != 0) {
    size_t i = 0;
    while (ours[i] == theirs[i]) ++i;
    ADD_FAILURE() << dtype_name(dtype) << ": first differing byte " << i << " (block "
                  << i / dtype_block_bytes(dtype) << ", byte " << i % dtype_block_bytes(dtype)
                  << "): ours " << int(ours[i]) << ", ggml's " << int(theirs[i]);
    return;
  }
  EXPECT_EQ(sha256_hex(ours.data(), ours.size()), raw_sha256);
  ++(*counts)[dtype];
}

// The F32 file fixture `name` was quantized from: its family's.
std::string source_of(const std::string& name) {
  for (const char* family : {"tiny-qwen2-", "tiny-qwen3-"}) {
    if (name.rfind(family, 0) == 0) return std::string(family) + "F32.gguf";
  }
  return "stories260K-F32.gguf";
}

TEST(QuantQuantizeTest, EveryFixtureTensorIsRemadeByteForByte) {
  const std::vector<std::string> files = gguf_fixtures();
  if (files.empty()) GTEST_SKIP() << "PVLLM_TEST_DATA names no tests/data folder";
  std::map<std::string, gguf::File> sources;  // by file name
  std::map<DType, int> counts;
  for (const std::string& name : files) {
    SCOPED_TRACE(name);
    gguf::File file;
    ASSERT_TRUE(gguf::open(gguf_dir() + "/" + name, &file).ok());
    const bool zoo = name == "ggml-type-zoo.gguf";
    const std::string source_name = source_of(name);
    if (!zoo && sources.count(source_name) == 0) {
      ASSERT_TRUE(gguf::open(gguf_dir() + "/" + source_name, &sources[source_name]).ok());
    }
    const gguf::File& f32 = zoo ? file : sources.at(source_name);
    const nlohmann::json ref = tensor_refs(name);
    ASSERT_FALSE(ref.at("tensors").empty());
    for (const nlohmann::json& r : ref.at("tensors")) {
      const gguf::TensorInfo* target = file.find_tensor(r.at("name").get<std::string>());
      ASSERT_NE(target, nullptr);
      const gguf::File& source_file = zoo ? file : f32;
      const gguf::TensorInfo* source = source_file.find_tensor(zoo ? "source" : target->name);
      ASSERT_NE(source, nullptr) << target->name;
      expect_same_bytes(source_file, *source, file, *target, r.at("raw_sha256").get<std::string>(),
                        &counts);
    }
  }
  // Every type remade at least once (the zoo), and the -pure files' 32
  // quantized tensors each.
  EXPECT_EQ(counts.size(), static_cast<size_t>(kNumDTypes));
  for (int t = 0; t < kNumDTypes; ++t) {
    EXPECT_GE(counts[static_cast<DType>(t)], 1) << dtype_name(static_cast<DType>(t));
  }
  for (DType t :
       {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL}) {
    EXPECT_GE(counts[t], 32 + 1) << dtype_name(t);
  }
}

// Any input, any type: an all-zero row comes back zero, and a random row
// comes back within a per-type relative RMS error (measured on these rows,
// with room: a quantizer that scrambles codes or scales fails by far).
TEST(QuantQuantizeTest, RoundTripsStayClose) {
  const std::map<DType, double> max_relative_rms = {
      {DType::kQ8_0, 0.006}, {DType::kQ4_0, 0.12},  {DType::kQ4_1, 0.09},  {DType::kQ5_0, 0.06},
      {DType::kQ5_1, 0.045}, {DType::kIQ4_NL, 0.1}, {DType::kQ2_K, 0.4},   {DType::kQ3_K, 0.2},
      {DType::kQ4_K, 0.1},   {DType::kQ5_K, 0.05},  {DType::kQ6_K, 0.025}, {DType::kIQ4_XS, 0.1},
  };
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t n = 4096;
  std::vector<float> x(n), back(n);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(rng) * (i % 512 < 256 ? 0.02f : 3.0f);
  for (const auto& [dtype, limit] : max_relative_rms) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<unsigned char> q(dtype_row_bytes(dtype, n));
    ASSERT_TRUE(quantize_row(dtype, x.data(), n, q.data()).ok());
    dequantize_row(dtype, q.data(), n, back.data());
    // Per 256 values (a scale's reach), so small and large stretches count alike.
    for (int64_t s = 0; s < n; s += 256) {
      double err2 = 0, ref2 = 0;
      for (int64_t i = s; i < s + 256; ++i) {
        err2 += (double(x[i]) - back[i]) * (double(x[i]) - back[i]);
        ref2 += double(x[i]) * x[i];
      }
      EXPECT_LE(std::sqrt(err2 / ref2), limit) << "values " << s << "..";
    }
    std::vector<float> zeros(n, 0.0f);
    ASSERT_TRUE(quantize_row(dtype, zeros.data(), n, q.data()).ok());
    dequantize_row(dtype, q.data(), n, back.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 0.0f) << i;
  }
}

TEST(QuantQuantizeTest, RefusesPartialBlocksAndUnknownTypes) {
  std::vector<float> x(300, 1.0f);
  std::vector<unsigned char> out(1024, 0xAB);
  EXPECT_EQ(quantize_row(DType::kQ4_K, x.data(), 300, out.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize_row(DType::kQ8_0, x.data(), 33, out.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize_row(static_cast<DType>(kNumDTypes), x.data(), 32, out.data()).code(),
            StatusCode::kUnsupported);
  EXPECT_FALSE(can_quantize(static_cast<DType>(kNumDTypes)));
  for (unsigned char b : out) ASSERT_EQ(b, 0xAB);  // untouched
}

}  // namespace
}  // namespace pvllm::quant
