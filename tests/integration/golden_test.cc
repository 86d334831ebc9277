// The golden test: greedy generation of the real stories260K checkpoint, in
// llama2.c format and in Hugging Face format, and each converted to .pvllm
// (packed and row-major, checksums checked fully and lazily), must
// reproduce llama2.c's reference run.c token for token
// (golden/stories260K-greedy.json). On a GPU the CUDA engine in fp32 must
// too, from both layouts; in bf16 and fp16 it reports how many cases are
// identical and where the first divergence falls (CudaGoldenReport). Where
// no CUDA device is, the CUDA cases skip saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/backend/backend_loader.h"
#include "core/spec/replay_proposer.h"
#include "kernels/cpu/isa.h"
#include "tests/integration/engine_harness.h"
#include "tests/util/pvllm_file_edit.h"
#include "tests/util/shared_paths.h"
#include "tests/util/tiny_model.h"

namespace pvllm::testing {
namespace {

struct GoldenCase {
  std::string prompt;
  int32_t steps = 0;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::string generated_text;
  bool stopped_on_bos = false;
};

std::vector<GoldenCase> read_golden(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<GoldenCase> cases;
  for (const auto& c : j.at("cases")) {
    GoldenCase g;
    g.prompt = c.at("prompt").get<std::string>();
    g.steps = c.at("steps").get<int32_t>();
    g.prompt_ids = c.at("prompt_ids").get<std::vector<int32_t>>();
    g.generated_ids = c.at("generated_ids").get<std::vector<int32_t>>();
    g.generated_text = c.at("generated_text").get<std::string>();
    g.stopped_on_bos = c.at("stopped_on_bos").get<bool>();
    // The golden README says the stopping token is not part of
    // generated_ids, but the file lists it as the last id of every case
    // that stopped on BOS. pvllm does not report the token that stops a
    // sample, so compare without it (and check the finish reason instead).
    if (g.stopped_on_bos && !g.generated_ids.empty() && g.generated_ids.back() == 1) {
      g.generated_ids.pop_back();
    }
    cases.push_back(std::move(g));
  }
  return cases;
}

// The reference's conventions (golden/README.md): BOS is part of
// prompt_ids; at most steps - len(prompt_ids) + 1 tokens; BOS (id 1) ends
// generation and is not reported.
SamplingParams golden_params(const GoldenCase& c) {
  SamplingParams p = greedy(c.steps - static_cast<int32_t>(c.prompt_ids.size()) + 1);
  p.stop_token_ids = {1};
  return p;
}

// "" when the CUDA module loads and sees a device; else why not.
std::string cuda_unavailable() {
  const CudaModule* module = nullptr;
  Status st = CudaModule::get(&module);
  if (!st.ok()) return "no CUDA module ($PVLLM_CUDA_BACKEND): " + st.message();
  int32_t count = 0;
  st = module->device_count(&count);
  if (!st.ok()) return "the CUDA module sees no device: " + st.message();
  return count > 0 ? "" : "no CUDA device";
}

// Where the first of two token sequences' differences falls (their common
// length when one is a prefix of the other).
size_t first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t common = std::min(a.size(), b.size());
  return std::mismatch(a.begin(), a.begin() + common, b.begin()).first - a.begin();
}

class GoldenTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    golden_path_ = shared_path("golden/stories260K-greedy.json");
    std::string param = GetParam();
    // "cuda-fp32[-eager|-contiguous]:<source>": the CUDA engine in fp32,
    // with CUDA graphs (or without), over the paged KV cache (or the
    // contiguous baseline).
    if (param.rfind("cuda-fp32", 0) == 0) {
      const std::string variant = param.substr(0, param.find(':'));
      param = param.substr(variant.size() + 1);
      device_ = "cuda";
      dtype_ = 3;
      cuda_graphs_ = variant.find("eager") == std::string::npos;
      if (variant.find("contiguous") != std::string::npos) {
        allocator_ = KvAllocator::kContiguous;
      }
    }
    // "pvllm-<layout>[-lazy]:<source>": the source converted to .pvllm.
    std::string conversion;
    if (param.rfind("pvllm-", 0) == 0) {
      conversion = param.substr(0, param.find(':'));
      param = param.substr(conversion.size() + 1);
    }
    model_path_ = shared_path(param);
    if (golden_path_.empty() || model_path_.empty()) {
      GTEST_SKIP() << "needs golden/stories260K-greedy.json and " << GetParam()
                   << " under $PVLLM_SHARED_DIR (unset or missing; .ci/run sets it)";
    }
    // Under a forced PVLLM_CPU_ISA (the golden_isa_* runs) that this CPU
    // cannot run, the engine is refused by design: nothing to compare.
    const Status isa = cpu::cpu_isa_status();
    if (!isa.ok()) GTEST_SKIP() << isa.message();
    if (device_ == "cuda") {
      if (const std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
    }
    cases_ = read_golden(golden_path_);
    ASSERT_FALSE(cases_.empty());
    if (!conversion.empty()) {
      ConvertOptions options;
      options.packed = conversion.find("packed") != std::string::npos;
      if (conversion.find("lazy") != std::string::npos) checksums_ = ChecksumMode::kLazy;
      const std::string out = make_temp_dir("golden_pvllm") + "/model.pvllm";
      convert_model(model_path_, out, options);
      model_path_ = out;
    }
  }

