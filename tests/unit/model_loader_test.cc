// Model loading: half-precision conversions, RoPE frequencies, the Hugging
// Face and llama2.c loaders on tiny random models and on the real shared
// stories260K, and every way a checkpoint can be broken.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "core/base/log.h"
#include "core/base/mapped_file.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "tests/util/shared_paths.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TinyModelSpec;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---------------------------------------------------------------- fp16/bf16

TEST(HalfTest, Fp16DecodesKnownValues) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(bits(fp16_to_float(0x8000)), 0x80000000u);         // -0
  EXPECT_EQ(fp16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7c01)));  // signalling payload stays NaN
}

TEST(HalfTest, Fp16RoundTripsEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f)))) << std::hex << h;
      EXPECT_EQ(float_to_fp16(f) & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(float_to_fp16(f), h) << std::hex << h;
    }
  }
}

TEST(HalfTest, Fp16RoundsToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -10);                         // fp16 spacing at 1.0
  EXPECT_EQ(float_to_fp16(1.0f + ulp1 / 2), 0x3c00);                // tie, even is down
  EXPECT_EQ(float_to_fp16(1.0f + 3 * ulp1 / 2), 0x3c02);            // tie, even is up
  EXPECT_EQ(float_to_fp16(1.0f + ulp1 / 2 + ulp1 / 1024), 0x3c01);  // just above the tie
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // tie between 65504 and 2^16 rounds to inf
  EXPECT_EQ(float_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to zero
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0001f, -25)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // tie, even is up
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(float_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);  // rounds up into normals
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion is an independent reference.
TEST(HalfTest, Fp16MatchesCompilerConversionOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Exponents from far below the subnormals to beyond the fp16 range.
    const uint32_t exp = 127 - 30 + rng() % 50;
    const float f = from_bits((rng() & 0x80000000u) | (exp << 23) | (rng() & 0x7fffff));
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(float_to_fp16(f), expected) << f;
  }
}
#endif

TEST(HalfTest, Bf16DecodesAndRoundTrips) {
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  EXPECT_EQ(bf16_to_float(0x0001), from_bits(0x00010000u));  // subnormal
  EXPECT_EQ(bf16_to_float(0x7f80), std::numeric_limits<float>::infinity());
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(float_to_bf16(f), b) << std::hex << b;
    }
  }
}

TEST(HalfTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, even is down
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, even is up
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(float_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(float_to_bf16(from_bits(0x00018000u)), 0x0002);  // subnormal tie, even is up
  // A NaN whose payload sits only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7f800001u)))));
  // Against nearest-by-distance in double, ties to the even pattern.
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) {
    const float f = from_bits(rng() & 0x7f7fffffu);  // finite, positive
    const uint16_t lo = static_cast<uint16_t>(bits(f) >> 16);
    const double dlo = static_cast<double>(f) - bf16_to_float(lo);
    // Past the largest finite value, IEEE rounds as if 2^128 were representable.
    const double hi = lo + 1 == 0x7f80 ? std::ldexp(1.0, 128) : bf16_to_float(lo + 1);
    const double dhi = hi - f;
    const uint16_t expected = dlo < dhi ? lo : dhi < dlo ? lo + 1 : (lo % 2 ? lo + 1 : lo);
    ASSERT_EQ(float_to_bf16(f), expected) << f;
  }
}

// ------------------------------------------------------------------ RoPE

ModelConfig rope_config(int32_t head_dim, float theta) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = theta;
  return c;
}

TEST(RopeTest, PlainFrequenciesFollowTheta) {
  const ModelConfig c = rope_config(8, 10000.0f);
  const std::vector<float> f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 4u);
  // 10000^(-2i/8) = 10^(-i).
  const double expected[] = {1.0, 0.1, 0.01, 0.001};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], expected[i], expected[i] * 1e-6) << i;
}

TEST(RopeTest, LinearScalingDividesEveryFrequency) {
  ModelConfig c = rope_config(64, 10000.0f);
  const std::vector<float> plain = rope_inv_freq(c);
  c.rope_scaling.type = RopeScaling::Type::kLinear;
  c.rope_scaling.factor = 4.0f;
  const std::vector<float> scaled = rope_inv_freq(c);
  ASSERT_EQ(scaled.size(), 32u);
  for (size_t i = 0; i < scaled.size(); ++i) {
    EXPECT_NEAR(scaled[i], plain[i] / 4.0f, plain[i] * 1e-6) << i;
  }
}

TEST(RopeTest, Llama3ScalingKeepsHighDividesLowAndBlendsMiddle) {
  // Llama 3.1 8B: head_dim 128, theta 500000, factor 8, low 1, high 4, 8192.
  ModelConfig c = rope_config(128, 500000.0f);
  c.rope_scaling.type = RopeScaling::Type::kLlama3;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_max_position_embeddings = 8192;
  const std::vector<float> f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 64u);
  int num_high = 0, num_low = 0, num_mid = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = std::exp(-std::log(500000.0) * (2.0 * i) / 128.0);
    // Wavelength in positions, compared with 8192/4 and 8192/1.
    const double wavelen = 2.0 * 3.14159265358979323846 / base;
    double expected;
    if (wavelen < 2048.0) {
      expected = base;
      ++num_high;
    } else if (wavelen > 8192.0) {
      expected = base / 8.0;
      ++num_low;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
      expected = base / 8.0 + smooth * (base - base / 8.0);
      ++num_mid;
    }
    EXPECT_NEAR(f[i], expected, expected * 1e-5) << i;
  }
  // The three regimes are all exercised.
  EXPECT_GT(num_high, 0);
  EXPECT_GT(num_low, 0);
  EXPECT_GT(num_mid, 0);
}

// A small valid config.
ModelConfig small_config() {
  ModelConfig c;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 100;
  c.max_position_embeddings = 64;
  return c;
}

TEST(ModelConfigTest, ValidateRejectsInconsistentSizes) {
  const ModelConfig c = small_config();
  EXPECT_TRUE(c.validate().ok());
  ModelConfig bad = c;
  bad.num_kv_heads = 3;  // 4 heads cannot be grouped over 3
  EXPECT_EQ(bad.validate().code(), StatusCode::kInvalidArgument);
  bad = c;
  bad.head_dim = 7;
  EXPECT_FALSE(bad.validate().ok());
  bad = c;
  bad.vocab_size = 0;
  EXPECT_FALSE(bad.validate().ok());
  bad = c;
  bad.eos_token_id = 100;
  EXPECT_FALSE(bad.validate().ok());
}

