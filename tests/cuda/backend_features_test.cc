// The CUDA backend on the architecture features of the newer models, one
// at a time and all together, on the tiny bf16 model of backend_test.cc
// with the feature switched on in its config and its extra weights
// attached (random): q/k/v and o bias, per-head q/k RMSNorm, a sliding
// window shorter than the prompts, dynamic RoPE scaling past an original
// context shorter than the prompts. Each one must change the logits (it is
// applied, not ignored), CUDA graph replay must match eager launches (the
// new kernels capture; the per-sequence RoPE tables and -1 block-table
// entries before the window go through the graphs' static inputs), and the
// logits must match the CPU backend's wherever that backend honours the
// feature. Every test skips where no CUDA device is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/backend_loader.h"
#include "core/model/model.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/tiny_batches.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

using cuda_test::prompt;
using cuda_test::Seq;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 64;
constexpr int32_t kMaxModelLen = 256;
constexpr int32_t kWindow = 20;           // shorter than the prompts below
constexpr int32_t kOriginalContext = 32;  // dynamic RoPE grows past this
// As backend_test.cc: a few bf16 ulps of the logits' scale.
constexpr float kRelTol = 3e-2f;

enum class Feature { kBias, kQkNorm, kSlidingWindow, kDynamicRope, kAll };

const char* feature_name(Feature f) {
  switch (f) {
    case Feature::kBias:
      return "bias";
    case Feature::kQkNorm:
      return "qk_norm";
    case Feature::kSlidingWindow:
      return "sliding_window";
    case Feature::kDynamicRope:
      return "dynamic_rope";
    case Feature::kAll:
      return "all";
  }
  return "?";
}

// A tensor of `n` fp32 values drawn by `draw`, owned by `m`.
template <typename Draw>
Tensor owned_tensor(Model* m, const std::string& name, int64_t n, Draw draw) {
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    const float v = draw();
    std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(float));
  }
  m->owned_buffers.push_back(std::move(bytes));  // the heap block stays put
  Tensor t;
  t.name = name;
  t.dtype = DType::kF32;
  t.shape = {n};
  t.data = m->owned_buffers.back().data();
  return t;
}

// Switches `f` on in m's config and attaches the weights it needs.
void add_feature(Model* m, Feature f) {
  ModelConfig& c = m->config;
  const bool all = f == Feature::kAll;
  std::mt19937 rng(17);
  std::normal_distribution<float> bias(0.0f, 0.3f);
  std::uniform_real_distribution<float> scale(0.5f, 1.5f);
  const int64_t qd = int64_t{c.num_heads} * c.head_dim;
  const int64_t kvd = int64_t{c.num_kv_heads} * c.head_dim;
  for (size_t l = 0; l < m->weights.layers.size(); ++l) {
    LayerWeights& w = m->weights.layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    if (all || f == Feature::kBias) {
      w.bq = owned_tensor(m, p + "bq", qd, [&] { return bias(rng); });
      w.bk = owned_tensor(m, p + "bk", kvd, [&] { return bias(rng); });
      w.bv = owned_tensor(m, p + "bv", kvd, [&] { return bias(rng); });
      w.bo = owned_tensor(m, p + "bo", c.hidden_size, [&] { return bias(rng); });
    }
    if (all || f == Feature::kQkNorm) {
      w.q_norm = owned_tensor(m, p + "q_norm", c.head_dim, [&] { return scale(rng); });
      w.k_norm = owned_tensor(m, p + "k_norm", c.head_dim, [&] { return scale(rng); });
    }
  }
  if (all || f == Feature::kBias) c.qkv_bias = c.o_bias = true;
  if (all || f == Feature::kQkNorm) c.qk_norm = true;
  if (all || f == Feature::kSlidingWindow) c.sliding_window = kWindow;
  if (all || f == Feature::kDynamicRope) {
    c.rope_scaling.type = RopeScaling::Type::kDynamic;
    c.rope_scaling.factor = 2.0f;
    c.rope_scaling.original_max_position_embeddings = kOriginalContext;
  }
}