  EngineConfig config() const {
    EngineConfig c;
    c.model_path = model_path_;
    c.device = device_;
    c.dtype = dtype_;
    c.enable_cuda_graphs = cuda_graphs_;
    c.kv_allocator = allocator_;
    c.model_checksums = checksums_;
    return c;
  }

  void expect_matches(const GoldenCase& c, const SampleOutput& out) {
    EXPECT_EQ(out.finish_reason, c.stopped_on_bos ? FinishReason::kStop : FinishReason::kLength)
        << "prompt \"" << c.prompt << "\"";
    const auto& got = out.token_ids;
    const auto& want = c.generated_ids;
    EXPECT_TRUE(got == want) << "prompt \"" << c.prompt << "\": " << got.size()
                             << " tokens generated, reference " << want.size()
                             << ", first difference at index " << first_difference(got, want);
    // The reference text is sentencepiece's decode of the generated ids
    // alone, which drops the leading space the stream keeps after a prompt.
    std::string text = out.text;
    if (!text.empty() && text[0] == ' ' && c.generated_text.rfind(' ', 0) != 0) text.erase(0, 1);
    EXPECT_EQ(text, c.generated_text) << "prompt \"" << c.prompt << "\"";
  }

  // Submits every case; a replay proposer, when given, is told each
  // case's reference continuation.
  std::vector<uint64_t> submit_cases(Engine* engine, ReplayProposer* replay = nullptr) const {
    std::vector<uint64_t> ids;
    for (const GoldenCase& c : cases_) {
      uint64_t id = 0;
      EXPECT_TRUE(engine->submit_tokens(c.prompt_ids, golden_params(c), 0, &id).ok());
      if (replay != nullptr) replay->expect(id, 0, c.generated_ids);
      ids.push_back(id);
    }
    return ids;
  }

  std::string golden_path_;
  std::string model_path_;
  std::string device_ = "cpu";
  int32_t dtype_ = 0;
  bool cuda_graphs_ = true;
  KvAllocator allocator_ = KvAllocator::kPaged;
  ChecksumMode checksums_ = ChecksumMode::kFull;
  std::vector<GoldenCase> cases_;
};

TEST_P(GoldenTest, EachCaseAloneMatchesReferenceTokenForToken) {
  auto engine = make_engine(config());
  ASSERT_TRUE(engine);
  for (const GoldenCase& c : cases_) {
    uint64_t id = 0;
    ASSERT_TRUE(engine->submit_tokens(c.prompt_ids, golden_params(c), 0, &id).ok());
    Outputs out = run_to_completion(engine.get());
    ASSERT_EQ(out.size(), 1u);
    expect_matches(c, out.begin()->second);
  }
}