TEST(ModelConfigTest, EachInvalidFieldIsNamed) {
  const ModelConfig c = small_config();
  using Rope = RopeScaling::Type;
  // Sets RoPE scaling of `type` with these factors.
  const auto rope = [](Rope type, float factor, float low, float high, int32_t original) {
    return [=](ModelConfig* m) {
      m->rope_scaling.type = type;
      m->rope_scaling.factor = factor;
      m->rope_scaling.low_freq_factor = low;
      m->rope_scaling.high_freq_factor = high;
      m->rope_scaling.original_max_position_embeddings = original;
    };
  };
  const std::pair<const char*, std::function<void(ModelConfig*)>> cases[] = {
      {"hidden_size must be positive", [](ModelConfig* m) { m->hidden_size = 0; }},
      {"intermediate_size must be positive", [](ModelConfig* m) { m->intermediate_size = -1; }},
      {"num_layers must be positive", [](ModelConfig* m) { m->num_layers = 0; }},
      {"num_heads must be positive", [](ModelConfig* m) { m->num_heads = 0; }},
      {"num_kv_heads must be positive", [](ModelConfig* m) { m->num_kv_heads = 0; }},
      {"head_dim must be positive and even, got 0", [](ModelConfig* m) { m->head_dim = 0; }},
      {"max_position_embeddings must be positive",
       [](ModelConfig* m) { m->max_position_embeddings = 0; }},
      {"rms_norm_eps must be positive", [](ModelConfig* m) { m->rms_norm_eps = 0.0f; }},
      {"rope_theta must be positive", [](ModelConfig* m) { m->rope_theta = -1.0f; }},
      {"rope_scaling.factor must be positive", rope(Rope::kLinear, 0.0f, 0, 0, 0)},
      {"rope_scaling.original_max_position_embeddings must be positive",
       rope(Rope::kDynamic, 2.0f, 0, 0, 0)},
      {"dynamic rope scaling needs head_dim > 2",
       [&](ModelConfig* m) {
         rope(Rope::kDynamic, 2.0f, 0, 0, 64)(m);
         m->head_dim = 2;
       }},
      {"sliding_window must be positive", [](ModelConfig* m) { m->sliding_window = -1; }},
      {"0 < low_freq_factor < high_freq_factor", rope(Rope::kLlama3, 8.0f, 4.0f, 4.0f, 64)},
      {"0 < low_freq_factor < high_freq_factor", rope(Rope::kLlama3, 8.0f, 0.0f, 4.0f, 64)},
      {"rope_scaling.original_max_position_embeddings must be positive",
       rope(Rope::kLlama3, 8.0f, 1.0f, 4.0f, 0)},
      {"bos_token_id is outside the vocabulary", [](ModelConfig* m) { m->bos_token_id = 100; }},
      {"a stop token id is outside the vocabulary",
       [](ModelConfig* m) {
         m->extra_stop_token_ids = {5, -1};
       }},
  };
  ASSERT_TRUE(c.validate().ok());
  for (const auto& [needle, spoil] : cases) {
    SCOPED_TRACE(needle);
    ModelConfig bad = c;
    spoil(&bad);
    const Status st = bad.validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  }
}

TEST(LogTest, AWarningIsOneLineOnStderr) {
  if (const char* v = std::getenv("PVLLM_LOG"); v != nullptr && std::string(v) == "off")
    GTEST_SKIP() << "PVLLM_LOG=off silences warnings";
  ::testing::internal::CaptureStderr();
  log_warning("the graph could not be captured");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "pvllm: warning: the graph could not be captured\n");
}

TEST(MappedFileTest, WhatCannotBeMappedIsNamed) {
  const fs::path dir = testing::make_temp_dir("pvllm_mapped_");
  std::shared_ptr<MappedFile> f;
  Status st = MappedFile::open(dir.string(), &f);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();
  EXPECT_EQ(MappedFile::open((dir / "missing").string(), &f).code(), StatusCode::kNotFound);
  std::ofstream(dir / "empty");
  EXPECT_EQ(MappedFile::open((dir / "empty" / "below").string(), &f).code(),
            StatusCode::kNotFound);  // ENOTDIR
  fs::create_symlink(dir / "loop_b", dir / "loop_a");
  fs::create_symlink(dir / "loop_a", dir / "loop_b");
  st = MappedFile::open((dir / "loop_a").string(), &f);
  EXPECT_EQ(st.code(), StatusCode::kIoError);  // ELOOP
  EXPECT_NE(st.message().find("loop_a"), std::string::npos) << st.message();
  ASSERT_TRUE(MappedFile::open((dir / "empty").string(), &f).ok());
  EXPECT_EQ(f->size(), 0u);
}

// ------------------------------------------------------- tiny model helpers

std::unique_ptr<Model> load_ok(const std::string& path) {
  std::unique_ptr<Model> model;
  const Status s = load_model(path, &model);
  EXPECT_TRUE(s.ok()) << s.message();
  return model;
}

float at(const Tensor& t, int64_t i) { return load_as_float(t.dtype, t.data, i); }

// HF q/k row r of a head of size hd is llama2.c row perm(r).
int64_t interleaved_row(int64_t hf_row, int64_t hd) {
  const int64_t h = hf_row / hd, r = hf_row % hd;
  const int64_t t = r / (hd / 2), j = r % (hd / 2);
  return h * hd + 2 * j + t;
}

// Compares two tensors of the same shape element by element, exactly;
// with `permute_rows` the second is in llama2.c's interleaved q/k order.
void expect_same_weights(const Tensor& hf, const Tensor& other, int64_t head_dim, bool permute_rows,
                         const std::string& what) {
  ASSERT_EQ(hf.shape, other.shape) << what;
  const int64_t rows = hf.shape[0];
  const int64_t cols = hf.shape.size() > 1 ? hf.shape[1] : 1;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t r2 = permute_rows ? interleaved_row(r, head_dim) : r;
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(at(hf, r * cols + c), at(other, r2 * cols + c))
          << what << " row " << r << " col " << c;
    }
  }
}

