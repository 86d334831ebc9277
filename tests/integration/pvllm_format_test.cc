// The .pvllm model file: conversion from every source pvllm loads gives the
// same tokens and logprobs as the source (every tiny architecture, both
// layouts, every source format, dtype conversions against sources written
// in that dtype), the tokenizer and chat templates travel inside it, and
// every kind of broken file is a clear status.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "core/base/panel_layout.h"
#include "core/chat/chat_template.h"
#include "core/model/pvllm_file.h"
#include "core/tokenizer/tokenizer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/packed_matrix.h"
#include "tests/integration/engine_harness.h"
#include "tests/integration/forwarding_backend.h"
#include "tests/util/pvllm_file_edit.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

namespace fs = std::filesystem;
namespace fb = pvllm::format;

// dir + name, created.
std::string subdir(const std::string& dir, const std::string& name) {
  fs::create_directories(dir + name);
  return dir + name;
}

// Prompts long enough for llama-dynamic (max_position_embeddings 16) to
// grow its RoPE base, and short ones.
std::vector<std::vector<int32_t>> prompts() {
  std::vector<int32_t> longer = {1};
  for (int32_t i = 0; i < 22; ++i) longer.push_back(3 + (i * 37) % 200);
  return {{1, 10, 20, 30}, {1, 50}, longer};
}

struct Generation {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<OutputLogprobs>> logprobs;
};

Generation generate(const std::string& model_path, ChecksumMode checksums = ChecksumMode::kFull,
                    decltype(EngineConfig::backend_factory) factory = nullptr) {
  EngineConfig config;
  config.model_path = model_path;
  config.device = "cpu";
  config.num_threads = 1;
  config.model_checksums = checksums;
  config.backend_factory = std::move(factory);
  auto engine = make_engine(config);
  std::vector<uint64_t> ids;
  for (const auto& p : prompts()) {
    SamplingParams params = greedy(8);
    params.logprobs = 5;
    uint64_t id = 0;
    const Status st = engine->submit_tokens(p, params, 0, &id);
    EXPECT_TRUE(st.ok()) << st.message();
    ids.push_back(id);
  }
  Outputs out = run_to_completion(engine.get());
  Generation g;
  for (uint64_t id : ids) {
    g.tokens.push_back(out.at({id, 0}).token_ids);
    g.logprobs.push_back(out.at({id, 0}).logprobs);
  }
  return g;
}

// Tokens and every logprob (chosen and top 5) bit for bit.
void expect_same(const Generation& a, const Generation& b, const std::string& what) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (size_t r = 0; r < a.tokens.size(); ++r) {
    EXPECT_EQ(a.tokens[r], b.tokens[r]) << what << ", prompt " << r;
    ASSERT_EQ(a.logprobs[r].size(), b.logprobs[r].size()) << what;
    for (size_t i = 0; i < a.logprobs[r].size(); ++i) {
      const OutputLogprobs& x = a.logprobs[r][i];
      const OutputLogprobs& y = b.logprobs[r][i];
      EXPECT_EQ(x.logprob, y.logprob) << what << ", prompt " << r << ", token " << i;
      ASSERT_EQ(x.top.size(), y.top.size());
      for (size_t k = 0; k < x.top.size(); ++k) {
        EXPECT_EQ(x.top[k].token_id, y.top[k].token_id) << what;
        EXPECT_EQ(x.top[k].logprob, y.top[k].logprob) << what;
      }
    }
  }
}

// The same ids from both tokenizers for each text (special tokens added).
void expect_same_ids(const Tokenizer& a, const Tokenizer& b,
                     std::initializer_list<const char*> texts) {
  for (const char* text : texts) {
    std::vector<int32_t> x, y;
    ASSERT_TRUE(a.encode(text, true, &x).ok()) << text;
    ASSERT_TRUE(b.encode(text, true, &y).ok()) << text;
    EXPECT_EQ(x, y) << text;
  }
}

// A copy of the .pvllm file `path` at `out` with one byte of `tensor` flipped.
// A one-message conversation ("Hi" from the user) through `templates`.
std::string render_hi(const chat::ChatTemplates& templates) {
  chat::ChatRequest request;
  EXPECT_TRUE(
      chat::parse_chat_request(R"([{"role":"user","content":"Hi"}])", nullptr, nullptr, &request)
          .ok());
  std::string rendered;
  EXPECT_TRUE(templates.apply(request, &rendered).ok());
  return rendered;
}

void damaged_copy(const std::string& path, const std::string& tensor, const std::string& out) {
  std::shared_ptr<MappedFile> f;
  pvllm_format::FileHeader h;
  ASSERT_TRUE(pvllm_format::open_file(path, &f, &h).ok());
  std::string bytes = read_bytes(path);
  bool found = false;
  for (const auto& e : h.tensors) {
    if (e.name != tensor) continue;
    bytes[e.offset + e.size / 2] ^= 0x20;
    found = true;
  }
  ASSERT_TRUE(found) << tensor;
  write_bytes(out, bytes);
}

// The status of creating an engine over `path` (the engine is dropped).
Status create_status(const std::string& path, ChecksumMode checksums,
                     decltype(EngineConfig::backend_factory) factory = nullptr) {
  EngineConfig config;
  config.model_path = path;
  config.device = "cpu";
  config.model_checksums = checksums;
  config.backend_factory = std::move(factory);
  std::unique_ptr<Engine> engine;
  return Engine::create(config, &engine);
}

ConvertOptions layout(bool packed,
                      ConvertOptions::DTypeChoice dtype = ConvertOptions::DTypeChoice::kKeep) {
  ConvertOptions o;
  o.packed = packed;
  o.dtype = dtype;
  return o;
}

// Every tiny architecture, packed and row-major.
class PvllmRoundTripTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(PvllmRoundTripTest, SameTokensAndLogprobsAsTheSource) {
  const auto& [arch, packed] = GetParam();
  const std::string dir = make_temp_dir("pvllm_rt");
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), tiny_arch_spec(arch));
  const std::string out = dir + "/model.pvllm";
  convert_model(src, out, layout(packed));
  std::unique_ptr<Model> model;
  ASSERT_TRUE(load_model(out, &model).ok());
  EXPECT_EQ(model->format, ModelFormat::kPvllm);
  EXPECT_EQ(model->weights.is_packed(), packed);
  EXPECT_EQ(model->config.architecture, tiny_arch_spec(arch).arch);
  expect_same(generate(src), generate(out), arch);
}

