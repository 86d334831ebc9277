// GGUF files as models (core/model/gguf_model.h): the metadata into a
// ModelConfig with every key under the architecture classified, tensors
// taken by name as views of the mapping, and every refusal naming what it
// refuses. Files are written by tests/util/gguf_writer.
#include "core/model/gguf_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/model_files.h"
#include "core/model/pvllm_writer.h"
#include "tests/util/gguf_writer.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

using testing::GgufWriter;

constexpr uint64_t kHidden = 32, kHeads = 4, kKvHeads = 2, kFf = 64, kVocab = 16;
constexpr uint64_t kHeadDim = kHidden / kHeads;

struct TinyGguf {
  std::string arch = "llama";
  int layers = 1;
  bool output = true;  // an output.weight (else tied)
  ggml::Type matrix = ggml::Type::kF32;
  uint64_t hidden = kHidden;  // heads stay 4 (2 for k and v): head_dim is hidden / 4
  uint64_t ff = kFf;
};

// A model of `spec`'s architecture with the tensors it needs.
GgufWriter tiny_gguf(const TinyGguf& spec) {
  GgufWriter w;
  const std::string a = spec.arch;
  const uint64_t kHidden = spec.hidden, kFf = spec.ff, kHeadDim = spec.hidden / kHeads;
  w.add_string("general.architecture", a);
  w.add_string("general.name", "tiny");
  w.add_u32(a + ".context_length", 256);
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(kHidden));
  w.add_u32(a + ".block_count", static_cast<uint32_t>(spec.layers));
  w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(kFf));
  w.add_u32(a + ".attention.head_count", kHeads);
  w.add_u32(a + ".attention.head_count_kv", kKvHeads);
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_f32(a + ".rope.freq_base", 500000.0f);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_u32("tokenizer.ggml.eot_token_id", 3);
  auto vec = [&](const std::string& name, uint64_t n) {
    w.add_tensor(name, {n}, ggml::Type::kF32);
  };
  auto mat = [&](const std::string& name, uint64_t rows, uint64_t cols) {
    w.add_tensor(name, {cols, rows}, spec.matrix);
  };
  mat("token_embd.weight", kVocab, kHidden);
  vec("output_norm.weight", kHidden);
  if (spec.output) mat("output.weight", kVocab, kHidden);
  for (int i = 0; i < spec.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    vec(p + "attn_norm.weight", kHidden);
    mat(p + "attn_q.weight", kHeads * kHeadDim, kHidden);
    mat(p + "attn_k.weight", kKvHeads * kHeadDim, kHidden);
    mat(p + "attn_v.weight", kKvHeads * kHeadDim, kHidden);
    mat(p + "attn_output.weight", kHidden, kHeads * kHeadDim);
    vec(p + "ffn_norm.weight", kHidden);
    mat(p + "ffn_gate.weight", kFf, kHidden);
    mat(p + "ffn_up.weight", kFf, kHidden);
    mat(p + "ffn_down.weight", kHidden, kFf);
    if (a == "qwen2") {
      vec(p + "attn_q.bias", kHeads * kHeadDim);
      vec(p + "attn_k.bias", kKvHeads * kHeadDim);
      vec(p + "attn_v.bias", kKvHeads * kHeadDim);
    }
    if (a == "qwen3") {
      vec(p + "attn_q_norm.weight", kHeadDim);
      vec(p + "attn_k_norm.weight", kHeadDim);
    }
  }
  return w;
}

class GgufModelTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("pvllm_gguf_model_"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Status load(const GgufWriter& w, std::unique_ptr<Model>* out,
              const std::string& name = "m.gguf") {
    return load_model(w.write(dir_ + "/" + name), out);
  }
  // The status of loading `w`, which must fail with `code` and a message
  // holding every one of `words`.
  void expect_refused(const GgufWriter& w, StatusCode code, std::vector<std::string> words) {
    std::unique_ptr<Model> m;
    const Status s = load(w, &m);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), code) << s.message();
    for (const std::string& word : words) {
      EXPECT_NE(s.message().find(word), std::string::npos)
          << "\"" << word << "\" not in: " << s.message();
    }
  }

  std::string dir_;
};