// Every weight of `a` equals `b`'s; llama2.c's q/k are un-permuted when
// `b` is a llama2.c model.
void expect_same_model(const Model& a, const Model& b) {
  ASSERT_EQ(a.weights.layers.size(), b.weights.layers.size());
  const int64_t hd = a.config.head_dim;
  const bool permute = a.format != b.format;
  expect_same_weights(a.weights.embed, b.weights.embed, hd, false, "embed");
  for (size_t i = 0; i < a.weights.layers.size(); ++i) {
    const LayerWeights& x = a.weights.layers[i];
    const LayerWeights& y = b.weights.layers[i];
    const std::string l = "layer " + std::to_string(i) + " ";
    expect_same_weights(x.attn_norm, y.attn_norm, hd, false, l + "attn_norm");
    expect_same_weights(x.wq, y.wq, hd, permute, l + "wq");
    expect_same_weights(x.wk, y.wk, hd, permute, l + "wk");
    expect_same_weights(x.wv, y.wv, hd, false, l + "wv");
    expect_same_weights(x.wo, y.wo, hd, false, l + "wo");
    expect_same_weights(x.ffn_norm, y.ffn_norm, hd, false, l + "ffn_norm");
    expect_same_weights(x.w_gate, y.w_gate, hd, false, l + "w_gate");
    expect_same_weights(x.w_up, y.w_up, hd, false, l + "w_up");
    expect_same_weights(x.w_down, y.w_down, hd, false, l + "w_down");
  }
  expect_same_weights(a.weights.final_norm, b.weights.final_norm, hd, false, "final_norm");
  expect_same_weights(a.weights.lm_head, b.weights.lm_head, hd, false, "lm_head");
}

bool points_into(const Tensor& t, const Model& m) {
  const auto* p = static_cast<const unsigned char*>(t.data);
  for (const auto& f : m.files) {
    if (p >= f->data() && p + t.nbytes() <= f->data() + f->size()) return true;
  }
  return false;
}

class TinyModelTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("pvllm_model_loader_"); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A fresh subfolder of the test's temp dir.
  std::string subdir(const std::string& name) {
    const std::string d = dir_ + "/" + name;
    fs::create_directories(d);
    return d;
  }
  std::string dir_;
};

TEST_F(TinyModelTest, HfModelLoadsWithConfigFromSpec) {
  TinyModelSpec spec;
  const std::string dir = testing::write_tiny_hf_model(subdir("hf"), spec);
  std::unique_ptr<Model> m = load_ok(dir);
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config;
  EXPECT_EQ(m->format, ModelFormat::kHuggingFace);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, testing::tiny_tokenizer_vocab_size());
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_style, RopeStyle::kRotateHalf);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_TRUE(c.extra_stop_token_ids.empty());
  EXPECT_EQ(m->tokenizer_path, dir + "/tokenizer.model");
  // Tied: the head is the embedding, not a copy.
  EXPECT_EQ(m->weights.lm_head.data, m->weights.embed.data);
  ASSERT_EQ(m->weights.layers.size(), 2u);
  EXPECT_EQ(m->weights.layers[1].wk.shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(m->weights.layers[1].w_down.shape, (std::vector<int64_t>{32, 48}));
  // Weights stay in the mapping.
  EXPECT_TRUE(points_into(m->weights.layers[1].w_down, *m));
  EXPECT_TRUE(points_into(m->weights.embed, *m));
}

TEST_F(TinyModelTest, Llama2cModelLoadsWithItsConventions) {
  TinyModelSpec spec;
  const std::string bin = testing::write_tiny_llama2c_model(subdir("l2c"), spec);
  std::unique_ptr<Model> m = load_ok(bin);
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config;
  EXPECT_EQ(m->format, ModelFormat::kLlama2c);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, testing::tiny_tokenizer_vocab_size());
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.extra_stop_token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(m->tokenizer_path, (fs::path(bin).parent_path() / "tokenizer.model").string());
  EXPECT_EQ(m->weights.lm_head.data, m->weights.embed.data);
  EXPECT_TRUE(points_into(m->weights.layers[1].w_up, *m));
}

TEST_F(TinyModelTest, BothFormatsHoldTheSameWeightsTied) {
  TinyModelSpec spec;
  spec.seed = 5;
  std::unique_ptr<Model> hf = load_ok(testing::write_tiny_hf_model(subdir("hf"), spec));
  std::unique_ptr<Model> l2c = load_ok(testing::write_tiny_llama2c_model(subdir("l2c"), spec));
  ASSERT_TRUE(hf && l2c);
  expect_same_model(*hf, *l2c);
  EXPECT_EQ(hf->weight_bytes(), l2c->weight_bytes());
}

TEST_F(TinyModelTest, BothFormatsHoldTheSameWeightsUntied) {
  TinyModelSpec spec;
  spec.tie_word_embeddings = false;
  std::unique_ptr<Model> hf = load_ok(testing::write_tiny_hf_model(subdir("hf"), spec));
  std::unique_ptr<Model> l2c = load_ok(testing::write_tiny_llama2c_model(subdir("l2c"), spec));
  ASSERT_TRUE(hf && l2c);
  EXPECT_FALSE(hf->config.tie_word_embeddings);
  EXPECT_FALSE(l2c->config.tie_word_embeddings);
  EXPECT_NE(hf->weights.lm_head.data, hf->weights.embed.data);
  EXPECT_NE(l2c->weights.lm_head.data, l2c->weights.embed.data);
  expect_same_model(*hf, *l2c);
  // The separate head counts once more than the tied model.
  const size_t head_bytes = hf->weights.lm_head.nbytes();
  TinyModelSpec tied = spec;
  tied.tie_word_embeddings = true;
  std::unique_ptr<Model> hf_tied = load_ok(testing::write_tiny_hf_model(subdir("tied"), tied));
  ASSERT_TRUE(hf_tied);
  EXPECT_EQ(hf->weight_bytes(), hf_tied->weight_bytes() + head_bytes);
}

TEST_F(TinyModelTest, WeightBytesCountsEveryTensorOnce) {
  TinyModelSpec spec;
  std::unique_ptr<Model> m = load_ok(testing::write_tiny_hf_model(subdir("hf"), spec));
  ASSERT_TRUE(m);
  const int64_t v = testing::tiny_tokenizer_vocab_size();
  const int64_t per_layer = 32 + 32 * 32 + 16 * 32 * 2 + 32 * 32 + 32 + 48 * 32 * 3;
  EXPECT_EQ(m->weight_bytes(), static_cast<size_t>((v * 32 + 2 * per_layer + 32) * 4));
}