INSTANTIATE_TEST_SUITE_P(EveryArch, PvllmRoundTripTest,
                         ::testing::Combine(::testing::ValuesIn(tiny_arch_names()),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) +
                                              (std::get<1>(info.param) ? "_packed" : "_rowmajor");
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(PvllmSourcesTest, Llama2cCheckpointConvertsExactly) {
  const std::string dir = make_temp_dir("pvllm_l2c");
  TinyModelSpec spec;
  const std::string bin = write_tiny_llama2c_model(dir, spec);
  for (bool packed : {true, false}) {
    const std::string out = dir + (packed ? "/packed.pvllm" : "/rowmajor.pvllm");
    convert_model(bin, out, layout(packed));
    expect_same(generate(bin), generate(out), out);
    std::unique_ptr<Model> model;
    ASSERT_TRUE(load_model(out, &model).ok());
    // llama2.c's conventions travel: interleaved RoPE, BOS ends a story.
    EXPECT_EQ(model->config.rope_style, RopeStyle::kInterleaved);
    EXPECT_EQ(model->config.extra_stop_token_ids, std::vector<int32_t>{1});
  }
}

// llama.cpp's own GGUF files (tests/data/gguf) convert with their blocks as
// they are: the same tokens and logprobs bit for bit, plain, quantized,
// mixed and split, and the same tokenizer and chat side from the GGUF
// metadata the .pvllm file carries, with the source gone.
TEST(PvllmSourcesTest, GgufFilesConvertExactly) {
  const char* data = std::getenv("PVLLM_TEST_DATA");
  if (data == nullptr) GTEST_SKIP() << "needs PVLLM_TEST_DATA (run through ctest)";
  const std::string dir = make_temp_dir("pvllm_gguf_src");
  for (const char* name :
       {"stories260K-F32.gguf", "stories260K-Q8_0-pure.gguf", "stories260K-Q4_K_M.gguf",
        "stories260K-IQ4_XS.gguf", "stories260K-Q4_K_M-split-00002-of-00003.gguf"}) {
    SCOPED_TRACE(name);
    const std::string src = std::string(data) + "/gguf/" + name;
    const std::string out = dir + "/" + name + ".pvllm";
    convert_model(src, out);
    expect_same(generate(src), generate(out), name);
    pvllm_format::FileHeader header;
    ASSERT_TRUE(pvllm_format::read_header(out, &header).ok());
    EXPECT_EQ(header.source_format, ModelFormat::kGguf);
    EXPECT_EQ(header.tokenizer.kind, EmbeddedTokenizer::Kind::kGguf);
    // The source's copy sits apart: the .pvllm file alone serves text.
    const std::string alone = dir + "/alone.pvllm";
    fs::rename(out, alone);
    std::unique_ptr<Tokenizer> from_gguf, from_file;
    ASSERT_TRUE(Tokenizer::load(src, &from_gguf).ok());
    const Status loaded = Tokenizer::load(alone, &from_file);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_STREQ(from_file->kind(), "gguf");
    expect_same_ids(*from_gguf, *from_file,
                    {"Once upon a time", "Lily saw a <s> dog.", " two  spaces", "é"});
    chat::ChatTemplates templates_gguf, templates_file;
    ASSERT_TRUE(chat::ChatTemplates::load(src, &templates_gguf).ok());
    const Status chat_loaded = chat::ChatTemplates::load(alone, &templates_file);
    ASSERT_TRUE(chat_loaded.ok()) << chat_loaded.message();
    EXPECT_EQ(templates_file.names(), templates_gguf.names());
    EXPECT_EQ(templates_file.bos_token(), templates_gguf.bos_token());
    EngineConfig config;
    config.model_path = alone;
    config.device = "cpu";
    auto engine = make_engine(config);
    uint64_t id = 0;
    ASSERT_TRUE(engine->submit_text("Once upon a time", greedy(4), 0, &id).ok());
    EXPECT_EQ(run_to_completion(engine.get()).at({id, 0}).token_ids.size(), 4u);
  }
  fs::remove_all(dir);
}

TEST(PvllmSourcesTest, ShardedCheckpointConvertsExactly) {
  const std::string dir = make_temp_dir("pvllm_shards");
  TinyModelSpec spec = tiny_arch_spec("llama3");
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), spec, /*num_shards=*/3);
  convert_model(src, dir + "/m.pvllm");
  expect_same(generate(src), generate(dir + "/m.pvllm"), "sharded");
}

TEST(PvllmSourcesTest, PvllmFileReconvertsBetweenLayouts) {
  const std::string dir = make_temp_dir("pvllm_re");
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), tiny_arch_spec("qwen3"));
  convert_model(src, dir + "/a.pvllm", layout(true));
  convert_model(dir + "/a.pvllm", dir + "/b.pvllm", layout(false));
  convert_model(dir + "/b.pvllm", dir + "/c.pvllm", layout(true));
  const Generation want = generate(src);
  expect_same(want, generate(dir + "/b.pvllm"), "packed to row-major");
  expect_same(want, generate(dir + "/c.pvllm"), "and back");
  // Packing is deterministic: the same tensor bytes, hence checksums.
  std::shared_ptr<MappedFile> fa, fc;
  pvllm_format::FileHeader ha, hc;
  ASSERT_TRUE(pvllm_format::open_file(dir + "/a.pvllm", &fa, &ha).ok());
  ASSERT_TRUE(pvllm_format::open_file(dir + "/c.pvllm", &fc, &hc).ok());
  ASSERT_EQ(ha.tensors.size(), hc.tensors.size());
  for (size_t i = 0; i < ha.tensors.size(); ++i) {
    EXPECT_EQ(ha.tensors[i].name, hc.tensors[i].name);
    EXPECT_EQ(ha.tensors[i].checksum, hc.tensors[i].checksum) << ha.tensors[i].name;
  }
}