TEST_F(GgufModelTest, LlamaConfigFromMetadata) {
  std::unique_ptr<Model> m;
  const Status s = load(tiny_gguf({}), &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const ModelConfig& c = m->config;
  EXPECT_EQ(m->format, ModelFormat::kGguf);
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 64);
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 16);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  // llama.cpp's converter orders q and k for adjacent-pair rotation.
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.extra_stop_token_ids, std::vector<int32_t>{3});
  EXPECT_EQ(m->tokenizer_path, dir_ + "/m.gguf");
  // Every tensor is a view of the mapping: nothing copied.
  ASSERT_EQ(m->files.size(), 1u);
  const auto* base = static_cast<const unsigned char*>(m->files[0]->data());
  m->for_each_weight([&](const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.data);
    EXPECT_TRUE(p >= base && p + t.nbytes() <= base + m->files[0]->size()) << t.name;
  });
  EXPECT_EQ(m->weights.layers[0].wk.shape, (std::vector<int64_t>{16, 32}));
}

TEST_F(GgufModelTest, EndOfTurnTokensStopByTheirText) {
  GgufWriter w = tiny_gguf({});
  std::vector<std::string> tokens(kVocab);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = "t" + std::to_string(i);
  tokens[7] = "<|im_end|>";
  tokens[9] = "<|eot_id|>";
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  std::unique_ptr<Model> m;
  const Status s = load(w, &m);
  ASSERT_TRUE(s.ok()) << s.message();
  // eot_token_id 3 from the key, then the texts llama.cpp ends generation at.
  EXPECT_EQ(m->config.extra_stop_token_ids, (std::vector<int32_t>{3, 7, 9}));
}

TEST_F(GgufModelTest, TiedEmbeddingsWithoutOutput) {
  TinyGguf spec;
  spec.output = false;
  std::unique_ptr<Model> m;
  ASSERT_TRUE(load(tiny_gguf(spec), &m).ok());
  EXPECT_TRUE(m->config.tie_word_embeddings);
  EXPECT_EQ(m->weights.lm_head.data, m->weights.embed.data);
}

TEST_F(GgufModelTest, QwenArchitectures) {
  for (const char* arch : {"qwen2", "qwen3"}) {
    TinyGguf spec;
    spec.arch = arch;
    std::unique_ptr<Model> m;
    const Status s = load(tiny_gguf(spec), &m, std::string(arch) + ".gguf");
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(m->config.rope_style, RopeStyle::kRotateHalf) << arch;
    EXPECT_EQ(m->config.qkv_bias, std::string(arch) == "qwen2");
    EXPECT_EQ(m->config.qk_norm, std::string(arch) == "qwen3");
  }
  TinyGguf spec;
  spec.arch = "qwen2";
  GgufWriter w = tiny_gguf(spec);
  std::erase_if(w.tensors, [](const auto& t) { return t.name == "blk.0.attn_k.bias"; });
  expect_refused(w, StatusCode::kCorruptModel, {"blk.0.attn_k.bias", "missing"});
}

TEST_F(GgufModelTest, RefusesOtherArchitecturesAndAdapters) {
  GgufWriter w = tiny_gguf({});
  w.kvs[0].value.clear();
  testing::gguf_put_string(&w.kvs[0].value, "phi3");
  expect_refused(w, StatusCode::kUnsupported, {"phi3", "llama, qwen2, qwen3"});
  GgufWriter adapter = tiny_gguf({});
  adapter.add_string("general.type", "adapter");
  expect_refused(adapter, StatusCode::kUnsupported, {"general.type", "adapter"});
}