TEST_P(GoldenTest, AllCasesBatchedMatchReference) {
  EngineConfig cfg = config();
  cfg.max_num_batched_tokens = 16;  // forces chunked prefill next to decodes
  auto engine = make_engine(cfg);
  ASSERT_TRUE(engine);
  std::vector<uint64_t> ids;
  for (const GoldenCase& c : cases_) {
    uint64_t id = 0;
    ASSERT_TRUE(engine->submit_tokens(c.prompt_ids, golden_params(c), 0, &id).ok());
    ids.push_back(id);
  }
  Outputs out = run_to_completion(engine.get());
  for (size_t i = 0; i < cases_.size(); ++i) expect_matches(cases_[i], out.at({ids[i], 0}));
}

// Speculative decoding (docs/speculative.md): prompt lookup, and a replay
// of the reference right for its first two proposals, k 1, 4 and 8, every
// case batched with chunked prefill and, for the replay, preempted: the
// reference token for token.
TEST_P(GoldenTest, SpeculativeDecodingMatchesReference) {
  for (int32_t k : {1, 4, 8}) {
    for (const bool replay : {false, true}) {
      EngineConfig cfg = config();
      cfg.max_num_batched_tokens = 16;
      cfg.speculative_tokens = k;
      std::shared_ptr<ReplayProposer> proposer;
      if (replay) {
        proposer = std::make_shared<ReplayProposer>(512, 2);
        cfg.proposer = proposer;
        cfg.block_size = 8;
        cfg.num_kv_blocks = 80;  // the pool runs dry: preemption by recompute
      } else {
        cfg.speculative = "ngram";
      }
      auto engine = make_engine(cfg);
      ASSERT_TRUE(engine);
      const std::vector<uint64_t> ids = submit_cases(engine.get(), proposer.get());
      Outputs out = run_to_completion(engine.get());
      for (size_t i = 0; i < cases_.size(); ++i) {
        SCOPED_TRACE((replay ? "replay, k " : "prompt lookup, k ") + std::to_string(k));
        expect_matches(cases_[i], out.at({ids[i], 0}));
      }
      const EngineStats st = engine->stats();
      EXPECT_GT(st.num_spec_drafts, 0);
      if (replay) {
        EXPECT_GT(st.num_spec_accepted_tokens, 0);
      }
    }
  }
}

TEST_P(GoldenTest, TextPromptsEncodeToReferenceIds) {
  auto engine = make_engine(config());
  ASSERT_TRUE(engine);
  ASSERT_NE(engine->tokenizer(), nullptr);
  for (const GoldenCase& c : cases_) {
    if (c.prompt.empty()) continue;
    std::vector<int32_t> ids;
    ASSERT_TRUE(engine->tokenizer()->encode(c.prompt, true, &ids).ok());
    EXPECT_EQ(ids, c.prompt_ids) << c.prompt;
  }
}

TEST_P(GoldenTest, PreemptedRequestsStillMatchReference) {
  EngineConfig cfg = config();
  cfg.block_size = 8;
  cfg.num_kv_blocks = 80;  // 640 slots for six sequences of up to 512 tokens
  auto engine = make_engine(cfg);
  ASSERT_TRUE(engine);
  std::vector<uint64_t> ids;
  for (const GoldenCase& c : cases_) {
    uint64_t id = 0;
    ASSERT_TRUE(engine->submit_tokens(c.prompt_ids, golden_params(c), 0, &id).ok());
    ids.push_back(id);
  }
  Outputs out = run_to_completion(engine.get());
  // The contiguous baseline reserves whole sequences up front: it admits
  // fewer at a time rather than preempting.
  if (allocator_ == KvAllocator::kPaged) {
    EXPECT_GT(engine->stats().num_preemptions, 0) << "the pool was meant to run dry";
  }
  for (size_t i = 0; i < cases_.size(); ++i) expect_matches(cases_[i], out.at({ids[i], 0}));
}

std::string golden_format_name(const ::testing::TestParamInfo<const char*>& info) {
  static const char* const kNames[] = {"Llama2c",
                                       "HuggingFace",
                                       "PvllmPackedFromLlama2c",
                                       "PvllmRowMajorFromHuggingFace",
                                       "PvllmPackedLazyFromHuggingFace",
                                       "CudaFp32Llama2c",
                                       "CudaFp32HuggingFace",
                                       "CudaFp32EagerLlama2c",
                                       "CudaFp32ContiguousLlama2c"};
  return kNames[info.index];
}