TEST_F(TinyModelTest, InspectSummarisesTheTensorTable) {
  TinyModelSpec spec;
  spec.tie_word_embeddings = false;
  const std::string dir = testing::write_tiny_hf_model(subdir("hf"), spec);
  ModelSummary summary;
  ASSERT_TRUE(inspect_model(dir, &summary).ok());
  std::unique_ptr<Model> m = load_ok(dir);
  ASSERT_TRUE(m);
  EXPECT_EQ(summary.format, ModelFormat::kHuggingFace);
  EXPECT_EQ(summary.config.hidden_size, 32);
  EXPECT_EQ(summary.weight_bytes, m->weight_bytes());
  ASSERT_EQ(summary.tensors.size(), 2u + 9 * 2 + 1);  // embed, norm, head + 9 per layer
  EXPECT_EQ(summary.tensors.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(summary.tensors.back().name, "lm_head.weight");
  EXPECT_EQ(summary.tensors.back().shape,
            (std::vector<int64_t>{testing::tiny_tokenizer_vocab_size(), 32}));
}

TEST_F(TinyModelTest, ShardedHfEqualsSingleFile) {
  TinyModelSpec spec;
  spec.seed = 9;
  const std::string sharded = testing::write_tiny_hf_model(subdir("sharded"), spec, 3);
  EXPECT_TRUE(fs::exists(sharded + "/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(sharded + "/model.safetensors"));
  std::unique_ptr<Model> a = load_ok(sharded);
  std::unique_ptr<Model> b = load_ok(testing::write_tiny_hf_model(subdir("single"), spec));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->files.size(), 3u);
  expect_same_model(*a, *b);
  EXPECT_TRUE(points_into(a->weights.final_norm, *a));
}

TEST_F(TinyModelTest, HalfPrecisionHfHoldsRoundedWeights) {
  TinyModelSpec spec;
  spec.seed = 3;
  std::unique_ptr<Model> f32 = load_ok(testing::write_tiny_hf_model(subdir("f32"), spec));
  ASSERT_TRUE(f32);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    spec.dtype = dtype;
    std::unique_ptr<Model> half =
        load_ok(testing::write_tiny_hf_model(subdir(dtype_name(dtype)), spec));
    ASSERT_TRUE(half);
    const Tensor& h = half->weights.layers[1].wq;
    const Tensor& f = f32->weights.layers[1].wq;
    EXPECT_EQ(h.dtype, dtype);
    EXPECT_EQ(h.nbytes(), f.nbytes() / 2);
    for (int64_t i = 0; i < f.numel(); ++i) {
      const float v = at(f, i);
      const float rounded =
          dtype == DType::kF16 ? fp16_to_float(float_to_fp16(v)) : bf16_to_float(float_to_bf16(v));
      ASSERT_EQ(at(h, i), rounded) << dtype_name(dtype) << " element " << i;
    }
    EXPECT_EQ(half->weight_bytes(), f32->weight_bytes() / 2);
  }
}

TEST_F(TinyModelTest, HfConfigReadsLlama3ScalingAndEosList) {
  TinyModelSpec spec;
  spec.rope_scaling.type = RopeScaling::Type::kLlama3;
  spec.rope_scaling.factor = 8.0f;
  spec.rope_scaling.low_freq_factor = 1.0f;
  spec.rope_scaling.high_freq_factor = 4.0f;
  spec.rope_scaling.original_max_position_embeddings = 64;
  const std::string dir = testing::write_tiny_hf_model(subdir("hf"), spec);
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config["eos_token_id"] = {2, 5, 7};
  std::ofstream(dir + "/config.json") << config.dump();
  std::unique_ptr<Model> m = load_ok(dir);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(m->config.rope_scaling.factor, 8.0f);
  EXPECT_EQ(m->config.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(m->config.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_EQ(m->config.eos_token_id, 2);
  EXPECT_EQ(m->config.extra_stop_token_ids, (std::vector<int32_t>{5, 7}));
}

TEST_F(TinyModelTest, HfConfigDefaultsKvHeadsAndHeadDim) {
  TinyModelSpec spec;
  spec.num_kv_heads = 4;  // equal to num_heads, which is the default
  const std::string dir = testing::write_tiny_hf_model(subdir("hf"), spec);
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config.erase("num_key_value_heads");
  config.erase("head_dim");
  config.erase("tie_word_embeddings");  // default false: lm_head is then required
  std::ofstream(dir + "/config.json") << config.dump();
  std::unique_ptr<Model> m;
  const Status s = load_model(dir, &m);
  // The tiny file is tied, so it has no lm_head.weight.
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.message();
  EXPECT_NE(s.message().find("lm_head.weight"), std::string::npos) << s.message();
  config["tie_word_embeddings"] = true;
  std::ofstream(dir + "/config.json") << config.dump();
  m = load_ok(dir);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.num_kv_heads, 4);
  EXPECT_EQ(m->config.head_dim, 8);
}

// ------------------------------------------------------------ broken input

// Rewrites a safetensors header in place, keeping the data bytes.
void edit_safetensors_header(const std::string& path, const std::function<void(json&)>& edit) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);  // little-endian host
  json header = json::parse(bytes.substr(8, len));
  edit(header);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t new_len = text.size();
  std::string out(reinterpret_cast<const char*>(&new_len), 8);
  out += text;
  out += bytes.substr(8 + len);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
}

class BrokenModelTest : public TinyModelTest {
 protected:
  // Loads `path`, expects `code`, and that the message names every part.
  void expect_failure(const std::string& path, StatusCode code,
                      const std::vector<std::string>& named) {
    std::unique_ptr<Model> m;
    const Status s = load_model(path, &m);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_FALSE(m);
    for (const std::string& part : named) {
      EXPECT_NE(s.message().find(part), std::string::npos)
          << "message \"" << s.message() << "\" does not name " << part;
    }
  }
  std::string hf_dir(bool tied = true) {
    TinyModelSpec spec;
    spec.tie_word_embeddings = tied;
    return testing::write_tiny_hf_model(subdir("hf"), spec);
  }
};

TEST_F(BrokenModelTest, TruncatedLlama2cNamesFirstMissingTensor) {
  TinyModelSpec spec;
  const std::string bin = testing::write_tiny_llama2c_model(subdir("l2c"), spec);
  // Room for the header, tok_emb, rms_att and a little of wq.
  const int64_t v = testing::tiny_tokenizer_vocab_size();
  fs::resize_file(bin, 28 + 4 * (v * 32 + 2 * 32 + 10));
  expect_failure(bin, StatusCode::kCorruptModel, {bin, "wq"});
}