TEST(PvllmSourcesTest, LazyChecksumsServeTheSameModel) {
  const std::string dir = make_temp_dir("pvllm_lazy");
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), tiny_arch_spec("qwen2"));
  convert_model(src, dir + "/m.pvllm");
  expect_same(generate(dir + "/m.pvllm", ChecksumMode::kFull),
              generate(dir + "/m.pvllm", ChecksumMode::kLazy), "lazy");
}

// A conversion to bf16 or fp16 rounds as the tiny writer does (to nearest
// even), so it serves exactly the checkpoint written in that dtype; fp32 of
// a half-precision checkpoint widens exactly.
TEST(PvllmDtypeTest, ConvertedDtypesMatchCheckpointsWrittenInThem) {
  using C = ConvertOptions::DTypeChoice;
  const std::string dir = make_temp_dir("pvllm_dtype");
  TinyModelSpec spec = tiny_arch_spec("llama-bias");
  const std::string f32 = write_tiny_hf_model(subdir(dir, "/f32"), spec);
  for (const auto& [choice, dtype, name] :
       {std::tuple{C::kBF16, DType::kBF16, "bf16"}, std::tuple{C::kF16, DType::kF16, "fp16"}}) {
    spec.dtype = dtype;
    const std::string half = write_tiny_hf_model(subdir(dir, std::string("/") + name), spec);
    for (bool packed : {true, false}) {
      const std::string out = dir + "/" + name + (packed ? "_p" : "_r") + ".pvllm";
      convert_model(f32, out, layout(packed, choice));
      std::unique_ptr<Model> model;
      ASSERT_TRUE(load_model(out, &model).ok());
      EXPECT_EQ(model->weights.embed.dtype, dtype);
      expect_same(generate(half), generate(out), out);
    }
    const std::string widened = dir + "/" + name + "_to_f32.pvllm";
    convert_model(half, widened, layout(true, C::kF32));
    expect_same(generate(half), generate(widened), widened);
  }
}

TEST(PvllmTokenizerTest, CarriesSentencepieceModelAndChatTemplates) {
  const std::string dir = make_temp_dir("pvllm_tok");
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), TinyModelSpec());
  const char* data = std::getenv("PVLLM_TEST_DATA");
  if (data == nullptr) GTEST_SKIP() << "needs PVLLM_TEST_DATA (run through ctest)";
  fs::copy_file(fs::path(data) / "chat_template_tiny" / "tokenizer_config.json",
                fs::path(src) / "tokenizer_config.json");
  const std::string out = dir + "/m.pvllm";
  convert_model(src, out);
  // The source folder is gone: everything comes from the file.
  const std::string moved = dir + "/alone.pvllm";
  fs::rename(out, moved);
  std::unique_ptr<Tokenizer> from_folder, from_file;
  ASSERT_TRUE(Tokenizer::load(src, &from_folder).ok());
  ASSERT_TRUE(Tokenizer::load(moved, &from_file).ok());
  fs::remove_all(src);
  expect_same_ids(*from_folder, *from_file,
                  {"Once upon a time", "héllo wörld 123", " leading space", "日本"});
  chat::ChatTemplates templates;
  const Status st = chat::ChatTemplates::load(moved, &templates);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(templates.empty());
  EXPECT_EQ(templates.bos_token(), "<s>");
  const std::string rendered = render_hi(templates);
  EXPECT_NE(rendered.find("Hi"), std::string::npos) << rendered;
  // An engine serves text prompts from the file alone.
  EngineConfig config;
  config.model_path = moved;
  config.device = "cpu";
  auto engine = make_engine(config);
  uint64_t id = 0;
  ASSERT_TRUE(engine->submit_text("Once upon a time", greedy(4), 0, &id).ok());
  Outputs outs = run_to_completion(engine.get());
  EXPECT_EQ(outs.at({id, 0}).token_ids.size(), 4u);
}

TEST(PvllmTokenizerTest, CarriesTokenizerJsonOfQwen3) {
  const char* refs = std::getenv("PVLLM_REFERENCE_TOKENIZERS");
  const fs::path package =
      refs == nullptr ? fs::path() : fs::path(refs) / "tokenizer-qwen3" / "models";
  if (refs == nullptr || !fs::exists(package / "tokenizer.json")) {
    GTEST_SKIP() << "needs PVLLM_REFERENCE_TOKENIZERS with tokenizer-qwen3 "
                    "(bash scripts/reference/install.sh)";
  }
  const std::string dir = make_temp_dir("pvllm_json");
  TinyModelSpec spec = tiny_arch_spec("qwen3");
  spec.vocab_size = 151936;
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), spec);
  fs::remove(fs::path(src) / "tokenizer.model");
  fs::copy_file(package / "tokenizer.json", fs::path(src) / "tokenizer.json");
  fs::copy_file(package / "tokenizer_config.json", fs::path(src) / "tokenizer_config.json");
  convert_model(src, dir + "/q.pvllm");
  std::unique_ptr<Tokenizer> a, b;
  ASSERT_TRUE(Tokenizer::load(src, &a).ok());
  ASSERT_TRUE(Tokenizer::load(dir + "/q.pvllm", &b).ok());
  EXPECT_EQ(a->eos_id(), b->eos_id());
  EXPECT_EQ(a->vocab_size(), b->vocab_size());
  expect_same_ids(*a, *b,
                  {"Hello, world!", "<|im_start|>user\nhi<|im_end|>", "def f(x):\n  return x"});
  chat::ChatTemplates ta, tb;
  ASSERT_TRUE(chat::ChatTemplates::load(src, &ta).ok());
  ASSERT_TRUE(chat::ChatTemplates::load(dir + "/q.pvllm", &tb).ok());
  EXPECT_EQ(ta.names(), tb.names());
  EXPECT_EQ(ta.eos_token(), tb.eos_token());
}

