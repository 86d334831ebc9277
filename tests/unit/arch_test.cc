// The architectures pvllm runs (Llama 2/3 with every RoPE scaling, Mistral,
// Qwen2, Qwen3): their configs honoured or refused field by field, their
// tensors taken or refused, and the CPU backend against a plain dense
// double-precision forward written from the transformers modeling code
// (tests/util/dense_reference.h) on a tiny model of each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/util/dense_reference.h"
#include "tests/util/refused_fields.h"
#include "tests/util/sequence_driver.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::DenseReference;
using testing::SequenceDriver;

class ArchTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("pvllm_arch_"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const testing::TinyModelSpec& spec) {
    const std::string d = dir_ + "/" + name + std::to_string(count_++);
    fs::create_directories(d);
    return testing::write_tiny_hf_model(d, spec);
  }
  std::string write(const std::string& tiny) { return write(tiny, testing::tiny_arch_spec(tiny)); }
  static void edit_config(const std::string& dir, const json& set) {
    testing::edit_hf_config(dir, set);
  }
  static std::unique_ptr<Model> load_ok(const std::string& path) {
    std::unique_ptr<Model> m;
    const Status s = load_model(path, &m);
    EXPECT_TRUE(s.ok()) << s.message();
    return m;
  }
  std::string dir_;
  int count_ = 0;
};

std::unique_ptr<Backend> cpu_backend(const Model& m, int32_t block_size = 4) {
  BackendOptions o;
  o.num_blocks = 64;
  o.block_size = block_size;
  o.num_threads = 2;
  std::unique_ptr<Backend> b;
  const Status s = create_cpu_backend(m, o, &b);
  EXPECT_TRUE(s.ok()) << s.message();
  return b;
}

// Token ids spread over the vocabulary, never the special ids 0..2.
std::vector<int32_t> prompt_ids(int32_t n, int32_t vocab) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n; ++i) ids.push_back(3 + (7 * i + 11) % (vocab - 3));
  return ids;
}

// ------------------------------------------------------------ the configs

