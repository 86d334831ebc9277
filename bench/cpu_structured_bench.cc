// What structured output costs: 64 concurrent requests constrained by a
// JSON schema, beside the same number of unconstrained requests generating
// as many tokens, on one model, in one run.
//
//   cpu_structured_bench MODEL SCHEMA [--requests 64] [--threads N] [--json FILE]
//
// MODEL: a Hugging Face folder (scripts/structured_bench.sh writes random-
// weight ones in the llama2.c 15M shape serving the Llama 2 and Llama 3
// tokenizer.json: 32,000 and 128,256 tokens). Prints the compile time of the
// constraint (its first submit: the vocabulary trie, the grammar), the
// engine's time making masks (cache lookups, trie walks on a miss, copies)
// as a share of all step time, and the step time per generated token with
// and without the constraint, each unconstrained request generating as many
// tokens as its constrained twin, so that the batches match step by step
// (the difference adds the sampler's masking pass to the engine's masks).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/engine/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Run {
  double step_ms = 0;  // wall time of all steps
  int64_t tokens = 0;  // generated
  int64_t steps = 0;
  double mask_ms = 0;
  int64_t masked_draws = 0;
  double first_submit_ms = 0;
  int finished_stop = 0;
  std::vector<int32_t> lengths;  // generated tokens per request, in submit order
};

Run run(pvllm::Engine* engine, const std::vector<pvllm::SamplingParams>& params) {
  Run r;
  const pvllm::EngineStats before = engine->stats();
  std::vector<uint64_t> ids;
  r.lengths.assign(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    const auto t = Clock::now();
    uint64_t id = 0;
    pvllm::Status st = engine->submit_text("Once upon a time", params[i], 0, &id);
    if (!st.ok()) {
      std::fprintf(stderr, "cpu_structured_bench: submit: %s\n", st.message().c_str());
      std::exit(1);
    }
    if (i == 0) r.first_submit_ms = ms_since(t);
    ids.push_back(id);
  }
  std::vector<pvllm::Output> events;
  while (engine->has_unfinished()) {
    const auto t = Clock::now();
    pvllm::Status st = engine->step();
    r.step_ms += ms_since(t);
    if (!st.ok()) {
      std::fprintf(stderr, "cpu_structured_bench: step: %s\n", st.message().c_str());
      std::exit(1);
    }
    events.clear();
    engine->poll(&events);
    for (const pvllm::Output& ev : events) {
      if (ev.finish_reason == pvllm::FinishReason::kStop) ++r.finished_stop;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == ev.request_id) r.lengths[i] += static_cast<int32_t>(ev.token_ids.size());
      }
    }
  }
  const pvllm::EngineStats after = engine->stats();
  r.tokens = after.num_generation_tokens - before.num_generation_tokens;
  r.steps = after.num_steps - before.num_steps;
  r.mask_ms = after.constraint_mask_ms - before.constraint_mask_ms;
  r.masked_draws = after.num_constrained_draws - before.num_constrained_draws;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: cpu_structured_bench MODEL SCHEMA [--requests N] [--threads N] "
                 "[--json FILE]\n");
    return 2;
  }
  const std::string model = argv[1];
  std::ifstream schema_in(argv[2]);
  const std::string schema((std::istreambuf_iterator<char>(schema_in)),
                           std::istreambuf_iterator<char>());
  int requests = 64, threads = 0;
  std::string json_path;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--requests") requests = std::atoi(argv[i + 1]);
    if (flag == "--threads") threads = std::atoi(argv[i + 1]);
    if (flag == "--json") json_path = argv[i + 1];
  }
  pvllm::EngineConfig config;
  config.model_path = model;
  config.device = "cpu";
  config.num_threads = threads;
  config.max_num_seqs = requests;
  std::unique_ptr<pvllm::Engine> engine;
  pvllm::Status st = pvllm::Engine::create(config, &engine);
  if (!st.ok()) {
    std::fprintf(stderr, "cpu_structured_bench: %s\n", st.message().c_str());
    return 1;
  }
  const int32_t vocab = engine->tokenizer()->vocab_size();

  std::vector<pvllm::SamplingParams> constrained(static_cast<size_t>(requests));
  for (int i = 0; i < requests; ++i) {
    pvllm::SamplingParams& p = constrained[static_cast<size_t>(i)];
    p.temperature = 1.0f;
    p.has_seed = true;
    p.seed = static_cast<uint64_t>(i + 1);
    p.max_tokens = 1000;
    p.constraint.kind = pvllm::structured::ConstraintKind::kJsonSchema;
    p.constraint.text = schema;
  }
  // Twice: the first run compiles and fills the mask cache (what a server
  // sees for a schema's first requests), the second is the steady state.
  const Run cold = run(engine.get(), constrained);
  for (pvllm::SamplingParams& p : constrained) p.seed += 1000;
  const Run warm = run(engine.get(), constrained);
  // The same batches without the constraint: each request generates as
  // many tokens as its constrained twin, so every step runs as many rows.
  std::vector<pvllm::SamplingParams> plain(static_cast<size_t>(requests));
  for (size_t i = 0; i < plain.size(); ++i) {
    pvllm::SamplingParams& p = plain[i];
    p.temperature = 1.0f;
    p.has_seed = true;
    p.seed = constrained[i].seed;
    p.ignore_eos = true;
    p.max_tokens = std::max(1, warm.lengths[i]);
  }
  const Run base = run(engine.get(), plain);

  auto per_token = [](const Run& r) { return r.tokens > 0 ? r.step_ms / r.tokens : 0.0; };
  std::printf("vocabulary %d, %d concurrent requests, %d threads\n", vocab, requests, threads);
  std::printf("| run | tokens | steps | stop | step ms | mask ms | mask %% of step | ms/token |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  auto row = [&](const char* name, const Run& r) {
    std::printf("| %s | %lld | %lld | %d | %.1f | %.2f | %.2f%% | %.4f |\n", name,
                static_cast<long long>(r.tokens), static_cast<long long>(r.steps), r.finished_stop,
                r.step_ms, r.mask_ms, r.step_ms > 0 ? 100.0 * r.mask_ms / r.step_ms : 0.0,
                per_token(r));
  };
  row("constrained, first", cold);
  row("constrained, again", warm);
  row("unconstrained", base);
  std::printf("first submit (compiles the schema; the trie on first use): %.1f ms\n",
              cold.first_submit_ms);
  std::printf("step time per token, constrained / unconstrained: %.3f\n",
              per_token(base) > 0 ? per_token(warm) / per_token(base) : 0.0);
  if (!json_path.empty()) {
    auto j = [](const Run& r) {
      return nlohmann::json{{"tokens", r.tokens},
                            {"steps", r.steps},
                            {"finished_stop", r.finished_stop},
                            {"step_ms", r.step_ms},
                            {"mask_ms", r.mask_ms},
                            {"masked_draws", r.masked_draws},
                            {"first_submit_ms", r.first_submit_ms}};
    };
    std::ofstream(json_path) << nlohmann::json{{"vocab", vocab},
                                               {"requests", requests},
                                               {"constrained_first", j(cold)},
                                               {"constrained_again", j(warm)},
                                               {"unconstrained", j(base)}}
                                    .dump(2)
                             << "\n";
  }
  return 0;
}