// A backend other than the built-in CPU one (here the CPU backend behind a
// wrapper, as the engine tests build theirs) gets the packed matrices
// row-major: the engine unpacks them before opening it, checking a lazily
// checked file's tensors as it reads them.
TEST(PvllmSourcesTest, OtherBackendsGetUnpackedRowMajorWeights) {
  const std::string dir = make_temp_dir("pvllm_other");
  TinyModelSpec spec = tiny_arch_spec("llama-bias");
  spec.tie_word_embeddings = false;
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), spec);
  convert_model(src, dir + "/m.pvllm");
  bool saw_row_major = false;
  auto factory = [&saw_row_major](const Model& m, const BackendOptions& o,
                                  std::unique_ptr<Backend>* out) {
    saw_row_major = !m.weights.is_packed() && !m.weights.layers[0].wq.empty() &&
                    m.weights.layers[0].wq.layout == Layout::kRowMajor &&
                    !m.weights.lm_head.empty();
    std::unique_ptr<Backend> cpu;
    PVLLM_RETURN_IF_ERROR(create_cpu_backend(m, o, &cpu));
    *out = std::make_unique<ForwardingBackend>(std::move(cpu));
    return Status::Ok();
  };
  const Generation want = generate(src);
  for (ChecksumMode mode : {ChecksumMode::kFull, ChecksumMode::kLazy}) {
    saw_row_major = false;
    expect_same(want, generate(dir + "/m.pvllm", mode, factory), "unpacked");
    EXPECT_TRUE(saw_row_major);
  }
  // A damaged packed tensor is found by the unpacking read, lazily.
  damaged_copy(dir + "/m.pvllm", "model.layers.1.mlp.gate_up_proj.weight", dir + "/bad.pvllm");
  const Status st = create_status(dir + "/bad.pvllm", ChecksumMode::kLazy, factory);
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel) << st.message();
  EXPECT_NE(st.message().find("gate_up_proj.weight does not match its checksum"), std::string::npos)
      << st.message();
}

// A model over 16 MiB: checksums and the page reads run on several threads;
// a damaged tensor is still named, in both modes.
TEST(PvllmSourcesTest, LargeModelsAreCheckedOnSeveralThreads) {
  const std::string dir = make_temp_dir("pvllm_large");
  TinyModelSpec spec;
  spec.hidden_size = 256;
  spec.intermediate_size = 1024;
  spec.num_layers = 5;
  spec.num_heads = 8;
  spec.num_kv_heads = 4;
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), spec);
  convert_model(src, dir + "/m.pvllm");
  ASSERT_GT(fs::file_size(dir + "/m.pvllm"), uintmax_t{16} << 20);
  const Generation want = generate(src);
  expect_same(want, generate(dir + "/m.pvllm", ChecksumMode::kFull), "full");
  expect_same(want, generate(dir + "/m.pvllm", ChecksumMode::kLazy), "lazy");
  damaged_copy(dir + "/m.pvllm", "model.layers.2.mlp.down_proj.weight", dir + "/bad.pvllm");
  for (ChecksumMode mode : {ChecksumMode::kFull, ChecksumMode::kLazy}) {
    const Status st = create_status(dir + "/bad.pvllm", mode);
    EXPECT_EQ(st.code(), StatusCode::kCorruptModel) << st.message();
    EXPECT_NE(st.message().find("layers.2.mlp.down_proj.weight does not match"), std::string::npos)
        << st.message();
  }
  // Converting the damaged file again checks it while reading: no output.
  std::unique_ptr<Model> model;
  LoadOptions lazy;
  lazy.checksums = ChecksumMode::kLazy;
  ASSERT_TRUE(load_model(dir + "/bad.pvllm", &model, lazy).ok());
  const Status st = write_pvllm(model.get(), dir + "/again.pvllm", ConvertOptions());
  EXPECT_EQ(st.code(), StatusCode::kCorruptModel) << st.message();
  EXPECT_FALSE(fs::exists(dir + "/again.pvllm"));
}

// What the folder carries besides the weights travels: chat_template.jinja
// (which overrides tokenizer_config.json's template); a folder without any
// tokenizer gives a file without one.
TEST(PvllmTokenizerTest, ChatTemplateJinjaTravelsAndNoTokenizerStaysNone) {
  const std::string dir = make_temp_dir("pvllm_jinja");
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), TinyModelSpec());
  {
    std::ofstream out(src + "/chat_template.jinja");
    out << "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  }
  convert_model(src, dir + "/j.pvllm");
  chat::ChatTemplates templates;
  ASSERT_TRUE(chat::ChatTemplates::load(dir + "/j.pvllm", &templates).ok());
  EXPECT_EQ(render_hi(templates), "<user>Hi");

  fs::remove(src + "/tokenizer.model");
  fs::remove(src + "/chat_template.jinja");
  convert_model(src, dir + "/none.pvllm");
  std::unique_ptr<Model> model;
  ASSERT_TRUE(load_model(dir + "/none.pvllm", &model).ok());
  EXPECT_EQ(model->embedded_tokenizer.kind, EmbeddedTokenizer::Kind::kNone);
  std::unique_ptr<Tokenizer> tokenizer;
  EXPECT_EQ(Tokenizer::load(dir + "/none.pvllm", &tokenizer).code(), StatusCode::kNotFound);
  chat::ChatTemplates none;
  ASSERT_TRUE(chat::ChatTemplates::load(dir + "/none.pvllm", &none).ok());
  EXPECT_TRUE(none.empty());
  // The engine serves token ids, and says why text cannot be.
  EngineConfig config;
  config.model_path = dir + "/none.pvllm";
  config.device = "cpu";
  auto engine = make_engine(config);
  uint64_t id = 0;
  EXPECT_EQ(engine->submit_text("Once", greedy(2), 0, &id).code(), StatusCode::kTokenizerError);
  ASSERT_TRUE(engine->submit_tokens({1, 5, 9}, greedy(2), 0, &id).ok());
  EXPECT_EQ(run_to_completion(engine.get()).at({id, 0}).token_ids.size(), 2u);
}