class BackendFeaturesTest : public ::testing::TestWithParam<Feature> {
 protected:
  static void SetUpTestSuite() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return;
    testing::TinyModelSpec spec;  // backend_test.cc's model
    spec.hidden_size = 256;
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.intermediate_size = 512;
    spec.num_layers = 2;
    spec.max_position_embeddings = kMaxModelLen;
    spec.dtype = DType::kBF16;
    spec.tie_word_embeddings = false;
    dir_ = new std::string(
        testing::write_tiny_hf_model(testing::make_temp_dir("pvllm_cuda_features_test"), spec));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (dir_ == nullptr) return;  // no device: the test skips
    Status s = load_model(*dir_, &plain_);
    ASSERT_TRUE(s.ok()) << s.message();
    s = load_model(*dir_, &featured_);
    ASSERT_TRUE(s.ok()) << s.message();
    add_feature(featured_.get(), GetParam());
    vocab_ = plain_->config.vocab_size;
  }

  std::unique_ptr<Backend> cuda(const Model& m, bool graphs) {
    std::unique_ptr<Backend> b;
    const Status s =
        cuda_test::make_cuda_backend(m, kBlockSize, kNumBlocks, kMaxModelLen, graphs, &b);
    EXPECT_TRUE(s.ok()) << s.message();
    return b;
  }

  // The window the tiny scheduler drops blocks for (-1 entries).
  int32_t window() const { return featured_->config.sliding_window; }

  static std::string* dir_;
  std::unique_ptr<Model> plain_;
  std::unique_ptr<Model> featured_;
  int32_t vocab_ = 0;
  int32_t next_block_ = 0;
};

std::string* BackendFeaturesTest::dir_ = nullptr;

TEST_P(BackendFeaturesTest, FeatureChangesTheLogits) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  auto plain = cuda(*plain_, /*graphs=*/false);
  auto featured = cuda(*featured_, /*graphs=*/false);
  ASSERT_TRUE(plain && featured);
  // Longer than the window and than the original RoPE context.
  Seq a{prompt(45, 1, vocab_)};
  const BatchMetadata md = cuda_test::make_batch({&a}, {45}, kBlockSize, &next_block_);
  const std::vector<float> p = cuda_test::run(plain.get(), md, vocab_);
  const std::vector<float> f = cuda_test::run(featured.get(), md, vocab_);
  // An ignored feature would leave the logits bit for bit the same (same
  // weights, same kernels); an applied one moves them beyond rounding noise.
  EXPECT_GT(cuda_test::max_rel_error(p, f, vocab_), kRelTol) << feature_name(GetParam());
}

TEST_P(BackendFeaturesTest, GraphReplayMatchesEager) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  auto eager = cuda(*featured_, /*graphs=*/false);
  auto graphs = cuda(*featured_, /*graphs=*/true);
  ASSERT_TRUE(eager && graphs);
  // Three sequences, decode batches of 3 (the bucket-4 graph with a padding
  // row), then of 1; they grow past the window and the original context.
  Seq s[3] = {{prompt(40, 4, vocab_)}, {prompt(57, 5, vocab_)}, {prompt(9, 6, vocab_)}};
  BatchMetadata md =
      cuda_test::make_batch({&s[0], &s[1], &s[2]}, {40, 57, 9}, kBlockSize, &next_block_, window());
  std::vector<float> e = cuda_test::run(eager.get(), md, vocab_);
  std::vector<float> g = cuda_test::run(graphs.get(), md, vocab_);
  EXPECT_EQ(e, g) << "prefill takes the same eager path in both";
  for (int step = 0; step < 30; ++step) {
    std::vector<Seq*> seqs;
    std::vector<int32_t> ones;
    const int32_t n = step < 25 ? 3 : 1;
    for (int32_t i = 0; i < n; ++i) {
      s[i].tokens.push_back(cuda_test::top(e, static_cast<size_t>(i), vocab_).first);
      seqs.push_back(&s[i]);
      ones.push_back(1);
    }
    md = cuda_test::make_batch(seqs, ones, kBlockSize, &next_block_, window());
    e = cuda_test::run(eager.get(), md, vocab_);
    g = cuda_test::run(graphs.get(), md, vocab_);
    // Same kernels on the same data; only fp32 summation order differs
    // (split plan, padded GEMMs): as backend_test.cc.
    EXPECT_LE(cuda_test::max_rel_error(e, g, vocab_), kRelTol / 3)
        << feature_name(GetParam()) << " step " << step;
  }
}

