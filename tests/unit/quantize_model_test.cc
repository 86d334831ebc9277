// Quantizing a loaded model (core/model/quantize_model.h) against
// llama.cpp's llama-quantize: the F32 stories260K GGUF quantized by pvllm's
// recipe must give, tensor by tensor, the types and the very bytes of the
// files llama-quantize made from it (tests/data/gguf). Also the recipe's
// choices, the memory estimate against what quantizing allocates, and the
// refusals.
#include "core/model/quantize_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/model/gguf_file.h"
#include "core/model/gguf_model.h"
#include "core/model/model.h"
#include "core/model/pvllm_writer.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

std::string gguf_dir() {
  const char* dir = std::getenv("PVLLM_TEST_DATA");
  return dir != nullptr ? std::string(dir) + "/gguf" : std::string();
}

// Every tensor of `model` by the GGUF name it was loaded under.
void for_each_named(const Model& m, const std::function<void(const Tensor&)>& fn) {
  m.for_each_weight(fn);
}

struct Recipe {
  const char* scheme;
  const char* made_by_llama_cpp;  // the file llama-quantize made from the F32 one
};

class QuantizeLikeLlamaCpp : public ::testing::TestWithParam<Recipe> {};

TEST_P(QuantizeLikeLlamaCpp, SameTypesAndBytes) {
  const std::string dir = gguf_dir();
  if (dir.empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  std::unique_ptr<Model> ours;
  ASSERT_TRUE(load_model(dir + "/stories260K-F32.gguf", &ours).ok());
  const Status q = quantize_model(ours.get(), GetParam().scheme, 2);
  ASSERT_TRUE(q.ok()) << q.message();
  gguf::File theirs;
  ASSERT_TRUE(gguf::open(dir + "/" + GetParam().made_by_llama_cpp, &theirs).ok());
  size_t compared = 0;
  for_each_named(*ours, [&](const Tensor& t) {
    const gguf::TensorInfo* info = theirs.find_tensor(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    DType want;
    ASSERT_TRUE(dtype_of_ggml(info->type, &want)) << t.name;
    EXPECT_EQ(dtype_name(t.dtype), std::string(dtype_name(want))) << t.name;
    if (t.dtype != want) return;
    ASSERT_EQ(t.nbytes(), info->size) << t.name;
    EXPECT_EQ(std::memcmp(t.data, theirs.tensor_data(*info), info->size), 0)
        << t.name << ": pvllm's " << dtype_name(t.dtype) << " bytes differ from llama-quantize's";
    ++compared;
  });
  EXPECT_EQ(compared, theirs.tensors.size());
}

INSTANTIATE_TEST_SUITE_P(Files, QuantizeLikeLlamaCpp,
                         ::testing::Values(Recipe{"q4_k_m", "stories260K-Q4_K_M.gguf"},
                                           Recipe{"q5_k_m", "stories260K-Q5_K_M.gguf"},
                                           Recipe{"q6_k", "stories260K-Q6_K.gguf"}),
                         [](const auto& info) { return std::string(info.param.scheme); });

TEST(QuantizeRecipe, MoreBitsWhereLlamaQuantizePutsThem) {
  // 32 layers: the first and last four, then every third from layer 6.
  auto type = [](const std::string& name, int layer, bool output = false, int64_t cols = 4096) {
    DType t = DType::kF32;
    EXPECT_TRUE(quantize_type_for("q4_k_m", name, cols, layer, 32, output, &t).ok());
    return std::string(dtype_name(t));
  };
  EXPECT_EQ(type("model.layers.0.self_attn.v_proj.weight", 0), "Q6_K");
  EXPECT_EQ(type("model.layers.4.self_attn.v_proj.weight", 4), "Q4_K");
  EXPECT_EQ(type("model.layers.6.self_attn.v_proj.weight", 6), "Q6_K");
  EXPECT_EQ(type("blk.7.ffn_down.weight", 7), "Q4_K");
  EXPECT_EQ(type("blk.9.ffn_down.weight", 9), "Q6_K");
  EXPECT_EQ(type("blk.28.attn_q.weight", 28), "Q4_K");
  EXPECT_EQ(type("blk.28.attn_v.weight", 28), "Q6_K");
  EXPECT_EQ(type("output.weight", -1, true), "Q6_K");
  EXPECT_EQ(type("token_embd.weight", -1), "Q4_K");
  // Rows that are not whole super-blocks fall back.
  EXPECT_EQ(type("blk.5.attn_q.weight", 5, false, 64), "Q5_0");
  EXPECT_EQ(type("output.weight", -1, true, 64), "Q8_0");
  EXPECT_EQ(type("blk.5.attn_q.weight", 5, false, 172), "F16");
  DType t;
  const Status bad = quantize_type_for("q3_k_xl", "x", 256, 0, 1, false, &t);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("q4_k_m"), std::string::npos) << bad.message();
}

TEST(QuantizeModel, EstimateEqualsWhatQuantizingLeaves) {
  const std::string dir = gguf_dir();
  if (dir.empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  for (const char* scheme : {"q8_0", "q4_0", "q4_k_m", "iq4_xs"}) {
    ModelSummary summary;
    ASSERT_TRUE(inspect_model(dir + "/stories260K-F32.gguf", &summary).ok());
    size_t estimate = 0;
    ASSERT_TRUE(quantized_weight_bytes(summary, scheme, &estimate).ok());
    std::unique_ptr<Model> m;
    ASSERT_TRUE(load_model(dir + "/stories260K-F32.gguf", &m).ok());
    ASSERT_TRUE(quantize_model(m.get(), scheme, 1).ok());
    EXPECT_EQ(estimate, m->weight_bytes()) << scheme;
    EXPECT_LT(m->weight_bytes(), summary.weight_bytes) << scheme;
  }
}

TEST(QuantizeModel, RefusesQuantizedModelsAndUnknownSchemes) {
  const std::string dir = gguf_dir();
  if (dir.empty()) GTEST_SKIP() << "PVLLM_TEST_DATA is not set (ctest sets it)";
  std::unique_ptr<Model> m;
  ASSERT_TRUE(load_model(dir + "/stories260K-Q8_0-pure.gguf", &m).ok());
  const Status again = quantize_model(m.get(), "q4_0");
  EXPECT_EQ(again.code(), StatusCode::kUnsupported);
  EXPECT_NE(again.message().find("already Q8_0"), std::string::npos) << again.message();
  const Status unknown = quantize_model(m.get(), "q1");
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
}

// pvllm convert --quantize: the .pvllm file holds the very blocks that
// quantizing in memory gives, checksummed, and loads back as them.
TEST(QuantizeModel, ConvertWritesTheBlocksAndLoadsThemBack) {
  const std::string dir = testing::make_temp_dir("pvllm_quantize_convert_");
  testing::TinyModelSpec spec;
  spec.hidden_size = 64;
  spec.intermediate_size = 128;
  spec.tie_word_embeddings = false;
  const std::string hf = testing::write_tiny_hf_model(dir, spec);
  std::unique_ptr<Model> source, expected, loaded;
  ASSERT_TRUE(load_model(hf, &source).ok());
  ASSERT_TRUE(load_model(hf, &expected).ok());
  ASSERT_TRUE(quantize_model(expected.get(), "q8_0").ok());
  ConvertOptions options;
  options.quantize = "q8_0";
  const Status w = write_pvllm(source.get(), dir + "/q8.pvllm", options);
  ASSERT_TRUE(w.ok()) << w.message();
  const Status l = load_model(dir + "/q8.pvllm", &loaded);  // every checksum checked
  ASSERT_TRUE(l.ok()) << l.message();
  std::vector<const Tensor*> want, got;
  expected->for_each_weight([&](const Tensor& t) { want.push_back(&t); });
  loaded->for_each_weight([&](const Tensor& t) { got.push_back(&t); });
  ASSERT_EQ(want.size(), got.size());
  size_t quantized = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i]->dtype, got[i]->dtype) << got[i]->name;
    ASSERT_EQ(want[i]->nbytes(), got[i]->nbytes()) << got[i]->name;
    EXPECT_EQ(std::memcmp(want[i]->data, got[i]->data, got[i]->nbytes()), 0) << got[i]->name;
    quantized += dtype_is_quantized(got[i]->dtype) ? 1 : 0;
  }
  EXPECT_EQ(quantized, 2u + 7u * static_cast<size_t>(spec.num_layers));  // embed, head, 7 per layer
  ConvertOptions bad;
  bad.quantize = "q9";
  std::unique_ptr<Model> again;
  ASSERT_TRUE(load_model(hf, &again).ok());
  EXPECT_EQ(write_pvllm(again.get(), dir + "/bad.pvllm", bad).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pvllm