// The panel layout the writer stores is the one the CPU GEMM packs itself,
// byte for byte, for every dtype, with padding rows and panel tails; and
// unpacking gives the matrix back.
TEST(PanelLayoutTest, WriterLayoutIsTheGemmsAndUnpacksExactly) {
  std::mt19937 rng(3);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& [rows_a, rows_b, cols] : {std::tuple{16, 16, 64}, std::tuple{5, 30, 3},
                                               std::tuple{1, 1, 1}, std::tuple{17, 0, 40}}) {
      std::vector<Tensor> parts;
      std::vector<std::vector<uint8_t>> storage;
      for (int rows : {rows_a, rows_b}) {
        if (rows == 0) continue;
        storage.emplace_back(static_cast<size_t>(rows * cols) * dtype_size(dtype));
        for (uint8_t& b : storage.back()) b = static_cast<uint8_t>(rng());
        Tensor t;
        t.name = "part";
        t.dtype = dtype;
        t.shape = {rows, cols};
        t.data = storage.back().data();
        parts.push_back(t);
      }
      std::vector<const Tensor*> ptrs;
      for (const Tensor& t : parts) ptrs.push_back(&t);
      panels::Shape shape;
      ASSERT_TRUE(panels::shape_of(ptrs, &shape).ok());
      std::vector<uint8_t> packed(static_cast<size_t>(shape.bytes()), 0xee);
      panels::pack(ptrs, shape, packed.data());
      cpu::PackedMatrix gemm;
      ASSERT_TRUE(cpu::PackedMatrix::pack(ptrs, nullptr, &gemm).ok());
      ASSERT_EQ(gemm.nbytes(), packed.size());
      EXPECT_EQ(std::memcmp(gemm.panel(0), packed.data(), packed.size()), 0)
          << dtype_name(dtype) << " " << rows_a << "+" << rows_b << "x" << cols;
      std::vector<uint8_t> back(static_cast<size_t>(shape.rows * cols) * dtype_size(dtype));
      panels::unpack(packed.data(), shape, back.data());
      std::vector<uint8_t> want;
      for (const auto& s : storage) want.insert(want.end(), s.begin(), s.end());
      EXPECT_EQ(back, want);
      // Served as a view, the same panels.
      Tensor view;
      view.name = "view";
      view.dtype = dtype;
      view.layout = Layout::kPanels16;
      view.shape = {shape.rows, cols};
      view.data = gemm.panel(0);
      cpu::PackedMatrix served;
      ASSERT_TRUE(cpu::PackedMatrix::view(view, &served).ok());
      EXPECT_FALSE(served.owns_data());
      EXPECT_EQ(served.panel(0), gemm.panel(0));
      EXPECT_EQ(view.nbytes(), packed.size());
    }
  }
}

TEST(PanelLayoutTest, BadShapesAreRefused) {
  panels::Shape shape;
  EXPECT_EQ(panels::shape_of(0, 4, DType::kF32, &shape).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(panels::shape_of(4, -1, DType::kF32, &shape).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(panels::shape_of(int64_t{1} << 40, int64_t{1} << 40, DType::kF32, &shape).code(),
            StatusCode::kOutOfMemory);
  EXPECT_EQ(panels::shape_of(std::span<const Tensor* const>(), &shape).code(),
            StatusCode::kInvalidArgument);
  float data[8] = {};
  Tensor vec;
  vec.name = "vec";
  vec.shape = {8};
  vec.data = data;
  const Tensor* one[] = {&vec};
  EXPECT_EQ(panels::shape_of(one, &shape).code(), StatusCode::kInvalidArgument);
  Tensor a = vec, b = vec;
  a.shape = {2, 4};
  b.shape = {4, 2};
  const Tensor* mismatched[] = {&a, &b};
  EXPECT_EQ(panels::shape_of(mismatched, &shape).code(), StatusCode::kInvalidArgument);
  Tensor tall = a;
  tall.shape = {std::numeric_limits<int64_t>::max() / 4, 4};
  const Tensor* too_tall[] = {&a, &tall};
  EXPECT_EQ(panels::shape_of(too_tall, &shape).code(), StatusCode::kOutOfMemory);
  Tensor half = a;
  half.dtype = DType::kBF16;
  const Tensor* mixed[] = {&a, &half};
  ASSERT_TRUE(panels::shape_of(mixed, &shape).ok());
  EXPECT_EQ(shape.dtype, DType::kF32);  // mixed dtypes pack as fp32
  Tensor packed_view = a;
  packed_view.layout = Layout::kPanels16;
  const Tensor* already[] = {&packed_view};
  EXPECT_EQ(panels::shape_of(already, &shape).code(), StatusCode::kInvalidArgument);
  cpu::PackedMatrix m;
  EXPECT_EQ(cpu::PackedMatrix::view(a, &m).code(), StatusCode::kInvalidArgument);
  packed_view.data = reinterpret_cast<const uint8_t*>(data) + 4;  // not 64-byte aligned
  EXPECT_EQ(cpu::PackedMatrix::view(packed_view, &m).code(), StatusCode::kInvalidArgument);
  ConvertOptions::DTypeChoice choice;
  for (const char* name : {"keep", "fp32", "bf16", "fp16"}) {
    EXPECT_TRUE(parse_dtype_choice(name, &choice).ok()) << name;
  }
  EXPECT_EQ(choice, ConvertOptions::DTypeChoice::kF16);
}

// ---- Broken files ---------------------------------------------------------

class PvllmBadFileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(make_temp_dir("pvllm_bad"));
    TinyModelSpec spec;
    spec.num_layers = 1;
    const std::string src = write_tiny_hf_model(subdir(*dir_, "/hf"), spec);
    good_ = new std::string(*dir_ + "/good.pvllm");
    convert_model(src, *good_);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete good_;
  }

  static Status load(const std::string& path, ChecksumMode mode = ChecksumMode::kFull) {
    std::unique_ptr<Model> model;
    LoadOptions options;
    options.checksums = mode;
    return load_model(path, &model, options);
  }
  // `bytes` as a file of its own.
  static std::string file_of(const std::string& bytes) {
    const std::string path = *dir_ + "/case" + std::to_string(counter_++) + ".pvllm";
    write_bytes(path, bytes);
    return path;
  }
  static std::string edited(const std::function<void(fb::ModelT&)>& edit) {
    const std::string path = *dir_ + "/edit" + std::to_string(counter_++) + ".pvllm";
    rewrite_header(*good_, path, edit);
    return path;
  }
  static void expect_refused(const Status& st, StatusCode code, const std::string& phrase) {
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_NE(st.message().find(phrase), std::string::npos)
        << "\"" << st.message() << "\" does not say \"" << phrase << "\"";
  }
  static fb::TensorT& tensor(fb::ModelT& m, const std::string& name) {
    for (auto& t : m.tensors) {
      if (t->name == name) return *t;
    }
    throw std::runtime_error("no tensor " + name);
  }

  static std::string* dir_;
  static std::string* good_;
  static int counter_;
};
std::string* PvllmBadFileTest::dir_ = nullptr;
std::string* PvllmBadFileTest::good_ = nullptr;
int PvllmBadFileTest::counter_ = 0;