TEST_F(BrokenModelTest, ALlama2cFileCutInsideAnyTensorNamesIt) {
  TinyModelSpec spec;  // dim 32, hidden 48, 2 layers, 4 heads, 2 KV heads, seq_len 256
  const int64_t v = testing::tiny_tokenizer_vocab_size();
  const int64_t dim = 32, hidden = 48, layers = 2, kv_dim = 16, freqs = 256 * 8 / 2;
  const std::pair<const char*, int64_t> tensors[] = {
      {"tok_embeddings", v * dim},      {"rms_att_weight", layers * dim},
      {"wq", layers * dim * dim},       {"wk", layers * kv_dim * dim},
      {"wv", layers * kv_dim * dim},    {"wo", layers * dim * dim},
      {"rms_ffn_weight", layers * dim}, {"w1", layers * hidden * dim},
      {"w2", layers * dim * hidden},    {"w3", layers * hidden * dim},
      {"rms_final_weight", dim},        {"freq_cis_real", freqs},
      {"freq_cis_imag", freqs},
  };
  int64_t offset = 28;  // the header
  for (const auto& [name, count] : tensors) {
    SCOPED_TRACE(name);
    const std::string bin = testing::write_tiny_llama2c_model(subdir("l2c_cut"), spec);
    fs::resize_file(bin, static_cast<uintmax_t>(offset + 4));
    expect_failure(bin, StatusCode::kCorruptModel, {std::string("tensor ") + name + " needs"});
    offset += 4 * count;
  }
  // An untied file (negative vocab size) also holds the classifier.
  spec.tie_word_embeddings = false;
  const std::string bin = testing::write_tiny_llama2c_model(subdir("l2c_cut"), spec);
  fs::resize_file(bin, static_cast<uintmax_t>(offset + 4));
  expect_failure(bin, StatusCode::kCorruptModel, {"tensor wcls needs"});
}

TEST_F(BrokenModelTest, Llama2cWithTrailingBytesIsCorrupt) {
  TinyModelSpec spec;
  const std::string bin = testing::write_tiny_llama2c_model(subdir("l2c"), spec);
  std::ofstream(bin, std::ios::binary | std::ios::app) << "extra";
  expect_failure(bin, StatusCode::kCorruptModel, {bin});
}

TEST_F(BrokenModelTest, TruncatedSafetensorsNamesTheTensorPastTheEnd) {
  const std::string dir = hf_dir();
  const std::string file = dir + "/model.safetensors";
  // The tensor whose bytes end last is the one the cut loses.
  std::string last;
  uint64_t last_end = 0;
  edit_safetensors_header(file, [&](json& h) {
    for (const auto& [name, e] : h.items()) {
      if (name != "__metadata__" && e["data_offsets"][1].get<uint64_t>() > last_end) {
        last_end = e["data_offsets"][1].get<uint64_t>();
        last = name;
      }
    }
  });
  fs::resize_file(file, fs::file_size(file) - 6);
  expect_failure(dir, StatusCode::kCorruptModel, {file, "tensor " + last});
}

TEST_F(BrokenModelTest, HeaderLengthBeyondFileIsCorrupt) {
  const std::string dir = hf_dir();
  const std::string file = dir + "/model.safetensors";
  const uint64_t too_long = fs::file_size(file);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.write(reinterpret_cast<const char*>(&too_long), 8);
  }
  expect_failure(dir, StatusCode::kCorruptModel, {file, "header length"});
}

TEST_F(BrokenModelTest, BadJsonHeaderIsCorrupt) {
  const std::string dir = hf_dir();
  const std::string file = dir + "/model.safetensors";
  const std::string text = "{\"a\": [1, 2,, }";  // 16 bytes
  const uint64_t len = text.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << out + text;
  expect_failure(dir, StatusCode::kCorruptModel, {file, "JSON"});
}

TEST_F(BrokenModelTest, WrongShapeNamesFileTensorAndShapes) {
  const std::string dir = hf_dir();
  const std::string file = dir + "/model.safetensors";
  const std::string name = "model.layers.1.self_attn.k_proj.weight";
  edit_safetensors_header(file, [&](json& h) { h[name]["shape"] = {8, 64}; });  // same bytes
  expect_failure(dir, StatusCode::kCorruptModel,
                 {file + ": tensor " + name + " has shape [8,64], expected [16,32]"});
}

TEST_F(BrokenModelTest, MissingTensorIsNamed) {
  const std::string dir = hf_dir();
  const std::string file = dir + "/model.safetensors";
  const std::string name = "model.layers.1.mlp.up_proj.weight";
  edit_safetensors_header(file, [&](json& h) { h.erase(name); });
  expect_failure(dir, StatusCode::kNotFound, {file, name});
}

TEST_F(BrokenModelTest, UntiedModelWithoutLmHeadFails) {
  const std::string dir = hf_dir(/*tied=*/false);
  const std::string file = dir + "/model.safetensors";
  edit_safetensors_header(file, [&](json& h) { h.erase("lm_head.weight"); });
  expect_failure(dir, StatusCode::kNotFound, {file, "lm_head.weight"});
}

TEST_F(BrokenModelTest, UnknownDtypeIsUnsupportedAndNamesTensor) {
  const std::string dir = hf_dir();
  const std::string file = dir + "/model.safetensors";
  const std::string name = "model.norm.weight";
  edit_safetensors_header(file, [&](json& h) { h[name]["dtype"] = "I8"; });
  expect_failure(dir, StatusCode::kUnsupported, {file, name, "I8"});
}

TEST_F(BrokenModelTest, ByteRangeThatDisagreesWithShapeIsCorrupt) {
  const std::string dir = hf_dir();
  const std::string file = dir + "/model.safetensors";
  const std::string name = "model.norm.weight";
  edit_safetensors_header(file, [&](json& h) { h[name]["shape"] = {31}; });
  expect_failure(dir, StatusCode::kCorruptModel, {file, name});
}

TEST_F(BrokenModelTest, MissingShardIsNotFound) {
  TinyModelSpec spec;
  const std::string dir = testing::write_tiny_hf_model(subdir("hf"), spec, 2);
  const std::string shard = dir + "/model-00002-of-00002.safetensors";
  ASSERT_TRUE(fs::remove(shard));
  expect_failure(dir, StatusCode::kNotFound, {shard});
}

TEST_F(BrokenModelTest, UnknownArchitectureIsUnsupported) {
  const std::string dir = hf_dir();
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config["architectures"] = {"GPT2LMHeadModel"};
  config["model_type"] = "gpt2";
  std::ofstream(dir + "/config.json") << config.dump();
  expect_failure(dir, StatusCode::kUnsupported, {dir + "/config.json"});
}