TEST_F(ArchTest, EachTinyModelLoadsWithWhatItsConfigSays) {
  std::unique_ptr<Model> m = load_ok(write("llama3"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.architecture, "llama");
  EXPECT_EQ(m->config.rope_theta, 500000.0f);
  EXPECT_EQ(m->config.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(m->config.rope_scaling.original_max_position_embeddings, 32);
  // config.json lists 2 and 5; generation_config.json adds 7.
  EXPECT_EQ(m->config.eos_token_id, 2);
  EXPECT_EQ(m->config.extra_stop_token_ids, (std::vector<int32_t>{5, 7}));

  m = load_ok(write("qwen2"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.architecture, "qwen2");
  EXPECT_TRUE(m->config.qkv_bias);
  EXPECT_FALSE(m->config.o_bias);
  EXPECT_TRUE(m->config.tie_word_embeddings);
  EXPECT_EQ(m->config.sliding_window, 0);  // use_sliding_window false: 4096 is not in effect
  EXPECT_EQ(m->weights.layers[1].bk.shape, (std::vector<int64_t>{16}));
  EXPECT_TRUE(m->weights.layers[1].bo.empty());

  m = load_ok(write("qwen3"));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->config.qk_norm);
  EXPECT_FALSE(m->config.qkv_bias);
  EXPECT_EQ(m->config.head_dim, 16);
  EXPECT_EQ(m->weights.layers[0].wq.shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(m->weights.layers[0].k_norm.shape, (std::vector<int64_t>{16}));

  m = load_ok(write("mistral"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.sliding_window, 8);

  m = load_ok(write("llama-bias"));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->config.qkv_bias && m->config.o_bias);
  EXPECT_EQ(m->weights.layers[0].bo.shape, (std::vector<int64_t>{32}));

  m = load_ok(write("llama-dynamic"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.rope_scaling.type, RopeScaling::Type::kDynamic);
  EXPECT_EQ(m->config.rope_scaling.factor, 2.0f);
  // Not given in rope_scaling: the model's own context, as transformers does.
  EXPECT_EQ(m->config.rope_scaling.original_max_position_embeddings, 16);
}

TEST_F(ArchTest, BothConfigSpellingsReadTheSame) {
  std::unique_ptr<Model> v4 = load_ok(write("llama3"));
  std::unique_ptr<Model> v5 = load_ok(write("llama3-v5"));
  ASSERT_TRUE(v4 && v5);
  json v5_config = json::parse(std::ifstream(v5->path + "/config.json"));
  ASSERT_TRUE(v5_config.contains("rope_parameters"));
  ASSERT_FALSE(v5_config.contains("rope_theta"));
  const ModelConfig& a = v4->config;
  const ModelConfig& b = v5->config;
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
            b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(rope_inv_freq(a), rope_inv_freq(b));
}

TEST_F(ArchTest, BothSpellingsInOneFileMustAgree) {
  const std::string dir = write("llama3");
  edit_config(dir, {{"rope_parameters",
                     {{"rope_type", "llama3"},
                      {"rope_theta", 500000.0},
                      {"factor", 8.0},
                      {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0},
                      {"original_max_position_embeddings", 32}}}});
  EXPECT_TRUE(load_ok(dir));
  edit_config(dir, {{"rope_theta", 10000.0}});
  std::unique_ptr<Model> m;
  const Status s = load_model(dir, &m);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_NE(s.message().find("rope_parameters"), std::string::npos) << s.message();
}

TEST_F(ArchTest, GenerationConfigEosIdsAddStopIds) {
  testing::TinyModelSpec spec = testing::tiny_arch_spec("llama2");
  spec.eos_ids = {2};
  spec.generation_eos_ids = {9, 2, 11};
  std::unique_ptr<Model> m = load_ok(write("gen", spec));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config.eos_token_id, 2);
  EXPECT_EQ(m->config.extra_stop_token_ids, (std::vector<int32_t>{9, 11}));
}

class RefusedFieldTest : public ArchTest,
                         public ::testing::WithParamInterface<testing::RefusedField> {};

TEST_P(RefusedFieldTest, IsUnsupportedNamingFieldAndValue) {
  const testing::RefusedField& r = GetParam();
  const std::string dir = write(r.tiny);
  edit_config(dir, r.set);
  std::unique_ptr<Model> m;
  const Status s = load_model(dir, &m);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_FALSE(m);
  const std::string named = "field \"" + r.field + "\" = " + r.value;
  EXPECT_NE(s.message().find(named), std::string::npos)
      << "message \"" << s.message() << "\" does not contain " << named;
  EXPECT_NE(s.message().find(dir + "/config.json"), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Fields, RefusedFieldTest, ::testing::ValuesIn(testing::refused_fields()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(ArchTest, EveryKeyOfEachTinyConfigIsAccepted) {
  // The negative side of the refusals: what the writers put in a config,
  // as transformers saves it, loads.
  for (const std::string& name : testing::tiny_arch_names()) {
    EXPECT_TRUE(load_ok(write(name))) << name;
  }
}

// ------------------------------------------------------------ the tensors

// Adds a tensor of `shape` (f32 zeros) to a single-file checkpoint.
void add_tensor(const std::string& dir, const std::string& name, std::vector<int64_t> shape,
                const std::string& copy_of = "") {
  const std::string path = dir + "/model.safetensors";
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, len));
  std::string data = bytes.substr(8 + len);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::string extra(n * 4, '\0');
  if (!copy_of.empty()) {
    const auto off = header[copy_of]["data_offsets"];
    extra = data.substr(off[0].get<size_t>(), off[1].get<size_t>() - off[0].get<size_t>());
    extra[0] ^= 1;  // one bit apart
  }
  header[name] = {{"dtype", "F32"},
                  {"shape", shape},
                  {"data_offsets", {data.size(), data.size() + extra.size()}}};
  data += extra;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t new_len = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&new_len), 8);
  out << text << data;
}

TEST_F(ArchTest, ATensorTheConfigDoesNotUseIsRefused) {
  const std::string dir = write("llama2");  // attention_bias false
  const std::string name = "model.layers.1.self_attn.q_proj.bias";
  add_tensor(dir, name, {32});
  std::unique_ptr<Model> m;
  const Status s = load_model(dir, &m);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("model.safetensors"), std::string::npos) << s.message();
}

TEST_F(ArchTest, QkNormOnLlamaIsRefused) {
  const std::string dir = write("llama2");
  add_tensor(dir, "model.layers.0.self_attn.q_norm.weight", {8});
  std::unique_ptr<Model> m;
  EXPECT_EQ(load_model(dir, &m).code(), StatusCode::kUnsupported);
}

TEST_F(ArchTest, RotaryInvFreqBuffersAreDerivedAndAccepted) {
  const std::string dir = write("llama2");
  add_tensor(dir, "model.layers.0.self_attn.rotary_emb.inv_freq", {4});
  EXPECT_TRUE(load_ok(dir));
}

TEST_F(ArchTest, MissingBiasOrNormIsNamed) {
  for (const char* tiny : {"qwen2", "qwen3"}) {
    const std::string dir = write(tiny);
    edit_config(dir, {{"num_hidden_layers", 1}});  // layer 1's tensors become extra
    std::unique_ptr<Model> m;
    const Status s = load_model(dir, &m);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_NE(s.message().find("model.layers.1."), std::string::npos) << s.message();
  }
  // Qwen3 without its q_norm: the config asks for it.
  const std::string dir = write("qwen3");
  edit_config(dir, {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}});
  std::unique_ptr<Model> m;
  Status s = load_model(dir, &m);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();  // attention_bias is not qwen2's
  edit_config(dir, {{"attention_bias", nullptr}});
  s = load_model(dir, &m);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.message();
  EXPECT_NE(s.message().find("q_proj.bias"), std::string::npos) << s.message();
}