// The CPU backend is the reference where it runs the feature: one that
// refuses it, or gives the plain model's logits (ignores it), is no
// reference and the test skips.
TEST_P(BackendFeaturesTest, LogitsMatchTheCpuThroughPrefillAndDecode) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  std::unique_ptr<Backend> cpu, cpu_plain;
  const Status s = cuda_test::make_cpu_backend(*featured_, kBlockSize, kNumBlocks, &cpu);
  if (s.code() == StatusCode::kUnsupported) {
    GTEST_SKIP() << "the CPU backend refuses " << feature_name(GetParam()) << ": " << s.message();
  }
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(cuda_test::make_cpu_backend(*plain_, kBlockSize, kNumBlocks, &cpu_plain).ok());
  auto gpu = cuda(*featured_, /*graphs=*/true);
  ASSERT_TRUE(gpu);

  Seq a{prompt(45, 1, vocab_)}, b{prompt(30, 2, vocab_)};
  BatchMetadata md = cuda_test::make_batch({&a, &b}, {45, 30}, kBlockSize, &next_block_);
  std::vector<float> ref = cuda_test::run(cpu.get(), md, vocab_);
  if (cuda_test::max_rel_error(cuda_test::run(cpu_plain.get(), md, vocab_), ref, vocab_) == 0.0f) {
    GTEST_SKIP() << "the CPU backend ignores " << feature_name(GetParam());
  }
  std::vector<float> got = cuda_test::run(gpu.get(), md, vocab_);
  EXPECT_LE(cuda_test::max_rel_error(ref, got, vocab_), kRelTol) << "prefill";
  for (int step = 0; step < 6; ++step) {
    // Teacher-force the CPU's greedy tokens into both.
    a.tokens.push_back(cuda_test::top(ref, 0, vocab_).first);
    b.tokens.push_back(cuda_test::top(ref, 1, vocab_).first);
    md = cuda_test::make_batch({&a, &b}, {1, 1}, kBlockSize, &next_block_);
    ref = cuda_test::run(cpu.get(), md, vocab_);
    got = cuda_test::run(gpu.get(), md, vocab_);
    EXPECT_LE(cuda_test::max_rel_error(ref, got, vocab_), kRelTol)
        << feature_name(GetParam()) << " step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Features, BackendFeaturesTest,
                         ::testing::Values(Feature::kBias, Feature::kQkNorm,
                                           Feature::kSlidingWindow, Feature::kDynamicRope,
                                           Feature::kAll),
                         [](const auto& info) { return std::string(feature_name(info.param)); });

// Refusals happen at create, before the device is looked at, so these run
// without one too (they need the CUDA module only).
class BackendFeaturesRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaModule* module = nullptr;
    const Status found = CudaModule::get(&module);
    if (!found.ok()) GTEST_SKIP() << "no CUDA module ($PVLLM_CUDA_BACKEND): " << found.message();
    testing::TinyModelSpec spec;
    spec.hidden_size = 128;
    spec.num_heads = 2;
    spec.num_kv_heads = 2;
    spec.dtype = DType::kBF16;
    const std::string dir =
        testing::write_tiny_hf_model(testing::make_temp_dir("pvllm_cuda_refusal_test"), spec);
    ASSERT_TRUE(load_model(dir, &model_).ok());
  }
  Status create(std::unique_ptr<Backend>* b) {
    return cuda_test::make_cuda_backend(*model_, kBlockSize, 16, 64, false, b);
  }
  std::unique_ptr<Model> model_;
};

// Weights the config does not ask for would be ignored.
TEST_F(BackendFeaturesRefusal, WeightsTheConfigDoesNotUseAreRefused) {
  add_feature(model_.get(), Feature::kQkNorm);
  model_->config.qk_norm = false;  // the weights are there, the config does not use them
  std::unique_ptr<Backend> b;
  const Status s = create(&b);
  EXPECT_EQ(s.code(), StatusCode::kCorruptModel) << s.message();
  EXPECT_NE(s.message().find("qk_norm"), std::string::npos) << s.message();
  EXPECT_EQ(b, nullptr);
}

// The prefill kernel is chosen by PVLLM_CUDA_PREFILL_KERNEL (mma or wmma);
// any other value is refused.
TEST_F(BackendFeaturesRefusal, UnknownPrefillKernelIsRefused) {
  ASSERT_EQ(setenv("PVLLM_CUDA_PREFILL_KERNEL", "flash", 1), 0);
  std::unique_ptr<Backend> b;
  const Status s = create(&b);
  unsetenv("PVLLM_CUDA_PREFILL_KERNEL");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("PVLLM_CUDA_PREFILL_KERNEL=flash"), std::string::npos) << s.message();
  EXPECT_EQ(b, nullptr);
}

}  // namespace
}  // namespace pvllm