TEST_F(BrokenModelTest, MistralModelTypeIsAccepted) {
  const std::string dir = hf_dir();
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config.erase("architectures");
  config["model_type"] = "mistral";
  // Keys only Llama reads; MistralConfig has no such fields.
  for (const char* key : {"attention_bias", "mlp_bias", "pretraining_tp"}) config.erase(key);
  std::ofstream(dir + "/config.json") << config.dump();
  std::unique_ptr<Model> m = load_ok(dir);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.architecture, "mistral");
  // MistralConfig's default window when the file names none.
  EXPECT_EQ(m->config.sliding_window, 4096);
}

TEST_F(BrokenModelTest, UnsupportedRopeScalingIsNamed) {
  const std::string dir = hf_dir();
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  std::ofstream(dir + "/config.json") << config.dump();
  expect_failure(dir, StatusCode::kUnsupported, {"config.json", "yarn"});
}

TEST_F(BrokenModelTest, MissingConfigIsNotFound) {
  const std::string dir = hf_dir();
  fs::remove(dir + "/config.json");
  expect_failure(dir, StatusCode::kNotFound, {dir + "/config.json"});
}

TEST_F(BrokenModelTest, MissingConfigFieldIsCorrupt) {
  const std::string dir = hf_dir();
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config.erase("hidden_size");
  std::ofstream(dir + "/config.json") << config.dump();
  expect_failure(dir, StatusCode::kCorruptModel, {"config.json", "hidden_size"});
}

struct MalformedConfig {
  const char* tiny;  // tiny_arch_spec name
  json set;          // config.json keys to set (null erases)
  StatusCode code;
  const char* named;  // what the message must say
};

TEST_F(BrokenModelTest, MalformedConfigValuesAreRefusedNamingTheKey) {
  const MalformedConfig cases[] = {
      {"llama2",
       {{"architectures", json::array()}},
       StatusCode::kCorruptModel,
       "architectures is not a non-empty list"},
      {"llama2", {{"architectures", {5}}}, StatusCode::kUnsupported, "supported:"},
      {"llama2",
       {{"architectures", nullptr}, {"model_type", nullptr}},
       StatusCode::kUnsupported,
       "names no architecture"},
      {"llama2",
       {{"model_type", "qwen2"}},
       StatusCode::kUnsupported,
       "(architectures names LlamaForCausalLM)"},
      {"llama2",
       {{"architectures", nullptr}, {"model_type", "gpt2"}},
       StatusCode::kUnsupported,
       "(supported: llama, mistral, qwen2, qwen3)"},
      {"llama2",
       {{"partial_rotary_factor", 0.5}},
       StatusCode::kUnsupported,
       "partial_rotary_factor"},
      {"llama2",
       {{"pretraining_tp", 0}},
       StatusCode::kCorruptModel,
       "pretraining_tp is not a positive integer"},
      {"llama2",
       {{"tie_word_embeddings", "yes"}},
       StatusCode::kCorruptModel,
       "tie_word_embeddings is not true or false"},
      {"llama2",
       {{"attention_bias", 1}},
       StatusCode::kCorruptModel,
       "attention_bias is not true or false"},
      {"llama2", {{"intermediate_size", "x"}}, StatusCode::kCorruptModel, "intermediate_size"},
      {"llama2",
       {{"num_hidden_layers", 0}},
       StatusCode::kCorruptModel,
       "num_hidden_layers must be positive"},
      {"llama2",
       {{"num_attention_heads", 0}},
       StatusCode::kCorruptModel,
       "num_attention_heads must be positive"},
      {"llama2", {{"vocab_size", 1.5}}, StatusCode::kCorruptModel, "vocab_size"},
      {"llama2", {{"num_key_value_heads", "x"}}, StatusCode::kCorruptModel, "num_key_value_heads"},
      {"llama2", {{"head_dim", "x"}}, StatusCode::kCorruptModel, "head_dim"},
      {"llama2", {{"rms_norm_eps", "x"}}, StatusCode::kCorruptModel, "rms_norm_eps"},
      {"llama2", {{"bos_token_id", "x"}}, StatusCode::kCorruptModel, "bos_token_id"},
      {"llama2",
       {{"eos_token_id", "x"}},
       StatusCode::kCorruptModel,
       "eos_token_id is not an integer or a list of integers"},
      {"llama2",
       {{"eos_token_id", {2, "a"}}},
       StatusCode::kCorruptModel,
       "eos_token_id is malformed"},
      {"llama2", {{"eos_token_id", 100000}}, StatusCode::kCorruptModel, "eos_token_id"},
      {"mistral", {{"sliding_window", "x"}}, StatusCode::kCorruptModel, "sliding_window"},
      {"qwen2", {{"use_sliding_window", "x"}}, StatusCode::kCorruptModel, "use_sliding_window"},
      {"qwen2", {{"max_window_layers", "x"}}, StatusCode::kCorruptModel, "max_window_layers"},
      {"llama2", {{"rope_theta", "x"}}, StatusCode::kCorruptModel, "rope_theta"},
      {"llama2",
       {{"architectures", {"GPTNeoXForCausalLM"}}},
       StatusCode::kUnsupported,
       "GPTNeoXForCausalLM"},
      {"llama2",
       {{"architectures", {"LlamaForCausalLM", "Qwen2ForCausalLM"}}},
       StatusCode::kUnsupported,
       "Qwen2ForCausalLM"},
      {"llama2", {{"model_type", 5}}, StatusCode::kUnsupported, "model_type"},
      {"llama2",
       {{"partial_rotary_factor", "x"}},
       StatusCode::kUnsupported,
       "partial_rotary_factor"},
      {"llama2",
       {{"pretraining_tp", 1.5}},
       StatusCode::kCorruptModel,
       "pretraining_tp is not a positive integer"},
      {"llama2", {{"num_hidden_layers", "x"}}, StatusCode::kCorruptModel, "num_hidden_layers"},
      {"llama2", {{"num_attention_heads", "x"}}, StatusCode::kCorruptModel, "num_attention_heads"},
      {"llama2",
       {{"max_position_embeddings", "x"}},
       StatusCode::kCorruptModel,
       "max_position_embeddings"},
      {"qwen2", {{"layer_types", {"full_attention"}}}, StatusCode::kUnsupported, "layer_types"},
      {"llama2",
       {{"rope_scaling", "linear"}},
       StatusCode::kCorruptModel,
       "rope_scaling is not an object"},
      {"llama2",
       {{"rope_scaling", {{"rope_type", 5}}}},
       StatusCode::kCorruptModel,
       "rope_type is not a string"},
      {"llama2",
       {{"rope_scaling", {{"type", "linear"}, {"rope_type", "dynamic"}, {"factor", 2}}}},
       StatusCode::kUnsupported,
       "(type and rope_type differ)"},
      {"llama2",
       {{"rope_scaling", {{"factor", 2.0}}}},
       StatusCode::kCorruptModel,
       "has no rope_type"},
      {"llama2",
       {{"rope_scaling", {{"rope_type", "linear"}}}},
       StatusCode::kCorruptModel,
       "factor"},
      {"llama2",
       {{"rope_scaling",
         {{"rope_type", "linear"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}}}},
       StatusCode::kUnsupported,
       "rope_scaling.partial_rotary_factor"},
      {"llama2",
       {{"rope_scaling",
         {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 64}}}},
       StatusCode::kCorruptModel,
       "low_freq_factor"},
      {"llama3-v5",
       {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}},
       StatusCode::kUnsupported,
       "(it disagrees with rope_scaling)"},
      {"llama3-v5",
       {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", "x"}}}},
       StatusCode::kCorruptModel,
       "rope_theta"},
  };
  for (const MalformedConfig& c : cases) {
    SCOPED_TRACE(std::string(c.tiny) + " " + c.set.dump());
    const std::string d = testing::write_tiny_hf_model(subdir(std::string("malformed_") + c.tiny),
                                                       testing::tiny_arch_spec(c.tiny));
    testing::edit_hf_config(d, c.set);
    expect_failure(d, c.code, {"config.json", c.named});
  }
}