INSTANTIATE_TEST_SUITE_P(
    EveryFormat, GoldenTest,
    ::testing::Values(
        "models/stories260K/stories260K.bin", "models/stories260K-hf",
        "pvllm-packed:models/stories260K/stories260K.bin", "pvllm-rowmajor:models/stories260K-hf",
        "pvllm-packed-lazy:models/stories260K-hf", "cuda-fp32:models/stories260K/stories260K.bin",
        "cuda-fp32:models/stories260K-hf", "cuda-fp32-eager:models/stories260K/stories260K.bin",
        "cuda-fp32-contiguous:models/stories260K/stories260K.bin"),
    golden_format_name);

// bf16 and fp16 on CUDA round every activation, so greedy runs may part
// from the fp32 reference where two tokens are close: this reports, per
// dtype and layout, how many cases are identical and where each other case
// first differs (printed, and as test properties in the gtest JSON). It
// fails only when a case does not finish as a greedy run must (an error,
// no tokens, or a length past the reference's limit).
TEST(CudaGoldenReport, HalfDtypesReportIdenticalCasesAndFirstDivergence) {
  const std::string golden = shared_path("golden/stories260K-greedy.json");
  if (golden.empty())
    GTEST_SKIP() << "needs golden/stories260K-greedy.json under $PVLLM_SHARED_DIR";
  if (const std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::vector<GoldenCase> cases = read_golden(golden);
  for (const char* source : {"models/stories260K/stories260K.bin", "models/stories260K-hf"}) {
    const std::string path = shared_path(source);
    if (path.empty()) GTEST_SKIP() << "needs " << source << " under $PVLLM_SHARED_DIR";
    for (const auto& [dtype, name] : {std::pair{1, "bf16"}, std::pair{2, "fp16"}}) {
      EngineConfig c;
      c.model_path = path;
      c.device = "cuda";
      c.dtype = dtype;
      auto engine = make_engine(c);
      ASSERT_TRUE(engine) << name << " " << source;
      std::vector<uint64_t> ids;
      for (const GoldenCase& g : cases) {
        uint64_t id = 0;
        ASSERT_TRUE(engine->submit_tokens(g.prompt_ids, golden_params(g), 0, &id).ok());
        ids.push_back(id);
      }
      const Outputs out = run_to_completion(engine.get());
      int identical = 0;
      std::string divergences;
      for (size_t i = 0; i < cases.size(); ++i) {
        const SampleOutput& o = out.at({ids[i], 0});
        EXPECT_TRUE(o.finish_reason == FinishReason::kStop ||
                    o.finish_reason == FinishReason::kLength)
            << name << " case " << i;
        EXPECT_FALSE(o.token_ids.empty()) << name << " case " << i;
        EXPECT_LE(o.token_ids.size(), static_cast<size_t>(golden_params(cases[i]).max_tokens));
        if (o.token_ids == cases[i].generated_ids) {
          ++identical;
        } else {
          divergences += " case " + std::to_string(i) + " at token " +
                         std::to_string(first_difference(o.token_ids, cases[i].generated_ids)) +
                         " of " + std::to_string(cases[i].generated_ids.size()) + ";";
        }
      }
      const std::string key =
          std::string(name) +
          (std::string(source).find("-hf") != std::string::npos ? "_huggingface" : "_llama2c");
      ::testing::Test::RecordProperty(key + "_identical", identical);
      ::testing::Test::RecordProperty(key + "_cases", static_cast<int>(cases.size()));
      ::testing::Test::RecordProperty(key + "_divergences", divergences);
      std::printf("CUDA %s, %s: %d of %zu cases identical to run.c;%s\n", name, source, identical,
                  cases.size(), divergences.empty() ? " none differ" : divergences.c_str());
    }
  }
}

}  // namespace
}  // namespace pvllm::testing