TEST_F(PvllmBadFileTest, TheGoodFileLoadsAndAnUneditedRewriteToo) {
  EXPECT_TRUE(load(*good_).ok());
  EXPECT_TRUE(load(edited([](fb::ModelT&) {})).ok());
}

TEST_F(PvllmBadFileTest, TruncatedAnywhereIsCorruptModel) {
  const std::string bytes = read_bytes(*good_);
  pvllm_format::Preamble p;
  std::memcpy(&p, bytes.data(), sizeof(p));
  for (size_t cut : {size_t{0}, size_t{10}, size_t{63}, size_t{64}, size_t{100},
                     static_cast<size_t>(64 + p.header_size - 1),
                     static_cast<size_t>(p.data_offset), bytes.size() / 2, bytes.size() - 1}) {
    const Status st = load(file_of(bytes.substr(0, cut)));
    EXPECT_EQ(st.code(), StatusCode::kCorruptModel) << "cut at " << cut << ": " << st.message();
    EXPECT_TRUE(st.message().find("truncated") != std::string::npos ||
                st.message().find("shorter") != std::string::npos)
        << st.message();
  }
}

TEST_F(PvllmBadFileTest, MagicAndVersion) {
  std::string bytes = read_bytes(*good_);
  std::string wrong = bytes;
  wrong[0] = 'X';
  expect_refused(load(file_of(wrong)), StatusCode::kCorruptModel, "not a .pvllm file");
  pvllm_format::Preamble p;
  std::memcpy(&p, bytes.data(), sizeof(p));
  p.major_version = 2;
  std::memcpy(wrong.data(), &p, sizeof(p));
  wrong[0] = 'P';
  expect_refused(load(file_of(wrong)), StatusCode::kUnsupported, "format version 2.0");
  // A newer minor version of the same major only adds what may be ignored.
  p.major_version = 1;
  p.minor_version = 7;
  std::memcpy(wrong.data(), &p, sizeof(p));
  EXPECT_TRUE(load(file_of(wrong)).ok());
}

TEST_F(PvllmBadFileTest, DamagedHeaderFailsItsChecksum) {
  std::string bytes = read_bytes(*good_);
  bytes[64 + 40] ^= 0x10;
  expect_refused(load(file_of(bytes)), StatusCode::kCorruptModel, "header's checksum");
}

// Random damage with the checksum made to match: the FlatBuffers verifier
// and the field checks must refuse or accept cleanly, never crash (the
// sanitizer runs of this suite check the reads).
TEST_F(PvllmBadFileTest, RandomHeaderDamageWithAMatchingChecksumIsHandled) {
  const std::string bytes = read_bytes(*good_);
  pvllm_format::Preamble p;
  std::memcpy(&p, bytes.data(), sizeof(p));
  std::mt19937 rng(7);
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    std::string damaged = bytes;
    for (int k = 0; k < 1 + i % 3; ++k) {
      damaged[64 + rng() % p.header_size] = static_cast<char>(rng());
    }
    pvllm_format::Preamble q = p;
    q.header_checksum = pvllm_format::checksum(damaged.data() + 64, p.header_size);
    std::memcpy(damaged.data(), &q, sizeof(q));
    const Status st = load(file_of(damaged));
    if (!st.ok()) {
      ++refused;
      EXPECT_TRUE(st.code() == StatusCode::kCorruptModel || st.code() == StatusCode::kUnsupported ||
                  st.code() == StatusCode::kNotFound || st.code() == StatusCode::kInvalidArgument)
          << st.message();
    }
  }
  EXPECT_GT(refused, 0);
}

TEST_F(PvllmBadFileTest, DamagedTensorFailsItsChecksumFullyOrLazily) {
  const std::string path = *dir_ + "/damaged.pvllm";
  damaged_copy(*good_, "model.layers.0.mlp.down_proj.weight", path);
  expect_refused(load(path), StatusCode::kCorruptModel,
                 "tensor model.layers.0.mlp.down_proj.weight does not match its checksum");
  // Lazily: the load is fine, the engine's first read of the tensor is not.
  EXPECT_TRUE(load(path, ChecksumMode::kLazy).ok());
  EXPECT_TRUE(load(path, ChecksumMode::kNone).ok());
  expect_refused(create_status(path, ChecksumMode::kLazy), StatusCode::kCorruptModel,
                 "down_proj.weight does not match its checksum");
  EXPECT_TRUE(create_status(path, ChecksumMode::kNone).ok());
}