TEST_F(GgufModelTest, RefusesKeysThatChangeTheMath) {
  {
    GgufWriter w = tiny_gguf({});
    w.add_u32("llama.expert_count", 8);
    expect_refused(w, StatusCode::kUnsupported, {"llama.expert_count", "mixture of experts"});
  }
  {
    GgufWriter w = tiny_gguf({});
    w.add_string("llama.rope.scaling.type", "yarn");
    expect_refused(w, StatusCode::kUnsupported, {"llama.rope.scaling.type", "yarn"});
  }
  {
    GgufWriter w = tiny_gguf({});
    w.add_f32("llama.final_logit_softcapping", 30.0f);
    expect_refused(w, StatusCode::kUnsupported, {"llama.final_logit_softcapping"});
  }
  {
    GgufWriter w = tiny_gguf({});
    w.add_u32("llama.some_future_key", 1);
    expect_refused(w, StatusCode::kUnsupported, {"llama.some_future_key", "may change"});
  }
  {
    GgufWriter w = tiny_gguf({});
    w.add_u32("llama.rope.dimension_count", 4);
    expect_refused(w, StatusCode::kUnsupported, {"llama.rope.dimension_count", "whole head"});
  }
  {
    GgufWriter w = tiny_gguf({});
    w.add_array<uint32_t>("llama.attention.head_count_kv", gguf::ValueType::kU32, {2u});
    // head_count_kv is present twice now; the reader refuses duplicates.
    std::unique_ptr<Model> m;
    EXPECT_FALSE(load(w, &m).ok());
  }
  // Keys that only describe the model are read without complaint, and a
  // zero expert count is a dense model.
  GgufWriter ok = tiny_gguf({});
  ok.add_bool("llama.rope.scaling.finetuned", false);
  ok.add_u32("llama.expert_count", 0);
  ok.add_string("general.license", "mit");
  std::unique_ptr<Model> m;
  const Status s = load(ok, &m);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST_F(GgufModelTest, PerLayerHeadCountsAreRefused) {
  GgufWriter w = tiny_gguf({});
  std::erase_if(w.kvs, [](const auto& kv) { return kv.key == "llama.attention.head_count_kv"; });
  w.add_array<uint32_t>("llama.attention.head_count_kv", gguf::ValueType::kU32, {2u});
  expect_refused(w, StatusCode::kUnsupported, {"llama.attention.head_count_kv", "per-layer"});
}

TEST_F(GgufModelTest, MissingKeysAreNamed) {
  for (const char* key : {"llama.embedding_length", "llama.block_count",
                          "llama.attention.layer_norm_rms_epsilon", "general.architecture"}) {
    GgufWriter w = tiny_gguf({});
    std::erase_if(w.kvs, [&](const auto& kv) { return kv.key == key; });
    expect_refused(w, StatusCode::kCorruptModel, {key, "missing"});
  }
  GgufWriter w = tiny_gguf({});
  for (auto& kv : w.kvs) {
    if (kv.key == "llama.block_count") {
      kv.value.clear();
      testing::gguf_put_u32(&kv.value, 0);
    }
  }
  expect_refused(w, StatusCode::kCorruptModel, {"llama.block_count", "0"});
}

TEST_F(GgufModelTest, TensorsAreCheckedByName) {
  {
    GgufWriter w = tiny_gguf({});
    w.add_tensor("blk.0.ffn_gate_inp.weight", {kHidden, 4}, ggml::Type::kF32);
    expect_refused(w, StatusCode::kUnsupported,
                   {"blk.0.ffn_gate_inp.weight", "not one pvllm reads"});
  }
  {
    GgufWriter w = tiny_gguf({});
    for (auto& t : w.tensors) {
      if (t.name == "blk.0.attn_k.weight") {
        t = GgufWriter().add_tensor(t.name, {kHidden, 24}, ggml::Type::kF32);
      }
    }
    expect_refused(w, StatusCode::kCorruptModel, {"blk.0.attn_k.weight", "24x32", "16x32"});
  }
  {
    TinyGguf spec;
    spec.layers = 2;
    GgufWriter w = tiny_gguf(spec);
    std::erase_if(w.tensors, [](const auto& t) { return t.name == "blk.1.ffn_up.weight"; });
    expect_refused(w, StatusCode::kCorruptModel, {"blk.1.ffn_up.weight", "missing"});
  }
}

TEST_F(GgufModelTest, TypesPvllmDoesNotServeAreNamed) {
  // An IQ2_XXS projection: ggml defines the type, pvllm does not serve it.
  TinyGguf wide;
  wide.hidden = 256;
  wide.ff = 256;
  GgufWriter w = tiny_gguf(wide);
  for (auto& t : w.tensors) {
    if (t.name == "blk.0.attn_q.weight") {
      t = GgufWriter().add_tensor(t.name, t.dims, ggml::Type::kIQ2_XXS);
    }
  }
  expect_refused(w, StatusCode::kUnsupported, {"blk.0.attn_q.weight", "IQ2_XXS"});
  // A quantized vector is refused by name.
  TinyGguf q8;
  q8.matrix = ggml::Type::kQ8_0;
  GgufWriter v = tiny_gguf(q8);
  std::erase_if(v.tensors, [](const auto& t) { return t.name == "output_norm.weight"; });
  v.add_tensor("output_norm.weight", {kHidden}, ggml::Type::kQ8_0);
  expect_refused(v, StatusCode::kUnsupported, {"output_norm.weight", "Q8_0"});
}

TEST_F(GgufModelTest, QuantizedMatricesStayInTheirBlocks) {
  TinyGguf spec;
  spec.matrix = ggml::Type::kQ8_0;
  std::unique_ptr<Model> m;
  const Status s = load(tiny_gguf(spec), &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const Tensor& wq = m->weights.layers[0].wq;
  EXPECT_EQ(wq.dtype, DType::kQ8_0);
  EXPECT_EQ(wq.shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(wq.nbytes(), 32u * 34u);  // one 34-byte block per row of 32
  // The model's bytes are the file's tensor bytes.
  gguf::File f;
  ASSERT_TRUE(gguf::open(dir_ + "/m.gguf", &f).ok());
  uint64_t file_bytes = 0;
  for (const auto& t : f.tensors) file_bytes += t.size;
  EXPECT_EQ(m->weight_bytes(), file_bytes);
}

// The tiny llama with Llama 3.1's rope_freqs tensor holding `factors`.
GgufWriter with_rope_freqs(const std::vector<float>& factors) {
  GgufWriter w = tiny_gguf({});
  auto& t = w.add_tensor("rope_freqs.weight", {factors.size()}, ggml::Type::kF32);
  std::memcpy(t.data.data(), factors.data(), factors.size() * sizeof(float));
  return w;
}

TEST_F(GgufModelTest, RopeFreqsDivideTheFrequencies) {
  const std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};
  const GgufWriter w = with_rope_freqs(factors);
  std::unique_ptr<Model> m;
  const Status s = load(w, &m);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(m->config.rope_freq_factors, factors);
  ModelConfig plain = m->config;
  plain.rope_freq_factors.clear();
  const std::vector<float> scaled = rope_inv_freq(m->config);
  const std::vector<float> base = rope_inv_freq(plain);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(scaled[i], static_cast<float>(double(base[i]) / factors[i])) << i;
  }
}

// Llama 3.1's divisors travel into a .pvllm file as its own scaling type
// and come back the same; beside a scaling formula they are refused.
TEST_F(GgufModelTest, RopeFreqsTravelIntoAPvllmFile) {
  const std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};
  const GgufWriter w = with_rope_freqs(factors);
  std::unique_ptr<Model> m;
  ASSERT_TRUE(load(w, &m).ok());
  const std::string out = dir_ + "/m.pvllm";
  const Status written = write_pvllm(m.get(), out, {});
  ASSERT_TRUE(written.ok()) << written.message();
  std::unique_ptr<Model> back;
  const Status st = load_model(out, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back->config.rope_freq_factors, factors);
  EXPECT_EQ(back->config.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(rope_inv_freq(back->config), rope_inv_freq(m->config));
  // No tokenizer.ggml.model in the source: none carried.
  EXPECT_EQ(back->embedded_tokenizer.kind, EmbeddedTokenizer::Kind::kNone);

  std::unique_ptr<Model> both;
  ASSERT_TRUE(load(w, &both, "both.gguf").ok());
  both->config.rope_scaling.type = RopeScaling::Type::kLinear;
  const Status refused = write_pvllm(both.get(), dir_ + "/both.pvllm", {});
  EXPECT_EQ(refused.code(), StatusCode::kUnsupported) << refused.message();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/both.pvllm"));
}

TEST_F(GgufModelTest, PathsResolveToTheFile) {
  const std::string path = tiny_gguf({}).write(dir_ + "/only.gguf");
  ModelFiles files;
  ASSERT_TRUE(resolve_model_files(dir_, &files).ok());
  EXPECT_EQ(files.kind, ModelFiles::Kind::kGguf);
  EXPECT_EQ(files.weights, path);
  EXPECT_EQ(files.tokenizer, path);
  ASSERT_TRUE(resolve_model_files(path, &files).ok());
  EXPECT_EQ(files.kind, ModelFiles::Kind::kGguf);
}

TEST_F(GgufModelTest, InspectReadsTheTypes) {
  TinyGguf spec;
  spec.matrix = ggml::Type::kQ8_0;
  const std::string path = tiny_gguf(spec).write(dir_ + "/q.gguf");
  ModelSummary summary;
  ASSERT_TRUE(inspect_model(path, &summary).ok());
  EXPECT_EQ(summary.format, ModelFormat::kGguf);
  bool saw_q8 = false;
  for (const auto& t : summary.tensors) saw_q8 |= t.dtype == DType::kQ8_0;
  EXPECT_TRUE(saw_q8);
}

}  // namespace
}  // namespace pvllm
