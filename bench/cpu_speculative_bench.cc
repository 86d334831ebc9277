// Speculative decoding on the CPU, side by side in one run: a single stream
// decoding greedily without proposals, with a replay proposer always right
// (the ceiling: k + 1 tokens per step), always wrong (the cost of verifying
// for nothing), and with prompt lookup (its acceptance printed).
//
//   cpu_speculative_bench MODEL [--tokens 100] [--k 4] [--threads 2] [--runs 3] [--json FILE]
//
// MODEL: any model pvllm loads (scripts/bench_cpu.sh writes random-weight
// llama2.c checkpoints in the 15M and 110M shapes into build/bench-models).
// Each run does every variant once, in turn, so drift hits them alike; the
// figures are per variant over the runs (min / median / max tokens per
// second) and the speedups are of medians.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/spec/replay_proposer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Variant {
  const char* name;
  std::string speculative;  // "off", "ngram", or "replay"
  int32_t right = -1;       // replay: right for this many (-1: all)
  std::vector<double> tok_s;
  int64_t drafts = 0, proposed = 0, accepted = 0;
};

struct Result {
  std::vector<int32_t> tokens;
  double seconds = 0;
  pvllm::EngineStats stats;
};

Result run_once(const std::string& model, int32_t threads, int32_t k, int32_t max_tokens,
                const Variant& v, const std::vector<int32_t>& expect) {
  pvllm::EngineConfig c;
  c.model_path = model;
  c.device = "cpu";
  c.num_threads = threads;
  c.speculative_tokens = k;
  std::shared_ptr<pvllm::ReplayProposer> replay;
  if (v.speculative == "replay") {
    replay = std::make_shared<pvllm::ReplayProposer>(32000, v.right);
    c.proposer = replay;
  } else {
    c.speculative = v.speculative;
  }
  std::unique_ptr<pvllm::Engine> engine;
  pvllm::Status st = pvllm::Engine::create(c, &engine);
  if (!st.ok()) {
    std::fprintf(stderr, "create: %s\n", st.message().c_str());
    std::exit(1);
  }
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 31; ++i) prompt.push_back(3 + (i * 7919) % 31000);
  pvllm::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  uint64_t id = 0;
  st = engine->submit_tokens(prompt, p, 0, &id);
  if (!st.ok()) {
    std::fprintf(stderr, "submit: %s\n", st.message().c_str());
    std::exit(1);
  }
  if (replay) replay->expect(id, 0, expect);
  Result r;
  std::vector<pvllm::Output> events;
  const auto t0 = Clock::now();
  while (engine->has_unfinished()) {
    st = engine->step();
    if (!st.ok()) {
      std::fprintf(stderr, "step: %s\n", st.message().c_str());
      std::exit(1);
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  engine->poll(&events);
  for (const pvllm::Output& ev : events) {
    r.tokens.insert(r.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
  }
  r.stats = engine->stats();
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: cpu_speculative_bench MODEL [--tokens N] [--k K] [--threads T] "
                 "[--runs R] [--json FILE]\n");
    return 2;
  }
  const std::string model = argv[1];
  int32_t tokens = 100, k = 4, threads = 2, runs = 3;
  std::string json_out;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tokens") tokens = std::atoi(argv[i + 1]);
    if (a == "--k") k = std::atoi(argv[i + 1]);
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    if (a == "--json") json_out = argv[i + 1];
  }
  std::vector<Variant> variants = {
      {"no proposals", "off"},
      {"replay, always right", "replay", -1},
      {"replay, always wrong", "replay", 0},
      {"prompt lookup (1..4)", "ngram"},
  };
  // The reference output, which the replay proposer replays.
  const std::vector<int32_t> expect = run_once(model, threads, k, tokens, variants[0], {}).tokens;
  for (int r = 0; r < runs; ++r) {
    for (Variant& v : variants) {
      const Result res = run_once(model, threads, k, tokens, v, expect);
      if (res.tokens != expect) {
        std::fprintf(stderr, "%s: output differs from the run without proposals\n", v.name);
        return 1;
      }
      v.tok_s.push_back(static_cast<double>(res.tokens.size()) / res.seconds);
      v.drafts = res.stats.num_spec_drafts;
      v.proposed = res.stats.num_spec_proposed_tokens;
      v.accepted = res.stats.num_spec_accepted_tokens;
    }
  }
  const double base = median(variants[0].tok_s);
  std::printf(
      "| variant | tok/s min / median / max | speedup (medians) | drafts | proposed | accepted | "
      "acceptance |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  nlohmann::json out = {{"model", model}, {"tokens", tokens},
                        {"k", k},         {"threads", threads},
                        {"runs", runs},   {"variants", nlohmann::json::array()}};
  for (const Variant& v : variants) {
    const auto [lo, hi] = std::minmax_element(v.tok_s.begin(), v.tok_s.end());
    const double med = median(v.tok_s);
    const double acceptance = v.proposed > 0 ? static_cast<double>(v.accepted) / v.proposed : 0.0;
    std::printf("| %s | %.1f / %.1f / %.1f | %.2fx | %lld | %lld | %lld | %.0f%% |\n", v.name, *lo,
                med, *hi, med / base, static_cast<long long>(v.drafts),
                static_cast<long long>(v.proposed), static_cast<long long>(v.accepted),
                100.0 * acceptance);
    out["variants"].push_back({{"name", v.name},
                               {"tok_s", v.tok_s},
                               {"speedup_median", med / base},
                               {"drafts", v.drafts},
                               {"proposed", v.proposed},
                               {"accepted", v.accepted}});
  }
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(1) << "\n";
  return 0;
}
