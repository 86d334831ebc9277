// The speed of the KV cache's dtypes on the CPU backend, side by side in one
// run (docs/performance.md):
//
//  long   decode of `seqs` sequences at a `context`-token context: one
//         sequence is prefilled per dtype, its blocks copied to the others
//         (distinct memory, so every sequence's K/V is read from DRAM as
//         distinct prompts' would be), then `steps` decode steps of all
//         sequences are timed, the dtypes taking turns each repeat.
//  short  `requests` concurrent requests of `prompt` + `tokens` tokens
//         through the engine (greedy, EOS ignored), the dtypes taking turns.
//
// Usage: cpu_kv_dtype_bench --model PATH [--dtypes f32,f16,bf16,int8]
//          [--context 4096] [--seqs 8] [--steps 16] [--requests 64]
//          [--prompt 16] [--tokens 128] [--repeats 3] [--threads 2]
//          [--short-dtypes LIST (default: --dtypes)] [--skip-long]
//          [--skip-short] [--json OUT]
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
#include "core/kv/kv_cache_dtype.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/isa.h"

namespace {

using nlohmann::ordered_json;
using pvllm::KvCacheDtype;
using pvllm::Status;
using Clock = std::chrono::steady_clock;

bool check(const Status& s, const std::string& what) {
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", what.c_str(), s.message().c_str());
  return s.ok();
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Distinct ids, BOS first (no prefix shared between offsets).
std::vector<int32_t> prompt_ids(int32_t count, int32_t offset, int32_t vocab) {
  std::vector<int32_t> ids = {1};
  for (int32_t i = 1; i < count; ++i) ids.push_back(3 + (offset * 131 + i * 7) % (vocab - 3));
  return ids;
}

struct LongRun {
  KvCacheDtype dtype;
  std::unique_ptr<pvllm::Backend> backend;
  std::vector<std::vector<int32_t>> tables;  // per sequence, its blocks in order
  int32_t length = 0;                        // tokens in every sequence
  std::vector<double> step_seconds;          // per repeat: mean seconds per decode step
};

// Prefills sequence 0 (chunks of 512), then copies its blocks to the other
// sequences' blocks.
Status prepare_long(const pvllm::Model& model, int32_t context, int32_t seqs, int32_t steps,
                    int32_t threads, LongRun* run) {
  const int32_t bs = 16;
  const int32_t per_seq = (context + steps + bs - 1) / bs;
  pvllm::BackendOptions o;
  o.block_size = bs;
  o.num_blocks = per_seq * seqs;
  o.num_threads = threads;
  o.kv_cache_dtype = run->dtype;
  PVLLM_RETURN_IF_ERROR(pvllm::create_cpu_backend(model, o, &run->backend));
  for (int32_t s = 0; s < seqs; ++s) {
    std::vector<int32_t> t(per_seq);
    for (int32_t b = 0; b < per_seq; ++b) t[b] = s * per_seq + b;
    run->tables.push_back(t);
  }
  const std::vector<int32_t> prompt = prompt_ids(context, 1, model.config.vocab_size);
  std::vector<float> logits(model.config.vocab_size);
  for (int32_t at = 0; at < context; at += 512) {
    const int32_t n = std::min(512, context - at);
    pvllm::BatchMetadata md;
    md.num_tokens = n;
    md.num_seqs = 1;
    md.input_ids.assign(prompt.begin() + at, prompt.begin() + at + n);
    for (int32_t j = 0; j < n; ++j) {
      const int32_t pos = at + j;
      md.positions.push_back(pos);
      md.slot_mapping.push_back(int64_t{run->tables[0][pos / bs]} * bs + pos % bs);
    }
    md.query_start = {0, n};
    md.context_lens = {at + n};
    md.max_blocks_per_seq = per_seq;
    md.block_tables = run->tables[0];
    md.logits_rows = {n - 1};
    PVLLM_RETURN_IF_ERROR(run->backend->forward(md, logits.data()));
  }
  std::vector<pvllm::BlockCopy> copies;
  for (int32_t s = 1; s < seqs; ++s) {
    for (int32_t b = 0; b < (context + bs - 1) / bs; ++b) {
      copies.push_back({run->tables[0][b], run->tables[s][b]});
    }
  }
  PVLLM_RETURN_IF_ERROR(run->backend->copy_blocks(copies));
  run->length = context;
  return Status::Ok();
}

// `steps` decode steps of every sequence from `context` on (each repeat
// writes the same slots again); returns the mean seconds per step.
Status time_decode(LongRun* run, int32_t context, int32_t steps, int32_t vocab, double* seconds) {
  const int32_t bs = run->backend->block_size();
  const auto seqs = static_cast<int32_t>(run->tables.size());
  const auto per_seq = static_cast<int32_t>(run->tables[0].size());
  std::vector<float> logits(static_cast<size_t>(seqs) * vocab);
  const auto t0 = Clock::now();
  for (int32_t i = 0; i < steps; ++i) {
    pvllm::BatchMetadata md;
    md.num_tokens = seqs;
    md.num_seqs = seqs;
    md.max_blocks_per_seq = per_seq;
    md.query_start.push_back(0);
    for (int32_t s = 0; s < seqs; ++s) {
      const int32_t pos = context + i;
      md.input_ids.push_back(3 + (s * 977 + i * 13) % (vocab - 3));
      md.positions.push_back(pos);
      md.slot_mapping.push_back(int64_t{run->tables[s][pos / bs]} * bs + pos % bs);
      md.query_start.push_back(s + 1);
      md.context_lens.push_back(pos + 1);
      md.block_tables.insert(md.block_tables.end(), run->tables[s].begin(), run->tables[s].end());
      md.logits_rows.push_back(s);
    }
    PVLLM_RETURN_IF_ERROR(run->backend->forward(md, logits.data()));
  }
  *seconds = seconds_since(t0) / steps;
  return Status::Ok();
}

// `requests` concurrent greedy requests through the engine; generated
// tokens per second.
Status time_short(const std::string& model_path, KvCacheDtype dtype, int32_t requests,
                  int32_t prompt, int32_t tokens, int32_t threads, int32_t vocab, double* rate) {
  pvllm::EngineConfig c;
  c.model_path = model_path;
  c.device = "cpu";
  c.num_threads = threads;
  c.kv_cache_dtype = dtype;
  c.max_model_len = prompt + tokens + 16;
  c.kv_cache_bytes = int64_t{1} << 30;
  std::unique_ptr<pvllm::Engine> engine;
  PVLLM_RETURN_IF_ERROR(pvllm::Engine::create(c, &engine));
  pvllm::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = tokens;
  p.ignore_eos = true;
  const auto t0 = Clock::now();
  for (int32_t r = 0; r < requests; ++r) {
    uint64_t id = 0;
    PVLLM_RETURN_IF_ERROR(engine->submit_tokens(prompt_ids(prompt, r + 1, vocab), p, 0, &id));
  }
  int64_t generated = 0;
  std::vector<pvllm::Output> events;
  while (engine->has_unfinished()) {
    PVLLM_RETURN_IF_ERROR(engine->step());
    events.clear();
    engine->poll(&events);
    for (const auto& e : events) generated += static_cast<int64_t>(e.token_ids.size());
  }
  *rate = static_cast<double>(generated) / seconds_since(t0);
  return Status::Ok();
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, json_path, dtype_list = "f32,f16,bf16,int8", short_list;
  int32_t context = 4096, seqs = 8, steps = 16, requests = 64, prompt = 16, tokens = 128;
  int32_t repeats = 3, threads = 2;
  bool skip_long = false, skip_short = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    auto num = [&] { return std::atoi(argv[++i]); };
    if (a == "--model" && has) {
      model_path = argv[++i];
    } else if (a == "--dtypes" && has) {
      dtype_list = argv[++i];
    } else if (a == "--short-dtypes" && has) {
      short_list = argv[++i];
    } else if (a == "--context" && has) {
      context = num();
    } else if (a == "--seqs" && has) {
      seqs = num();
    } else if (a == "--steps" && has) {
      steps = num();
    } else if (a == "--requests" && has) {
      requests = num();
    } else if (a == "--prompt" && has) {
      prompt = num();
    } else if (a == "--tokens" && has) {
      tokens = num();
    } else if (a == "--repeats" && has) {
      repeats = num();
    } else if (a == "--threads" && has) {
      threads = num();
    } else if (a == "--json" && has) {
      json_path = argv[++i];
    } else if (a == "--skip-long") {
      skip_long = true;
    } else if (a == "--skip-short") {
      skip_short = true;
    } else {
      std::fprintf(stderr,
                   "usage: cpu_kv_dtype_bench --model PATH [--dtypes f32,f16,bf16,int8] "
                   "[--context N] [--seqs N] [--steps N] [--requests N] [--prompt N] "
                   "[--tokens N] [--repeats N] [--threads N] [--short-dtypes LIST] [--skip-long] "
                   "[--skip-short] "
                   "[--json OUT]\n");
      return 2;
    }
  }
  auto parse_list = [](const std::string& list, std::vector<KvCacheDtype>* out) {
    for (const std::string& name : split_list(list)) {
      KvCacheDtype d;
      if (!check(pvllm::parse_kv_cache_dtype(name, &d), "--dtypes")) return false;
      out->push_back(d == KvCacheDtype::kAuto ? KvCacheDtype::kF32 : d);
    }
    return true;
  };
  std::vector<KvCacheDtype> dtypes, short_dtypes;
  if (!parse_list(dtype_list, &dtypes) ||
      !parse_list(short_list.empty() ? dtype_list : short_list, &short_dtypes)) {
    return 2;
  }
  std::unique_ptr<pvllm::Model> model;
  if (!check(pvllm::load_model(model_path, &model), model_path)) return 1;
  const pvllm::ModelConfig& mc = model->config;
  ordered_json out;
  out["model"] = model_path;
  out["isa"] = pvllm::cpu::cpu_isa_name(pvllm::cpu::active_cpu_isa());
  out["threads"] = threads;
  out["repeats"] = repeats;
  std::printf("model %s (%d layers, %d kv heads of %d), %d threads, %s kernels\n",
              model_path.c_str(), mc.num_layers, mc.num_kv_heads, mc.head_dim, threads,
              out["isa"].get<std::string>().c_str());

  if (!skip_long) {
    std::vector<LongRun> runs(dtypes.size());
    for (size_t d = 0; d < dtypes.size(); ++d) {
      runs[d].dtype = dtypes[d];
      const auto t0 = Clock::now();
      if (!check(prepare_long(*model, context, seqs, steps, threads, &runs[d]), "prefill")) {
        return 1;
      }
      std::printf("%-5s prefilled %d tokens and copied them to %d sequences in %.1f s\n",
                  pvllm::kv_cache_dtype_name(dtypes[d]), context, seqs - 1, seconds_since(t0));
    }
    for (int32_t r = 0; r < repeats; ++r) {
      for (LongRun& run : runs) {
        double s = 0;
        if (!check(time_decode(&run, context, steps, mc.vocab_size, &s), "decode")) return 1;
        run.step_seconds.push_back(s);
      }
    }
    std::printf("\ndecode, %d sequences at context %d, %d steps x %d repeats:\n", seqs, context,
                steps, repeats);
    std::printf("  %-5s %12s %18s %14s %22s\n", "dtype", "KV MiB/step", "ms/step (range)",
                "tokens/s", "vs first (per repeat)");
    ordered_json long_json;
    long_json["context"] = context;
    long_json["seqs"] = seqs;
    long_json["steps"] = steps;
    for (const LongRun& run : runs) {
      const double kv_mib = static_cast<double>(pvllm::kv_bytes_per_block(mc, 16, run.dtype)) *
                            (context / 16.0) * seqs / (1 << 20);
      std::vector<double> ratios;
      for (int32_t r = 0; r < repeats; ++r) {
        ratios.push_back(runs[0].step_seconds[r] / run.step_seconds[r]);
      }
      std::printf("  %-5s %12.0f %8.1f (%.1f-%.1f) %14.1f %12.2f-%.2fx\n",
                  pvllm::kv_cache_dtype_name(run.dtype), kv_mib,
                  1e3 * (min_of(run.step_seconds) + max_of(run.step_seconds)) / 2,
                  1e3 * min_of(run.step_seconds), 1e3 * max_of(run.step_seconds),
                  seqs / min_of(run.step_seconds), min_of(ratios), max_of(ratios));
      ordered_json j;
      j["kv_mib_read_per_step"] = kv_mib;
      j["seconds_per_step"] = run.step_seconds;
      j["speedup_vs_first"] = ratios;
      long_json["dtypes"][pvllm::kv_cache_dtype_name(run.dtype)] = j;
    }
    out["long_context_decode"] = long_json;
  }

  if (!skip_short) {
    std::vector<std::vector<double>> rates(short_dtypes.size());
    for (int32_t r = 0; r < repeats; ++r) {
      for (size_t d = 0; d < short_dtypes.size(); ++d) {
        double rate = 0;
        if (!check(time_short(model_path, short_dtypes[d], requests, prompt, tokens, threads,
                              mc.vocab_size, &rate),
                   "short")) {
          return 1;
        }
        rates[d].push_back(rate);
      }
    }
    std::printf("\n%d concurrent requests of %d + %d tokens, %d repeats:\n", requests, prompt,
                tokens, repeats);
    std::printf("  %-5s %26s %22s\n", "dtype", "generated tokens/s (range)",
                "vs first (per repeat)");
    ordered_json short_json;
    short_json["requests"] = requests;
    short_json["prompt"] = prompt;
    short_json["tokens"] = tokens;
    for (size_t d = 0; d < short_dtypes.size(); ++d) {
      std::vector<double> ratios;
      for (int32_t r = 0; r < repeats; ++r) ratios.push_back(rates[d][r] / rates[0][r]);
      std::printf("  %-5s %14.1f (%.1f-%.1f) %12.2f-%.2fx\n",
                  pvllm::kv_cache_dtype_name(short_dtypes[d]),
                  (min_of(rates[d]) + max_of(rates[d])) / 2, min_of(rates[d]), max_of(rates[d]),
                  min_of(ratios), max_of(ratios));
      ordered_json j;
      j["generated_tokens_per_s"] = rates[d];
      j["ratio_vs_first"] = ratios;
      short_json["short_dtypes"][pvllm::kv_cache_dtype_name(short_dtypes[d])] = j;
    }
    out["short_contexts"] = short_json;
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << out.dump(1) << "\n";
    std::printf("\nwrote %s\n", json_path.c_str());
  }
  return 0;
}
