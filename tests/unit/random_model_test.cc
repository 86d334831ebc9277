// Random-weight models of standard shapes: the configs match the published
// models, sizes are known without allocating, weights are seeded and have
// the intended distribution.
#include "core/model/random_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

namespace pvllm {
namespace {

// Parameters of a Llama decoder with untied embeddings, counted by hand.
int64_t llama_params(int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads,
                     int64_t vocab) {
  const int64_t head_dim = hidden / heads;
  const int64_t attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2;
  const int64_t mlp = 3 * hidden * inter;
  return 2 * vocab * hidden + layers * (attn + mlp + 2 * hidden) + hidden;
}

TEST(RandomModelTest, TinyLlamaShapeMatchesThePublishedConfig) {
  ModelSummary s;
  ASSERT_TRUE(inspect_random_model("tinyllama-1.1b", DType::kBF16, &s).ok());
  EXPECT_EQ(s.config.hidden_size, 2048);
  EXPECT_EQ(s.config.intermediate_size, 5632);
  EXPECT_EQ(s.config.num_layers, 22);
  EXPECT_EQ(s.config.num_heads, 32);
  EXPECT_EQ(s.config.num_kv_heads, 4);
  EXPECT_EQ(s.config.head_dim, 64);
  EXPECT_EQ(s.config.vocab_size, 32000);
  EXPECT_EQ(s.config.max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(s.config.rope_theta, 10000.0f);
  EXPECT_FALSE(s.config.tie_word_embeddings);
  // TinyLlama-1.1B has 1,100,048,384 parameters.
  EXPECT_EQ(s.weight_bytes, size_t{1100048384} * 2);
  EXPECT_EQ(s.tensors.size(), size_t{2 + 22 * 9 + 1});
}

TEST(RandomModelTest, LargeShapesHaveTheirParameterCountsWithoutAllocating) {
  ModelSummary s;
  ASSERT_TRUE(inspect_random_model("llama-2-7b", DType::kBF16, &s).ok());
  EXPECT_EQ(s.config.num_kv_heads, 32);
  EXPECT_EQ(s.config.max_position_embeddings, 4096);
  EXPECT_EQ(s.weight_bytes, size_t{6738415616} * 2);  // Llama 2 7B: 6.74B parameters
  ASSERT_TRUE(inspect_random_model("llama-3-8b", DType::kBF16, &s).ok());
  EXPECT_EQ(s.config.intermediate_size, 14336);
  EXPECT_EQ(s.config.num_kv_heads, 8);
  EXPECT_EQ(s.config.vocab_size, 128256);
  EXPECT_EQ(s.config.max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(s.config.rope_theta, 500000.0f);
  EXPECT_EQ(s.config.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(s.weight_bytes, size_t{8030261248} * 2);  // Llama 3 8B: 8.03B parameters
  EXPECT_EQ(static_cast<int64_t>(s.weight_bytes), 2 * llama_params(4096, 14336, 32, 32, 8, 128256));
}

TEST(RandomModelTest, UnknownShapeIsInvalidArgumentListingTheKnownOnes) {
  std::unique_ptr<Model> model;
  const Status st = make_random_model("gpt-5", DType::kBF16, 0, &model);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  for (const std::string& name : random_model_shapes()) {
    EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
  }
  EXPECT_EQ(model, nullptr);
}

TEST(RandomModelTest, TinyBuildsWithTheSizesTheEstimatePredicts) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(make_random_model("tiny", DType::kBF16, 0, &model).ok());
  ModelSummary s;
  ASSERT_TRUE(inspect_random_model("tiny", DType::kBF16, &s).ok());
  EXPECT_EQ(model->weight_bytes(), s.weight_bytes);
  EXPECT_EQ(model->config.hidden_size, 64);
  EXPECT_EQ(model->config.num_layers, 2);
  EXPECT_EQ(model->config.num_heads, 4);
  EXPECT_EQ(model->config.num_kv_heads, 2);
  EXPECT_EQ(model->config.vocab_size, 512);
  EXPECT_EQ(model->config.max_position_embeddings, 2048);
  EXPECT_TRUE(model->tokenizer_path.empty());
  ASSERT_EQ(model->weights.layers.size(), 2u);
  EXPECT_EQ(model->weights.layers[1].wk.shape, (std::vector<int64_t>{2 * 16, 64}));
  EXPECT_NE(model->weights.embed.data, model->weights.lm_head.data);
}

TEST(RandomModelTest, SameSeedGivesIdenticalWeightsAndAnotherSeedDiffers) {
  std::unique_ptr<Model> a, b, c;
  ASSERT_TRUE(make_random_model("tiny", DType::kBF16, 7, &a).ok());
  ASSERT_TRUE(make_random_model("tiny", DType::kBF16, 7, &b).ok());
  ASSERT_TRUE(make_random_model("tiny", DType::kBF16, 8, &c).ok());
  const Tensor& ta = a->weights.layers[0].w_up;
  const Tensor& tb = b->weights.layers[0].w_up;
  const Tensor& tc = c->weights.layers[0].w_up;
  EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes()), 0);
  EXPECT_NE(std::memcmp(ta.data, tc.data, ta.nbytes()), 0);
  // Different tensors of one model are not copies of each other.
  const Tensor& gate = a->weights.layers[0].w_gate;
  EXPECT_NE(std::memcmp(ta.data, gate.data, ta.nbytes()), 0);
}

TEST(RandomModelTest, MatricesAreNormalWithStd002AndNormsAreOne) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(make_random_model("tiny", DType::kF32, 0, &model).ok());
  const Tensor& e = model->weights.embed;  // 512 x 64 = 32768 values
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < e.numel(); ++i) {
    const double v = load_as_float(e.dtype, e.data, i);
    sum += v;
    sum_sq += v * v;
  }
  const double mean = sum / e.numel();
  const double std = std::sqrt(sum_sq / e.numel() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(std, 0.02, 0.001);
  const Tensor& norm = model->weights.layers[1].ffn_norm;
  for (int64_t i = 0; i < norm.numel(); ++i) {
    ASSERT_EQ(load_as_float(norm.dtype, norm.data, i), 1.0f);
  }
}

}  // namespace
}  // namespace pvllm