TEST_F(PvllmBadFileTest, TensorTableMistakes) {
  const std::string norm = "model.norm.weight";
  const std::string down = "model.layers.0.mlp.down_proj.weight";
  const std::string qkv = "model.layers.0.self_attn.qkv_proj.weight";
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).offset += 8; })),
                 StatusCode::kCorruptModel, "is not a multiple of 4096");
  expect_refused(
      load(edited([&](fb::ModelT& m) { tensor(m, norm).offset = tensor(m, down).offset; })),
      StatusCode::kCorruptModel, "overlap");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).offset += 1 << 30; })),
                 StatusCode::kCorruptModel, "outside the data area");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).size -= 4; })),
                 StatusCode::kCorruptModel, "does not match its shape");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).size = ~uint64_t{0}; })),
                 StatusCode::kCorruptModel, "does not match its shape");
  expect_refused(
      load(edited([&](fb::ModelT& m) { tensor(m, norm).dtype = static_cast<fb::DType>(15); })),
      StatusCode::kCorruptModel, "dtype 15 is not one this reader knows");
  // A quantized type on a vector whose length is not whole blocks.
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).dtype = fb::DType::Q3_K; })),
                 StatusCode::kCorruptModel,
                 "must be row-major with rows of whole 256-element blocks");
  expect_refused(
      load(edited([&](fb::ModelT& m) { tensor(m, norm).layout = static_cast<fb::Layout>(5); })),
      StatusCode::kCorruptModel, "layout 5 is not one this reader knows");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).name = down; })),
                 StatusCode::kCorruptModel, "listed twice");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).name = ""; })),
                 StatusCode::kCorruptModel, "empty name");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).shape = {0}; })),
                 StatusCode::kCorruptModel, "dimension 0");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).shape = {}; })),
                 StatusCode::kCorruptModel, "0 dimensions");
  expect_refused(
      load(edited([&](fb::ModelT& m) { tensor(m, norm).layout = fb::Layout::Panels16; })),
      StatusCode::kCorruptModel, "must be a matrix");
  // Panels where row-major is read, and the reverse (the sizes agree here).
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, qkv).layout = fb::Layout::RowMajor; })),
                 StatusCode::kCorruptModel, "stored row-major, expected panels");
  expect_refused(load(edited([&](fb::ModelT& m) {
                   m.tensors.erase(m.tensors.begin());  // the embedding
                 })),
                 StatusCode::kNotFound, "missing tensor model.embed_tokens.weight");
  expect_refused(load(edited([&](fb::ModelT& m) { tensor(m, norm).name = "model.norm.bias"; })),
                 StatusCode::kNotFound, "missing tensor model.norm.weight");
}

TEST_F(PvllmBadFileTest, ConfigValuesAreRangeCheckedBeforeUse) {
  expect_refused(
      load(edited([](fb::ModelT& m) { m.config->hidden_size = (int64_t{1} << 32) + 64; })),
      StatusCode::kCorruptModel, "hidden_size = 4294967360 is outside");
  expect_refused(load(edited([](fb::ModelT& m) { m.config->num_layers = 3000000; })),
                 StatusCode::kCorruptModel, "num_layers = 3000000 is outside");
  expect_refused(load(edited([](fb::ModelT& m) { m.config->max_position_embeddings = -1; })),
                 StatusCode::kCorruptModel, "max_position_embeddings = -1");
  expect_refused(load(edited([](fb::ModelT& m) { m.config->num_heads = 3; })),
                 StatusCode::kCorruptModel, "num_heads");
  expect_refused(load(edited([](fb::ModelT& m) { m.config->rms_norm_eps = NAN; })),
                 StatusCode::kCorruptModel, "rms_norm_eps is not finite");
  expect_refused(load(edited([](fb::ModelT& m) {
                   m.config->rope_scaling->type = static_cast<fb::RopeScalingType>(9);
                 })),
                 StatusCode::kCorruptModel, "rope_scaling type 9");
  // RoPE divisors come with their scaling type, and the type with them.
  expect_refused(load(edited([](fb::ModelT& m) {
                   m.config->rope_freq_factors = {1, 2};
                 })),
                 StatusCode::kCorruptModel, "rope_freq_factors without");
  expect_refused(load(edited([](fb::ModelT& m) {
                   m.config->rope_scaling->type = fb::RopeScalingType::FreqFactors;
                 })),
                 StatusCode::kCorruptModel, "FreqFactors without rope_freq_factors");
  expect_refused(load(edited([](fb::ModelT& m) {
                   m.config->rope_scaling->type = fb::RopeScalingType::FreqFactors;
                   m.config->rope_freq_factors = {1, 2, 3};
                 })),
                 StatusCode::kCorruptModel, "rope_freq_factors has 3");
  expect_refused(
      load(edited([](fb::ModelT& m) { m.source_format = static_cast<fb::SourceFormat>(2); })),
      StatusCode::kCorruptModel, "source format 2");
  expect_refused(load(edited([](fb::ModelT& m) { m.config->architecture = "gpt2"; })),
                 StatusCode::kUnsupported, "architecture \"gpt2\"");
  expect_refused(load(edited([](fb::ModelT& m) { m.config->eos_token_id = 1 << 20; })),
                 StatusCode::kCorruptModel, "eos_token_id");
  // A config that no longer matches the tensors: named by the tensor.
  expect_refused(load(edited([](fb::ModelT& m) { m.config->intermediate_size = 64; })),
                 StatusCode::kCorruptModel, "has shape");
}

TEST_F(PvllmBadFileTest, PreambleExtentsMustFitTheFile) {
  const std::string bytes = read_bytes(*good_);
  pvllm_format::Preamble p;
  std::memcpy(&p, bytes.data(), sizeof(p));
  auto with = [&](const std::function<void(pvllm_format::Preamble*)>& edit) {
    pvllm_format::Preamble q = p;
    edit(&q);
    std::string b = bytes;
    std::memcpy(b.data(), &q, sizeof(q));
    return file_of(b);
  };
  const std::string phrase = "header and data extents do not fit";
  using P = pvllm_format::Preamble;
  expect_refused(load(with([](P* q) { q->header_offset = 128; })), StatusCode::kCorruptModel,
                 phrase);
  expect_refused(load(with([](P* q) { q->header_size = 0; })), StatusCode::kCorruptModel, phrase);
  expect_refused(load(with([&](P* q) { q->header_size = bytes.size(); })),
                 StatusCode::kCorruptModel, phrase);
  expect_refused(load(with([](P* q) { q->data_offset = 64; })), StatusCode::kCorruptModel, phrase);
  expect_refused(load(with([&](P* q) { q->data_offset = bytes.size() + 4096; })),
                 StatusCode::kCorruptModel, phrase);
  expect_refused(load(with([](P* q) { q->data_offset += 8; })), StatusCode::kCorruptModel, phrase);
  expect_refused(load(with([](P* q) { q->file_size += 4096; })), StatusCode::kCorruptModel,
                 "(truncated)");
  expect_refused(load(with([](P* q) { q->file_size -= 1; })), StatusCode::kCorruptModel,
                 "its preamble says");
  std::shared_ptr<MappedFile> f;
  pvllm_format::FileHeader h;
  EXPECT_EQ(pvllm_format::open_file(*dir_ + "/absent.pvllm", &f, &h).code(), StatusCode::kNotFound);
}

