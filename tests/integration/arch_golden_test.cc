// The CPU backend against Hugging Face transformers on the tiny model of
// each architecture: goldens made on the GPU machine by
// scripts/hf_reference/arch_goldens.py (docs/gpu_run.md) and committed to
// tests/data/arch_goldens/<name>.json, found through $PVLLM_ARCH_GOLDENS
// (ctest sets it). Each step: the same greedy token, each side's token in
// the other's top 5, and the logits of transformers' top 5 within 1e-3.
// Until a golden exists its test skips, naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/util/sequence_driver.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// FNV-1a 64 of a file, as arch_goldens.py computes it: the golden was made
// from these very weights.
std::string fnv1a64(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  char c;
  while (f.get(c)) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::vector<int32_t> top5(const float* logits, int32_t vocab) {
  std::vector<int32_t> ids(vocab);
  for (int32_t i = 0; i < vocab; ++i) ids[i] = i;
  std::partial_sort(ids.begin(), ids.begin() + 5, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  ids.resize(5);
  return ids;
}

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

class ArchGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchGoldenTest, CpuBackendMatchesTransformers) {
  const char* dir_env = std::getenv("PVLLM_ARCH_GOLDENS");
  const std::string golden_path =
      std::string(dir_env ? dir_env : "tests/data/arch_goldens") + "/" + GetParam() + ".json";
  if (!fs::is_regular_file(golden_path)) {
    GTEST_SKIP() << "no golden " << golden_path
                 << " yet: scripts/hf_reference/arch_goldens.py makes it on the GPU machine "
                    "(docs/gpu_run.md, step 8)";
  }
  const json golden = json::parse(std::ifstream(golden_path));
  if (golden.contains("skipped")) {
    GTEST_SKIP() << golden_path << ": " << golden["skipped"].get<std::string>();
  }
  const std::string dir = testing::make_temp_dir("pvllm_arch_golden_");
  testing::write_tiny_hf_model(dir, testing::tiny_arch_spec(GetParam()));
  ASSERT_EQ(fnv1a64(dir + "/model.safetensors"), golden["model_checksum"].get<std::string>())
      << "the tiny model " << GetParam() << " is not the one " << golden_path
      << " was made from: remake the goldens";
  std::unique_ptr<Model> m;
  const Status loaded = load_model(dir, &m);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  BackendOptions o;
  o.num_blocks = 64;
  o.block_size = 4;
  o.num_threads = 2;
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(create_cpu_backend(*m, o, &b).ok());
  const int32_t vocab = m->config.vocab_size;
  testing::SequenceDriver driver(b.get(), vocab);

  const auto tokens = golden["tokens"].get<std::vector<int32_t>>();
  std::vector<int32_t> feed = golden["prompt"].get<std::vector<int32_t>>();
  double max_diff = 0.0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<float> logits;
    const Status s = driver.step(feed, &logits);
    ASSERT_TRUE(s.ok()) << s.message();
    const float* last = logits.data() + logits.size() - vocab;
    const json& step = golden["steps"][i];
    const auto hf_top = step["top_ids"].get<std::vector<int32_t>>();
    const auto hf_logits = step["top_logits"].get<std::vector<double>>();
    const int32_t ours = testing::argmax(last, vocab);
    EXPECT_EQ(ours, tokens[i]) << "step " << i;
    EXPECT_TRUE(contains(hf_top, ours)) << "step " << i << ": our token is not in HF's top 5";
    EXPECT_TRUE(contains(top5(last, vocab), tokens[i]))
        << "step " << i << ": HF's token is not in our top 5";
    for (size_t k = 0; k < hf_top.size(); ++k) {
      max_diff = std::max(max_diff, std::abs(double(last[hf_top[k]]) - hf_logits[k]));
    }
    feed = {tokens[i]};  // both sides continue from the reference's tokens
  }
  std::printf("%s: max |logit - transformers %s| over the top 5 of %zu steps: %.3g\n",
              GetParam().c_str(), golden.value("transformers_version", "?").c_str(), tokens.size(),
              max_diff);
  RecordProperty("max_abs_logit_diff", std::to_string(max_diff));
  EXPECT_LT(max_diff, 1e-3);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchGoldenTest, ::testing::ValuesIn(testing::tiny_arch_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace pvllm