TEST_F(BrokenModelTest, MalformedSafetensorsHeadersAreCorruptNamingTheTensor) {
  const std::pair<const char*, std::function<void(json&)>> cases[] = {
      {"lacks dtype, shape or data_offsets", [](json& h) { h["model.norm.weight"] = 5; }},
      {"lacks dtype, shape or data_offsets",
       [](json& h) { h["model.norm.weight"].erase("data_offsets"); }},
      {"has a non-string dtype", [](json& h) { h["model.norm.weight"]["dtype"] = 5; }},
      {"has a shape that is not a list", [](json& h) { h["model.norm.weight"]["shape"] = "x"; }},
      {"has a negative or non-integer dimension",
       [](json& h) { h["model.norm.weight"]["shape"] = {-1}; }},
      {"has an implausibly large shape",
       [](json& h) {
         h["model.norm.weight"]["shape"] = {int64_t{1} << 40, int64_t{1} << 40};
       }},
      {"has malformed data_offsets", [](json& h) { h["model.norm.weight"]["data_offsets"] = {0}; }},
      {"has data_offsets [10, 5)",
       [](json& h) {
         h["model.norm.weight"]["data_offsets"] = {10, 5};
       }},
      {"the header is not a JSON object", [](json& h) { h = json::array({1}); }},
  };
  for (const auto& [named, edit] : cases) {
    SCOPED_TRACE(named);
    const std::string d = hf_dir();
    edit_safetensors_header(d + "/model.safetensors", edit);
    expect_failure(d, StatusCode::kCorruptModel, {"model.safetensors", named});
  }
  const std::string d = hf_dir();
  std::ofstream(d + "/model.safetensors", std::ios::trunc) << "abc";
  expect_failure(d, StatusCode::kCorruptModel, {"model.safetensors", "3 bytes"});
}

TEST_F(BrokenModelTest, Llama2cHeadersThatCannotBeAModelAreRefused) {
  const auto write = [&](const std::string& name, const std::vector<int32_t>& header) {
    const std::string path = subdir("l2c_header") + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(header.data()),
              static_cast<std::streamsize>(header.size() * sizeof(int32_t)));
    return path;
  };
  expect_failure(write("short.bin", {32, 48}), StatusCode::kCorruptModel, {"short.bin", "8"});
  expect_failure(write("v1.bin", {0x616b3432, 1, 0, 0, 0, 0, 0, 0}), StatusCode::kUnsupported,
                 {"v1.bin", "versioned export"});
  expect_failure(write("zero.bin", {0, 48, 2, 4, 2, 100, 64}), StatusCode::kCorruptModel,
                 {"zero.bin", "implausible llama2.c header (dim 0"});
  expect_failure(write("odd.bin", {36, 48, 2, 4, 2, 100, 64}), StatusCode::kCorruptModel,
                 {"odd.bin", "implausible"});
}

TEST_F(BrokenModelTest, EveryTensorTheArchitectureNeedsIsNamedWhenMissing) {
  const std::pair<const char*, const char*> cases[] = {
      {"llama2", "model.embed_tokens.weight"},
      {"llama2", "model.norm.weight"},
      {"llama2", "model.layers.1.input_layernorm.weight"},
      {"llama2", "model.layers.1.self_attn.q_proj.weight"},
      {"llama2", "model.layers.1.self_attn.v_proj.weight"},
      {"llama2", "model.layers.1.self_attn.o_proj.weight"},
      {"llama2", "model.layers.1.post_attention_layernorm.weight"},
      {"llama2", "model.layers.1.mlp.gate_proj.weight"},
      {"llama2", "model.layers.1.mlp.down_proj.weight"},
      {"qwen2", "model.layers.0.self_attn.k_proj.bias"},
      {"qwen2", "model.layers.0.self_attn.v_proj.bias"},
      {"llama-bias", "model.layers.0.self_attn.o_proj.bias"},
      {"qwen3", "model.layers.0.self_attn.q_norm.weight"},
      {"qwen3", "model.layers.0.self_attn.k_norm.weight"},
  };
  for (const auto& [tiny, tensor] : cases) {
    SCOPED_TRACE(tensor);
    const std::string d = testing::write_tiny_hf_model(subdir(std::string("missing_") + tiny),
                                                       testing::tiny_arch_spec(tiny));
    edit_safetensors_header(d + "/model.safetensors", [&](json& h) { h.erase(tensor); });
    expect_failure(d, StatusCode::kNotFound, {tensor});
  }
}

TEST_F(BrokenModelTest, ATiedHeadHoldingTheEmbeddingIsAccepted) {
  const std::string d = hf_dir(/*tied=*/true);
  edit_safetensors_header(d + "/model.safetensors",
                          [](json& h) { h["lm_head.weight"] = h["model.embed_tokens.weight"]; });
  EXPECT_TRUE(load_ok(d));
  // The same bytes under another shape are a different head.
  edit_safetensors_header(d + "/model.safetensors", [](json& h) {
    std::vector<int64_t> shape = h["lm_head.weight"]["shape"];
    std::swap(shape[0], shape[1]);
    h["lm_head.weight"]["shape"] = shape;
  });
  expect_failure(d, StatusCode::kUnsupported, {"lm_head.weight differs"});
}