TEST_F(PvllmBadFileTest, MoreConfigAndTableValues) {
  using M = fb::ModelT;
  expect_refused(load(edited([](M& m) { m.config->num_heads = 0; })), StatusCode::kCorruptModel,
                 "num_heads = 0 is outside");
  expect_refused(load(edited([](M& m) { m.config->num_kv_heads = -2; })), StatusCode::kCorruptModel,
                 "num_kv_heads = -2 is outside");
  expect_refused(load(edited([](M& m) { m.config->vocab_size = int64_t{1} << 31; })),
                 StatusCode::kCorruptModel, "vocab_size = 2147483648 is outside");
  expect_refused(load(edited([](M& m) { m.config->rope_theta = INFINITY; })),
                 StatusCode::kCorruptModel, "rope_theta is not finite");
  expect_refused(load(edited([](M& m) { m.config->rope_scaling->factor = NAN; })),
                 StatusCode::kCorruptModel, "rope_scaling.factor is not finite");
  expect_refused(load(edited([](M& m) { m.config->rope_scaling->low_freq_factor = NAN; })),
                 StatusCode::kCorruptModel, "low_freq_factor is not finite");
  expect_refused(load(edited([](M& m) { m.config->rope_scaling->high_freq_factor = -INFINITY; })),
                 StatusCode::kCorruptModel, "high_freq_factor is not finite");
  expect_refused(
      load(edited([](M& m) { m.config->rope_scaling->original_max_position_embeddings = 0; })),
      StatusCode::kCorruptModel, "original_max_position_embeddings = 0");
  expect_refused(load(edited([](M& m) { m.config->rope_style = static_cast<fb::RopeStyle>(4); })),
                 StatusCode::kCorruptModel, "rope_style 4");
  expect_refused(load(edited([](M& m) { m.config->extra_stop_token_ids.assign(1025, 2); })),
                 StatusCode::kCorruptModel, "more than 1024 extra stop token ids");
  expect_refused(load(edited([](M& m) { m.config->extra_stop_token_ids = {-1}; })),
                 StatusCode::kCorruptModel, "extra_stop_token_ids = -1");
  expect_refused(load(edited([](M& m) { m.source_format = static_cast<fb::SourceFormat>(6); })),
                 StatusCode::kCorruptModel, "source format 6");
  // Optional tables may be absent: no RoPE scaling, no tokenizer.
  EXPECT_TRUE(load(edited([](M& m) { m.config->rope_scaling.reset(); })).ok());
  EXPECT_TRUE(load(edited([](M& m) { m.tokenizer.reset(); })).ok());
  const std::string norm = "model.norm.weight";
  expect_refused(load(edited([&](M& m) {
                   tensor(m, norm).shape = {int64_t{1} << 30, int64_t{1} << 30};
                 })),
                 StatusCode::kCorruptModel, "more than 2^40 elements");
  expect_refused(load(edited([&](M& m) {
                   tensor(m, norm).shape = {1, 2, 3, 4, 5};
                 })),
                 StatusCode::kCorruptModel, "5 dimensions");
  // The last tensor moved one page on: inside the file no more.
  expect_refused(load(edited([](M& m) { m.tensors.back()->offset += 4096; })),
                 StatusCode::kCorruptModel, "outside the data area");
  // Before the data area.
  expect_refused(load(edited([](M& m) { m.tensors.front()->offset -= 4096; })),
                 StatusCode::kCorruptModel, "outside the data area");
}

TEST_F(PvllmBadFileTest, TokenizerRecordMistakes) {
  expect_refused(
      load(edited([](fb::ModelT& m) { m.tokenizer->kind = static_cast<fb::TokenizerKind>(7); })),
      StatusCode::kCorruptModel, "tokenizer kind 7");
  expect_refused(load(edited([](fb::ModelT& m) { m.tokenizer->data.clear(); })),
                 StatusCode::kCorruptModel, "has a kind but no data");
  // Bytes that are no sentencepiece model: the engine says so, naming the file.
  const std::string path = edited([](fb::ModelT& m) { m.tokenizer->data.assign(100, 0x7f); });
  EXPECT_TRUE(load(path).ok());
  EngineConfig config;
  config.model_path = path;
  config.device = "cpu";
  std::unique_ptr<Engine> engine;
  const Status st = Engine::create(config, &engine);
  EXPECT_EQ(st.code(), StatusCode::kTokenizerError) << st.message();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

TEST_F(PvllmBadFileTest, NotAFileAtAll) {
  expect_refused(load(*dir_ + "/absent.pvllm"), StatusCode::kNotFound, "absent.pvllm");
  fs::create_directories(*dir_ + "/folder.pvllm");
  // A folder named .pvllm is read as a Hugging Face folder (and has no config).
  EXPECT_EQ(load(*dir_ + "/folder.pvllm").code(), StatusCode::kNotFound);
}

TEST(PvllmWriterTest, BadOutputsAreIoErrorsAndLeaveNoFile) {
  const std::string dir = make_temp_dir("pvllm_w");
  const std::string src = write_tiny_hf_model(subdir(dir, "/hf"), TinyModelSpec());
  std::unique_ptr<Model> model;
  ASSERT_TRUE(load_model(src, &model).ok());
  const Status st = write_pvllm(model.get(), dir + "/no/such/folder/m.pvllm", ConvertOptions());
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.message();
  EXPECT_FALSE(fs::exists(dir + "/no"));
  ConvertOptions::DTypeChoice choice;
  EXPECT_EQ(parse_dtype_choice("int8", &choice).code(), StatusCode::kInvalidArgument);
  // Progress reaches the total exactly once at the end.
  uint64_t last_done = 0, last_total = 1, calls = 0;
  ConvertOptions options;
  options.progress = [&](uint64_t done, uint64_t total, const std::string&) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
    ++calls;
  };
  ASSERT_TRUE(write_pvllm(model.get(), dir + "/m.pvllm", options).ok());
  EXPECT_EQ(last_done, last_total);
  EXPECT_GT(calls, 5u);
  EXPECT_FALSE(fs::exists(dir + "/m.pvllm.tmp"));
}

}  // namespace
}  // namespace pvllm::testing