TEST_F(ArchTest, TiedHeadThatDiffersFromTheEmbeddingIsRefused) {
  const std::string dir = write("qwen2");  // tied
  add_tensor(dir, "lm_head.weight", {testing::tiny_tokenizer_vocab_size(), 32},
             "model.embed_tokens.weight");
  std::unique_ptr<Model> m;
  const Status s = load_model(dir, &m);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_NE(s.message().find("lm_head.weight"), std::string::npos) << s.message();
}

// ------------------------------------------------- the forward on the CPU

class ArchForwardTest : public ArchTest, public ::testing::WithParamInterface<std::string> {};

// A prompt of 24 tokens (longer than the Mistral window of 8 and the
// dynamic model's context of 16), fed in `chunks`, then greedy decode steps:
// every row's logits against the dense reference run through the same steps.
void expect_matches_reference(const Model& m, const std::vector<int32_t>& chunks, int decode) {
  const int32_t vocab = m.config.vocab_size;
  std::unique_ptr<Backend> b = cpu_backend(m);
  ASSERT_TRUE(b);
  SequenceDriver engine(b.get(), vocab);
  DenseReference ref(m);
  int32_t total = 0;
  for (int32_t c : chunks) total += c;
  const std::vector<int32_t> prompt = prompt_ids(total, vocab);
  std::vector<std::vector<int32_t>> steps;
  for (int32_t at = 0, i = 0; i < static_cast<int32_t>(chunks.size()); at += chunks[i++]) {
    steps.emplace_back(prompt.begin() + at, prompt.begin() + at + chunks[i]);
  }
  double max_diff = 0.0, max_logit = 0.0;
  const int num_steps = static_cast<int>(steps.size()) + decode;
  for (int s = 0; s < num_steps; ++s) {
    std::vector<float> got;
    const Status st = engine.step(steps[s], &got);
    ASSERT_TRUE(st.ok()) << st.message();
    const std::vector<double> want = ref.step(steps[s]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
      max_logit = std::max(max_logit, std::abs(want[i]));
    }
    const int32_t next = testing::argmax(got.data() + got.size() - vocab, vocab);
    steps.push_back({next});
  }
  EXPECT_GT(max_logit, 0.5);  // the logits are not all near zero
  EXPECT_LT(max_diff, 1e-4 * std::max(1.0, max_logit))
      << m.config.architecture << ": max |logit - reference| " << max_diff;
}

TEST_P(ArchForwardTest, PrefillThenDecodeMatchesTheDenseReference) {
  std::unique_ptr<Model> m = load_ok(write(GetParam()));
  ASSERT_TRUE(m);
  expect_matches_reference(*m, {24}, 6);
}