TEST_F(BrokenModelTest, MalformedShardIndexesAreCorrupt) {
  const std::pair<const char*, std::function<void(json&)>> cases[] = {
      {"no weight_map object", [](json& index) { index.erase("weight_map"); }},
      {"weight_map[model.norm.weight]",
       [](json& index) { index["weight_map"]["model.norm.weight"] = 5; }},
      {"is not a file name",
       [](json& index) { index["weight_map"]["model.norm.weight"] = "../x.safetensors"; }},
      {"is not a file name", [](json& index) { index["weight_map"]["model.norm.weight"] = ".."; }},
      {"is listed in",
       [](json& index) {
         index["weight_map"]["extra.weight"] = index["weight_map"]["model.norm.weight"];
       }},
  };
  for (const auto& [named, edit] : cases) {
    SCOPED_TRACE(named);
    const std::string d = testing::write_tiny_hf_model(subdir("bad_index"), TinyModelSpec{}, 2);
    const std::string path = d + "/model.safetensors.index.json";
    json index = json::parse(std::ifstream(path));
    edit(index);
    std::ofstream(path, std::ios::trunc) << index.dump();
    expect_failure(d, StatusCode::kCorruptModel, {"model.safetensors.index.json", named});
  }
  const std::string d = testing::write_tiny_hf_model(subdir("no_weights"), TinyModelSpec{});
  fs::remove(d + "/model.safetensors");
  expect_failure(d, StatusCode::kNotFound,
                 {"no model.safetensors or model.safetensors.index.json"});
}

TEST_F(BrokenModelTest, MalformedGenerationConfigIsRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"eos_token_id": "x"})", "eos_token_id"},
      {R"({"eos_token_id": [2, 100000]})", "outside the vocabulary"},
      {"{ not json", "generation_config.json"},
  };
  for (const auto& [text, named] : cases) {
    SCOPED_TRACE(text);
    const std::string d = hf_dir();
    std::ofstream(d + "/generation_config.json") << text;
    expect_failure(d, StatusCode::kCorruptModel, {"generation_config.json", named});
  }
}

TEST_F(BrokenModelTest, NonexistentPathIsNotFound) {
  const std::string path = dir_ + "/no/such/model.bin";
  expect_failure(path, StatusCode::kNotFound, {path});
  ModelSummary summary;
  EXPECT_EQ(inspect_model(path, &summary).code(), StatusCode::kNotFound);
}

TEST_F(BrokenModelTest, OtherFileKindsAreUnsupported) {
  const std::string path = dir_ + "/model.onnx";
  std::ofstream(path) << "ONNX";
  expect_failure(path, StatusCode::kUnsupported, {path});
  // A .gguf file is read as one: four bytes are a truncated GGUF file.
  const std::string gguf = dir_ + "/model.gguf";
  std::ofstream(gguf) << "GGUF";
  expect_failure(gguf, StatusCode::kCorruptModel, {gguf, "truncated"});
}

// ------------------------------------------------- real shared checkpoint

TEST(Stories260KTest, ConfigMatchesSourceAndFormatsAgree) {
  PVLLM_SHARED_OR_SKIP(bin, "models/stories260K/stories260K.bin");
  PVLLM_SHARED_OR_SKIP(hf_dir, "models/stories260K-hf");
  std::unique_ptr<Model> l2c = load_ok(bin);
  std::unique_ptr<Model> hf = load_ok(hf_dir);
  ASSERT_TRUE(l2c && hf);
  for (const Model* m : {l2c.get(), hf.get()}) {
    // SOURCE.md: (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab, seq_len)
    //          = (64, 172, 5, 8, 4, 512, 512), head_size 8, tied classifier.
    const ModelConfig& c = m->config;
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.intermediate_size, 172);
    EXPECT_EQ(c.num_layers, 5);
    EXPECT_EQ(c.num_heads, 8);
    EXPECT_EQ(c.num_kv_heads, 4);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.max_position_embeddings, 512);
    EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
    EXPECT_EQ(c.rope_theta, 10000.0f);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(m->weights.lm_head.data, m->weights.embed.data);
    // 260,032 weight floats; the obsolete freq_cis table is not a weight.
    EXPECT_EQ(m->weight_bytes(), 260032u * 4);
  }
  EXPECT_EQ(l2c->config.rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(hf->config.rope_style, RopeStyle::kRotateHalf);
  EXPECT_EQ(l2c->config.extra_stop_token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(fs::path(l2c->tokenizer_path).filename(), "tok512.model");
  EXPECT_EQ(fs::path(hf->tokenizer_path).filename(), "tokenizer.model");
  expect_same_model(*hf, *l2c);
}

}  // namespace
}  // namespace pvllm

namespace pvllm {
namespace {

// A layer count the checkpoint cannot hold is refused from the tensor
// count, before a layer table of that size is allocated. Before, three
// million layers took gigabytes and seconds to end in NOT_FOUND for the
// first missing tensor.
TEST_F(TinyModelTest, AHugeLayerCountIsRefusedBeforeAllocatingLayers) {
  const std::string dir = testing::write_tiny_hf_model(subdir("hf"), TinyModelSpec{});
  testing::edit_hf_config(dir, {{"num_hidden_layers", 3000000}});
  std::unique_ptr<Model> model;
  const Status st = load_model(dir, &model);
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel) << st.message();
  EXPECT_NE(st.message().find("num_hidden_layers 3000000 exceeds the checkpoint's"),
            std::string::npos)
      << st.message();
}

// hidden_size beyond 32 bits is refused, never truncated (2^32 + 64 would
// read as 64 and build a model of the wrong shape).
TEST_F(TinyModelTest, ASizeBeyond32BitsIsRefusedNotTruncated) {
  const std::string dir = testing::write_tiny_hf_model(subdir("hf"), TinyModelSpec{});
  testing::edit_hf_config(dir, {{"hidden_size", (int64_t{1} << 32) + 64}});
  std::unique_ptr<Model> model;
  const Status st = load_model(dir, &model);
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel) << st.message();
  EXPECT_NE(st.message().find("hidden_size is not a 32-bit integer"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace pvllm
