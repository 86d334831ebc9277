// Time to first token from a cold engine: create (load, checks, backend),
// submit a 3-token prompt, step to its first token. Each model is measured
// as its source (a safetensors folder or llama2.c file) and as a .pvllm
// file (checksums checked fully, and lazily), alternating in one run, so
// the ratios compare like with like. Also the anonymous memory the engine
// holds after the first token (copies of weights show there; a mapping
// does not). The page cache is warm for every run (one untimed run each).
//
//   cpu_load_bench [--rounds N] [--threads T] [--json OUT] NAME SRC PVLLM [NAME SRC PVLLM...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/engine/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

// RssAnon of this process, in bytes.
long long rss_anon_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::atoll(line.c_str() + 8) * 1024;
  }
  return -1;
}

struct Sample {
  double ttft_s = 0;
  long long anon_bytes = 0;
};

Sample measure(const std::string& path, pvllm::ChecksumMode mode, int threads) {
  const long long anon_before = rss_anon_bytes();
  const auto start = Clock::now();
  pvllm::EngineConfig config;
  config.model_path = path;
  config.device = "cpu";
  config.num_threads = threads;
  config.kv_cache_bytes = 64ll << 20;
  config.max_model_len = 256;
  config.model_checksums = mode;
  std::unique_ptr<pvllm::Engine> engine;
  pvllm::Status st = pvllm::Engine::create(config, &engine);
  if (!st.ok()) {
    std::fprintf(stderr, "cpu_load_bench: %s: %s\n", path.c_str(), st.message().c_str());
    std::exit(1);
  }
  pvllm::SamplingParams params;
  params.temperature = 0;
  params.max_tokens = 1;
  uint64_t id = 0;
  st = engine->submit_tokens({1, 2, 3}, params, 0, &id);
  if (!st.ok()) {
    std::fprintf(stderr, "cpu_load_bench: submit: %s\n", st.message().c_str());
    std::exit(1);
  }
  std::vector<pvllm::Output> events;
  bool done = false;
  while (!done) {
    if (!engine->step().ok()) std::exit(1);
    engine->poll(&events);
    for (const auto& e : events) done = done || !e.token_ids.empty();
  }
  Sample s;
  s.ttft_s = std::chrono::duration<double>(Clock::now() - start).count();
  s.anon_bytes = rss_anon_bytes() - anon_before;
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7, threads = 0;
  std::string json_path;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      rest.push_back(a);
    }
  }
  if (rest.empty() || rest.size() % 3 != 0 || rounds < 1) {
    std::fprintf(stderr,
                 "usage: cpu_load_bench [--rounds N] [--threads T] [--json OUT] NAME SRC PVLLM "
                 "[NAME SRC PVLLM...]\n");
    return 2;
  }
  struct Variant {
    const char* label;
    int which;  // 0 source, 1 .pvllm
    pvllm::ChecksumMode mode;
  };
  const Variant variants[] = {{"source", 0, pvllm::ChecksumMode::kFull},
                              {"pvllm_full", 1, pvllm::ChecksumMode::kFull},
                              {"pvllm_lazy", 1, pvllm::ChecksumMode::kLazy}};
  std::string json = "{\n  \"rounds\": " + std::to_string(rounds) + ",\n  \"models\": [";
  std::printf("%-14s %-11s %12s %12s %14s %8s\n", "model", "variant", "ttft_med_ms", "ttft_min_ms",
              "anon_MiB", "speedup");
  for (size_t m = 0; m < rest.size(); m += 3) {
    const std::string& name = rest[m];
    const std::string paths[2] = {rest[m + 1], rest[m + 2]};
    std::vector<double> ttft[3];
    long long anon[3] = {0, 0, 0};
    for (const Variant& v : variants) measure(paths[v.which], v.mode, threads);  // warm up
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 3; ++k) {
        const int i = (r % 2 == 0) ? k : 2 - k;  // alternate the order
        const Sample s = measure(paths[variants[i].which], variants[i].mode, threads);
        ttft[i].push_back(s.ttft_s);
        anon[i] = std::max(anon[i], s.anon_bytes);
      }
    }
    const double base = median(ttft[0]);
    json += std::string(m == 0 ? "" : ",") + "\n    {\"name\": \"" + name +
            "\", \"source_path\": \"" + paths[0] + "\", \"pvllm_path\": \"" + paths[1] + "\"";
    for (int i = 0; i < 3; ++i) {
      const double med = median(ttft[i]);
      const double mn = *std::min_element(ttft[i].begin(), ttft[i].end());
      std::printf("%-14s %-11s %12.2f %12.2f %14.1f %7.2fx\n", name.c_str(), variants[i].label,
                  med * 1e3, mn * 1e3, static_cast<double>(anon[i]) / (1 << 20), base / med);
      char buf[256];
      std::snprintf(buf, sizeof(buf),
                    ", \"%s\": {\"ttft_median_ms\": %.3f, \"ttft_min_ms\": %.3f, "
                    "\"anon_bytes\": %lld, \"speedup\": %.3f}",
                    variants[i].label, med * 1e3, mn * 1e3, anon[i], base / med);
      json += buf;
    }
    json += "}";
  }
  json += "\n  ]\n}\n";
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << json;
  }
  return 0;
}