TEST_P(ArchForwardTest, ChunkedPrefillMatchesTheDenseReference) {
  std::unique_ptr<Model> m = load_ok(write(GetParam()));
  ASSERT_TRUE(m);
  expect_matches_reference(*m, {5, 11, 8}, 3);
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchForwardTest, ::testing::ValuesIn(testing::tiny_arch_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The last row's logits after feeding `n` prompt tokens in one step.
std::vector<float> last_logits(const Model& m, int32_t n) {
  std::unique_ptr<Backend> b = cpu_backend(m);
  SequenceDriver d(b.get(), m.config.vocab_size);
  std::vector<float> logits;
  EXPECT_TRUE(d.step(prompt_ids(n, m.config.vocab_size), &logits).ok());
  return std::vector<float>(logits.end() - m.config.vocab_size, logits.end());
}

TEST_F(ArchTest, SlidingWindowMattersOnlyPastTheWindow) {
  std::unique_ptr<Model> windowed = load_ok(write("mistral"));
  std::unique_ptr<Model> full = load_ok(write("mistral"));
  ASSERT_TRUE(windowed && full);
  full->config.sliding_window = 0;  // the same weights, plain causal attention
  // 8 tokens fit the window: the same attention, bit for bit.
  EXPECT_EQ(last_logits(*windowed, 8), last_logits(*full, 8));
  // 24 tokens do not: the last one no longer sees the first 16.
  const std::vector<float> a = last_logits(*windowed, 24);
  const std::vector<float> b = last_logits(*full, 24);
  double diff = 0.0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::abs(a[i] - b[i])));
  EXPECT_GT(diff, 1e-3);
}

TEST_F(ArchTest, BlocksBeforeTheWindowAreNeverRead) {
  std::unique_ptr<Model> m = load_ok(write("mistral"));  // window 8, block size 4 below
  ASSERT_TRUE(m);
  const int32_t vocab = m->config.vocab_size;
  const std::vector<int32_t> prompt = prompt_ids(30, vocab);
  std::vector<float> kept, freed;
  for (bool free_early : {false, true}) {
    std::unique_ptr<Backend> b = cpu_backend(*m);
    SequenceDriver d(b.get(), vocab);
    std::vector<float> logits;
    ASSERT_TRUE(d.step(std::vector<int32_t>(prompt.begin(), prompt.end() - 1), &logits).ok());
    // The decode row is at position 29: its window is 22..29, so blocks
    // 0..4 (positions 0..19) are wholly before it; the KV manager may have
    // freed them and marks them -1.
    const Status s = d.step({prompt.back()}, free_early ? &freed : &kept, [&](BatchMetadata* md) {
      if (!free_early) return;
      for (int32_t blk = 0; blk < 5; ++blk) md->block_tables[blk] = -1;
    });
    ASSERT_TRUE(s.ok()) << s.message();
  }
  EXPECT_EQ(kept, freed);
  // Block 5 (positions 20..23) holds 22 and 23: it must stay valid.
  std::unique_ptr<Backend> b = cpu_backend(*m);
  SequenceDriver d(b.get(), vocab);
  std::vector<float> logits;
  ASSERT_TRUE(d.step(std::vector<int32_t>(prompt.begin(), prompt.end() - 1), &logits).ok());
  const Status s =
      d.step({prompt.back()}, &logits, [](BatchMetadata* md) { md->block_tables[5] = -1; });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
}

TEST_F(ArchTest, DynamicRopeFollowsTheSequenceLength) {
  std::unique_ptr<Model> m = load_ok(write("llama-dynamic"));  // context 16, factor 2
  ASSERT_TRUE(m);
  EXPECT_TRUE(rope_depends_on_length(m->config));
  // Within the context the frequencies are the plain ones...
  ModelConfig plain = m->config;
  plain.rope_scaling = RopeScaling();
  EXPECT_EQ(rope_inv_freq(m->config, 16), rope_inv_freq(plain));
  // ...past it the base grows, so a 24-token prompt differs from plain RoPE.
  std::unique_ptr<Model> p = load_ok(write("llama-dynamic"));
  p->config.rope_scaling = RopeScaling();
  EXPECT_EQ(last_logits(*m, 12), last_logits(*p, 12));
  EXPECT_NE(last_logits(*m, 24), last_logits(*p, 24));
}

}  // namespace
}  // namespace pvllm
