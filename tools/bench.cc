// `pvllm bench`: runs a seeded workload through the engine once per KV
// allocator (paged, contiguous, or both on the same budget) and per KV cache
// dtype (--kv-cache-dtype f32,f16,int8: what the same budget holds in each,
// side by side) and reports
// throughput and what the KV cache did: concurrency, queueing for memory,
// utilization (tokens stored / slots reserved), waste, preemptions, prefix
// cache savings and blocks per sequence, preemptions by mode and swap
// traffic, and latency: time to first token and time per output token,
// measured in wall time from submit (p50 / p99), the engine's own
// per-request timing from each request's last event (time queued, time to
// first token), and its step-time percentiles. Built on the C ABI only.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_workloads.h"
#include "cli.h"

namespace pvllm_cli {
namespace {

struct BenchOptions {
  std::string model;
  std::string random_weights;  // a shape name: random bf16 weights instead of --model
  std::string device = "auto";
  std::string dtype = "auto";                        // --dtype
  std::string quantize;                              // --quantize: a scheme, "" for none
  SpeculativeFlags speculative;                      // --speculative, --speculative-tokens, ...
  std::vector<std::string> kv_cache_dtypes{"auto"};  // --kv-cache-dtype: one run each
  WorkloadOptions workload;
  std::string allocator = "both";
  int32_t block_size = 16;
  int64_t kv_cache_mb = 64;
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t num_threads = 0;
  bool no_prefix_caching = false;
  bool no_cuda_graphs = false;
  std::string preemption_mode = "recompute";
  int64_t swap_space_mb = -1;  // -1: the engine's default
  std::string json_path;
  std::string markdown_path;
  std::string timeline_path;
  std::string summary_path;
  std::string dump_workload_path;
  std::string label;
  bool quiet = false;
};

// One per-step sample (the --timeline rows).
struct StepSample {
  int64_t step = 0;
  double time_s = 0.0;
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_blocks_used = 0;
  int64_t num_tokens_stored = 0;
  int64_t num_slots_reserved = 0;
};

struct RunResult {
  std::string allocator;
  std::string kv_cache_dtype;       // its canonical name
  std::string label;                // the run's column: allocator, dtype or both
  uint64_t kv_bytes_per_block = 0;  // the estimate's, in this dtype
  int32_t kv_num_blocks = 0;        // blocks the budget buys in this dtype
  bool ok = false;
  std::string error;
  double wall_s = 0.0;
  int64_t num_steps = 0;
  int64_t num_prompt_tokens = 0;  // of the submitted requests
  int64_t num_output_tokens = 0;  // sampled
  int64_t num_rejected = 0;       // submits the engine refused
  // The engine's estimate for these params: weights in the serving dtype,
  // and K/V bytes per token (all layers, K and V).
  double weight_bytes = 0.0;
  double kv_bytes_per_token = 0.0;
  pvllm_stats final{};
  std::vector<StepSample> timeline;
  // Per request, in seconds (sample 0 of each): submit to first token, and
  // the mean gap between its later tokens (requests with >= 2 tokens).
  std::vector<double> ttft_s;
  std::vector<double> tpot_s;
  // The engine's per-request timing (pvllm_output on the last event).
  std::vector<double> engine_queued_s;
  std::vector<double> engine_ttft_s;
};

using Clock = std::chrono::steady_clock;

// Wall-clock marks of one request's sample 0.
struct RequestTiming {
  Clock::time_point submitted;
  Clock::time_point first_token;
  Clock::time_point last_token;
  int64_t num_tokens = 0;
};

int32_t allocator_value(const std::string& name) {
  return name == "contiguous" ? PVLLM_KV_ALLOCATOR_CONTIGUOUS : PVLLM_KV_ALLOCATOR_PAGED;
}

int32_t preemption_value(const std::string& name) {
  if (name == "swap") return PVLLM_PREEMPTION_SWAP;
  if (name == "auto") return PVLLM_PREEMPTION_AUTO;
  return PVLLM_PREEMPTION_RECOMPUTE;
}

// Reads one poll's events: counts come from the stats; the events give
// each request's token times (sample 0), recorded in *timings. False (with
// *error) when a request failed.
bool record(const pvllm::cxx::OutputBatch& batch,
            std::unordered_map<uint64_t, RequestTiming>* timings, RunResult* r,
            std::string* error) {
  for (const pvllm_output& o : batch) {
    if (o.finish_reason == PVLLM_FINISH_ERROR) *error = o.error_message;
    if (o.request_finished != 0 && PVLLM_STRUCT_HAS(&o, pvllm_output, num_generated_tokens)) {
      r->engine_queued_s.push_back(o.time_queued);
      if (o.num_generated_tokens > 0) r->engine_ttft_s.push_back(o.time_to_first_token);
    }
    auto it = timings->find(o.request_id);
    if (it == timings->end() || o.sample_index != 0) continue;
    RequestTiming& t = it->second;
    if (o.num_token_ids > 0) {
      const Clock::time_point now = Clock::now();
      if (t.num_tokens == 0) t.first_token = now;
      t.last_token = now;
      t.num_tokens += static_cast<int64_t>(o.num_token_ids);
    }
    if (o.finish_reason != PVLLM_FINISH_NONE) {
      if (t.num_tokens > 0) {
        r->ttft_s.push_back(std::chrono::duration<double>(t.first_token - t.submitted).count());
      }
      if (t.num_tokens > 1) {
        r->tpot_s.push_back(std::chrono::duration<double>(t.last_token - t.first_token).count() /
                            static_cast<double>(t.num_tokens - 1));
      }
      timings->erase(it);
    }
  }
  return error->empty();
}

RunResult run_workload(const BenchOptions& o, const std::string& allocator,
                       const std::string& kv_cache_dtype, const std::vector<BenchRequest>& reqs) {
  RunResult r;
  r.allocator = allocator;
  r.kv_cache_dtype = kv_cache_dtype_label(kv_cache_dtype);
  pvllm_engine_params params = pvllm::cxx::defaults<pvllm_engine_params>();
  params.model_path = o.model.empty() ? nullptr : o.model.c_str();
  params.random_weights = o.random_weights.empty() ? nullptr : o.random_weights.c_str();
  params.device = o.device.c_str();
  params.dtype = dtype_value(o.dtype);
  params.quantize = quantize_value(o.quantize);
  params.kv_cache_dtype = kv_cache_dtype_value(kv_cache_dtype);
  apply_speculative(o.speculative, &params);
  params.block_size = o.block_size;
  params.kv_cache_bytes = o.kv_cache_mb << 20;
  params.max_model_len = o.max_model_len;
  params.max_num_seqs = o.max_num_seqs;
  params.max_num_batched_tokens = o.max_num_batched_tokens;
  params.num_threads = o.num_threads;
  params.enable_prefix_caching = o.no_prefix_caching ? 0 : 1;
  params.enable_cuda_graphs = o.no_cuda_graphs ? 0 : 1;
  params.kv_allocator = allocator_value(allocator);
  params.preemption_mode = preemption_value(o.preemption_mode);
  if (o.swap_space_mb >= 0) params.swap_space_bytes = o.swap_space_mb << 20;
  pvllm::cxx::Engine engine;
  try {
    const pvllm_memory_estimate e = pvllm::cxx::estimate_memory(params);
    r.weight_bytes = static_cast<double>(e.weight_bytes);
    r.kv_bytes_per_token = static_cast<double>(e.kv_bytes_per_block) / o.block_size;
    r.kv_bytes_per_block = e.kv_bytes_per_block;
    r.kv_num_blocks = e.num_blocks;
    engine = pvllm::cxx::Engine(params);
  } catch (const pvllm::cxx::Error& e) {
    r.error = std::string("engine: ") + e.what();
    return r;
  }

  std::unordered_map<uint64_t, RequestTiming> timings;
  const auto start = std::chrono::steady_clock::now();
  size_t next = 0;
  int64_t step = 0;
  int32_t num_unfinished = 0;
  while (next < reqs.size() || num_unfinished > 0) {
    // Nothing to do until the next arrival: jump the clock to it.
    if (num_unfinished == 0 && reqs[next].arrival_step > step) step = reqs[next].arrival_step;
    for (; next < reqs.size() && reqs[next].arrival_step <= step; ++next) {
      const BenchRequest& q = reqs[next];
      pvllm_sampling_params sp = pvllm::cxx::defaults<pvllm_sampling_params>();
      sp.temperature = 1.0f;
      sp.max_tokens = q.max_tokens;
      sp.ignore_eos = 1;
      sp.has_seed = 1;
      sp.seed = o.workload.seed * 1000003u + next;
      sp.n = q.n;
      try {
        const uint64_t id = engine.submit(q.prompt, sp);
        r.num_prompt_tokens += static_cast<int64_t>(q.prompt.size());
        timings[id].submitted = Clock::now();
      } catch (const pvllm::cxx::Error& e) {
        if (!o.quiet) std::fprintf(stderr, "pvllm bench: rejected: %s\n", e.what());
        ++r.num_rejected;
      }
    }
    pvllm_stats s;
    const char* stage = "step";  // the call that may throw
    try {
      num_unfinished = engine.step();
      stage = "poll";
      if (!record(engine.poll(), &timings, &r, &r.error)) return r;
      stage = "stats";
      s = engine.stats();
    } catch (const pvllm::cxx::Error& e) {
      r.error = std::string(stage) + ": " + e.what();
      return r;
    }
    StepSample sample;
    sample.step = step;
    sample.time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    sample.num_running = s.num_running;
    sample.num_waiting = s.num_waiting;
    sample.num_blocks_used = s.num_blocks_used;
    sample.num_tokens_stored = s.num_kv_tokens_stored;
    sample.num_slots_reserved = s.num_kv_slots_reserved;
    r.timeline.push_back(sample);
    r.final = s;
    ++step;
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.num_steps = r.final.num_steps;
  r.num_output_tokens = r.final.num_generation_tokens;
  r.ok = true;
  return r;
}

// The figures of one run, in report order: (key, label, value).
struct Figure {
  const char* key;
  const char* label;
  double value;
  int decimals;
};

// The q-quantile (0..1) of `v` by nearest rank, in milliseconds; 0 if empty.
double percentile_ms(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return 1000.0 * v[std::min(v.size() - 1, rank > 0 ? rank - 1 : 0)];
}

// Blocks one sequence of `seq_tokens` tokens holds.
int64_t blocks_per_seq(int64_t seq_tokens, int32_t block_size) {
  return std::max<int64_t>(1, (seq_tokens + block_size - 1) / block_size);
}

// Sequences of `seq_tokens` tokens the run's pool holds at once.
double seqs_that_fit(const RunResult& r, int64_t seq_tokens, int32_t block_size) {
  return static_cast<double>(r.kv_num_blocks / blocks_per_seq(seq_tokens, block_size));
}

std::vector<Figure> figures(const RunResult& r, int32_t block_size, int32_t n, int64_t seq_tokens) {
  double sum_running = 0, sum_stored = 0, sum_reserved = 0, sum_blocks = 0;
  double sum_blocks_running = 0, sum_running_with_seqs = 0;
  int32_t peak_running = 0, peak_blocks = 0;
  const StepSample* peak = nullptr;
  for (const StepSample& s : r.timeline) {
    sum_running += s.num_running;
    sum_stored += static_cast<double>(s.num_tokens_stored);
    sum_reserved += static_cast<double>(s.num_slots_reserved);
    sum_blocks += s.num_blocks_used;
    peak_running = std::max(peak_running, s.num_running);
    if (s.num_running > 0) {
      sum_blocks_running += s.num_blocks_used;
      sum_running_with_seqs += s.num_running;
    }
    if (peak == nullptr || s.num_slots_reserved > peak->num_slots_reserved) peak = &s;
    peak_blocks = std::max(peak_blocks, s.num_blocks_used);
  }
  const double num_samples = std::max<double>(1.0, static_cast<double>(r.timeline.size()));
  const double util_mean = sum_reserved > 0 ? sum_stored / sum_reserved : 0.0;
  const double util_peak = peak != nullptr && peak->num_slots_reserved > 0
                               ? static_cast<double>(peak->num_tokens_stored) /
                                     static_cast<double>(peak->num_slots_reserved)
                               : 0.0;
  const double blocks_per_request_peak =
      peak != nullptr && peak->num_running > 0
          ? static_cast<double>(peak->num_blocks_used) * n / peak->num_running
          : 0.0;
  const pvllm_stats& f = r.final;
  const double wall = std::max(r.wall_s, 1e-9);
  // The bytes each step must read: the weights once, and the K/V of every
  // position each computed sequence attends to (docs/performance.md's
  // roofline; divided by the device's copy bandwidth it is the fastest the
  // run could go).
  const double roofline_bytes =
      static_cast<double>(r.num_steps) * r.weight_bytes +
      static_cast<double>(f.num_kv_tokens_attended) * r.kv_bytes_per_token;
  return {
      {"wall_s", "wall time (s)", r.wall_s, 2},
      {"steps", "engine steps", static_cast<double>(r.num_steps), 0},
      {"output_tokens_per_s", "output tokens/s", r.num_output_tokens / wall, 1},
      {"total_tokens_per_s", "total tokens/s (prompt + output)",
       (r.num_prompt_tokens + r.num_output_tokens) / wall, 1},
      {"ttft_p50_ms", "time to first token p50 (ms)", percentile_ms(r.ttft_s, 0.50), 1},
      {"ttft_p99_ms", "time to first token p99 (ms)", percentile_ms(r.ttft_s, 0.99), 1},
      {"tpot_p50_ms", "time per output token p50 (ms)", percentile_ms(r.tpot_s, 0.50), 2},
      {"tpot_p99_ms", "time per output token p99 (ms)", percentile_ms(r.tpot_s, 0.99), 2},
      {"engine_queued_p50_ms", "engine: time queued p50 (ms)",
       percentile_ms(r.engine_queued_s, 0.50), 1},
      {"engine_queued_p99_ms", "engine: time queued p99 (ms)",
       percentile_ms(r.engine_queued_s, 0.99), 1},
      {"engine_ttft_p50_ms", "engine: time to first token p50 (ms)",
       percentile_ms(r.engine_ttft_s, 0.50), 1},
      {"engine_ttft_p99_ms", "engine: time to first token p99 (ms)",
       percentile_ms(r.engine_ttft_s, 0.99), 1},
      {"step_time_p50_ms", "step time p50, latest 1024 steps (ms)", f.step_time_p50_ms, 2},
      {"step_time_p99_ms", "step time p99, latest 1024 steps (ms)", f.step_time_p99_ms, 2},
      {"step_time_max_ms", "step time max, latest 1024 steps (ms)", f.step_time_max_ms, 2},
      {"kv_tokens_attended", "KV positions attended, all steps",
       static_cast<double>(f.num_kv_tokens_attended), 0},
      {"roofline_gb", "roofline: weights per step + KV attended (GB)", roofline_bytes / 1e9, 2},
      {"roofline_gbs", "roofline bytes / wall time (GB/s)", roofline_bytes / wall / 1e9, 1},
      {"output_tokens_per_step", "output tokens per step (batching, clock-free)",
       r.num_steps > 0 ? static_cast<double>(r.num_output_tokens) / r.num_steps : 0.0, 2},
      {"peak_running", "peak running sequences", static_cast<double>(peak_running), 0},
      {"mean_running", "mean running sequences", sum_running / num_samples, 1},
      {"queued_for_memory", "sequences queued for memory",
       static_cast<double>(f.num_seqs_queued_for_memory), 0},
      {"rejected", "requests rejected", static_cast<double>(r.num_rejected), 0},
      {"kv_util_mean", "KV utilization, mean (stored / reserved)", util_mean, 4},
      {"kv_util_at_peak", "KV utilization at peak reservation", util_peak, 4},
      {"internal_waste_mean_slots", "internal waste, mean reserved-unused slots",
       (sum_reserved - sum_stored) / num_samples, 0},
      {"internal_waste_fraction", "internal waste fraction", 1.0 - util_mean, 4},
      {"peak_kv_blocks", "peak KV blocks used", static_cast<double>(peak_blocks), 0},
      {"mean_kv_blocks", "mean KV blocks used", sum_blocks / num_samples, 1},
      {"kv_blocks_per_seq", "KV blocks per running sequence",
       sum_running_with_seqs > 0 ? sum_blocks_running / sum_running_with_seqs : 0.0, 1},
      {"kv_blocks_per_request_at_peak", "KV blocks per request at peak reservation",
       blocks_per_request_peak, 1},
      {"preemptions", "preemptions", static_cast<double>(f.num_preemptions), 0},
      {"preemptions_by_recompute", "preemptions by recompute",
       static_cast<double>(f.num_preemptions - f.num_preemptions_by_swap), 0},
      {"preemptions_by_swap", "preemptions by swap", static_cast<double>(f.num_preemptions_by_swap),
       0},
      {"blocks_swapped_out", "KV blocks swapped out", static_cast<double>(f.num_blocks_swapped_out),
       0},
      {"blocks_swapped_in", "KV blocks swapped in", static_cast<double>(f.num_blocks_swapped_in),
       0},
      {"swap_mib", "swap traffic, both ways (MiB)",
       static_cast<double>(f.num_swap_bytes) / (1 << 20), 1},
      {"prefix_cache_evictions", "prefix-cache blocks evicted",
       static_cast<double>(f.num_prefix_cache_evictions), 0},
      {"block_copies", "block copies (CoW / contiguous fork)",
       static_cast<double>(f.num_block_copies), 0},
      {"spec_drafts", "speculative drafts (decode steps with proposals)",
       static_cast<double>(f.num_spec_drafts), 0},
      {"spec_proposed_tokens", "speculative tokens proposed",
       static_cast<double>(f.num_spec_proposed_tokens), 0},
      {"spec_accepted_tokens", "speculative tokens accepted",
       static_cast<double>(f.num_spec_accepted_tokens), 0},
      {"prefix_hit_rate", "prefix-cache hit rate (blocks)", f.prefix_cache_hit_rate, 4},
      {"prefill_tokens_skipped", "prefill tokens skipped (prefix cache)",
       static_cast<double>(f.num_cached_prompt_tokens), 0},
      {"prompt_tokens", "prompt tokens submitted", static_cast<double>(r.num_prompt_tokens), 0},
      {"prefill_tokens_computed", "prefill tokens computed",
       static_cast<double>(f.num_prompt_tokens_processed), 0},
      {"output_tokens", "output tokens", static_cast<double>(r.num_output_tokens), 0},
      {"block_size", "block size (tokens)", static_cast<double>(block_size), 0},
      {"num_blocks_total", "KV blocks in the pool", static_cast<double>(f.num_blocks_total), 0},
      {"kv_bytes_per_block", "KV bytes per block (all layers, K and V)",
       static_cast<double>(r.kv_bytes_per_block), 0},
      {"seqs_that_fit", "sequences that fit (mean prompt + output)",
       seqs_that_fit(r, seq_tokens, block_size), 0},
  };
}

std::string format_value(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// Ratios worth reading when both allocators ran (paged / contiguous) or
// several KV cache dtypes (each / the first).
const char* const kRatioKeys[] = {"output_tokens_per_s",
                                  "total_tokens_per_s",
                                  "output_tokens_per_step",
                                  "peak_running",
                                  "mean_running",
                                  "kv_util_mean",
                                  "steps",
                                  "num_blocks_total",
                                  "seqs_that_fit"};

bool is_ratio_key(const std::string& key) {
  return std::find(std::begin(kRatioKeys), std::end(kRatioKeys), key) != std::end(kRatioKeys);
}

double ratio(double a, double b) { return b != 0 ? a / b : 0.0; }

// A ratio column of the tables: run `num` over run `den`.
struct RatioColumn {
  size_t num;
  size_t den;
  std::string header;
};

// Runs are ordered dtype by dtype, each with every allocator. Both
// allocators of one dtype: paged / contiguous. Several dtypes: each dtype's
// run over the first dtype's run of the same allocator.
std::vector<RatioColumn> ratio_columns(size_t num_dtypes, size_t num_allocators,
                                       const std::vector<RunResult>& runs) {
  std::vector<RatioColumn> cols;
  if (num_dtypes == 1) {
    if (num_allocators == 2) cols.push_back({0, 1, "paged/contig"});
    return cols;
  }
  for (size_t i = num_allocators; i < runs.size(); ++i) {
    const size_t den = i % num_allocators;
    std::string header = runs[i].kv_cache_dtype + "/" + runs[den].kv_cache_dtype;
    if (num_allocators > 1) header = runs[i].allocator + " " + header;
    cols.push_back({i, den, header});
  }
  return cols;
}

std::string markdown_table(const std::vector<RunResult>& runs,
                           const std::vector<std::vector<Figure>>& figs,
                           const std::vector<RatioColumn>& ratios) {
  std::string md = "| metric |";
  // Appends piece by piece: GCC 12 warns (-Wrestrict, a false positive)
  // on `"literal" + std::string&&` here.
  auto cell = [&md](const std::string& text) {
    md += ' ';
    md += text;
    md += " |";
  };
  for (const RunResult& r : runs) cell(r.label);
  for (const RatioColumn& c : ratios)
    cell(c.header == "paged/contig" ? "paged / contiguous" : c.header);
  md += "\n| --- |";
  for (size_t i = 0; i < runs.size() + ratios.size(); ++i) md += " ---: |";
  md += "\n";
  for (size_t k = 0; k < figs[0].size(); ++k) {
    md += '|';
    cell(figs[0][k].label);
    for (const auto& f : figs) cell(format_value(f[k].value, f[k].decimals));
    for (const RatioColumn& c : ratios) {
      cell(is_ratio_key(figs[0][k].key)
               ? format_value(ratio(figs[c.num][k].value, figs[c.den][k].value), 2) + "x"
               : std::string());
    }
    md += "\n";
  }
  return md;
}

void print_table(const std::vector<RunResult>& runs, const std::vector<std::vector<Figure>>& figs,
                 const std::vector<RatioColumn>& ratios) {
  std::printf("%-44s", "");
  for (const RunResult& r : runs) std::printf(" %14s", r.label.c_str());
  for (const RatioColumn& c : ratios) std::printf(" %14s", c.header.c_str());
  std::printf("\n");
  for (size_t k = 0; k < figs[0].size(); ++k) {
    std::printf("%-44s", figs[0][k].label);
    for (const auto& f : figs)
      std::printf(" %14s", format_value(f[k].value, f[k].decimals).c_str());
    if (is_ratio_key(figs[0][k].key)) {
      for (const RatioColumn& c : ratios) {
        std::printf(" %13.2fx", ratio(figs[c.num][k].value, figs[c.den][k].value));
      }
    }
    std::printf("\n");
  }
}

// What one budget holds in each KV cache dtype (--kv-cache-dtype with
// several), one row per dtype from its first allocator's run. "vs" is the
// ratio of the unrounded fits (the budget over a sequence's bytes in each
// dtype), so block and sequence rounding on a small budget does not hide it;
// on the 110M shape (head_dim 64) int8 holds 4 * 64 / 66 = 3.88x the f32
// sequences.
struct DtypeRow {
  std::string dtype;
  uint64_t kv_bytes_per_block = 0;
  int32_t num_blocks = 0;
  double seqs = 0;
  double seqs_ratio = 0;  // over the first dtype's
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;
};

std::vector<DtypeRow> dtype_rows(const std::vector<RunResult>& runs,
                                 const std::vector<std::vector<Figure>>& figs,
                                 size_t num_allocators, int64_t seq_tokens, int32_t block_size) {
  auto figure = [&figs](size_t run, const std::string& key) {
    for (const Figure& f : figs[run]) {
      if (key == f.key) return f.value;
    }
    return 0.0;
  };
  std::vector<DtypeRow> rows;
  for (size_t i = 0; i < runs.size(); i += num_allocators) {
    const RunResult& r = runs[i];
    DtypeRow row;
    row.dtype = r.kv_cache_dtype;
    row.kv_bytes_per_block = r.kv_bytes_per_block;
    row.num_blocks = r.kv_num_blocks;
    row.seqs = seqs_that_fit(r, seq_tokens, block_size);
    row.seqs_ratio = ratio(static_cast<double>(runs[0].kv_bytes_per_block),
                           static_cast<double>(r.kv_bytes_per_block));
    row.output_tokens_per_s = figure(i, "output_tokens_per_s");
    row.total_tokens_per_s = figure(i, "total_tokens_per_s");
    rows.push_back(row);
  }
  return rows;
}

void print_dtype_table(const std::vector<DtypeRow>& rows, int64_t seq_tokens) {
  char vs[32];
  std::snprintf(vs, sizeof(vs), "seqs vs %s", rows[0].dtype.c_str());
  std::printf(
      "KV cache dtypes on one budget (sequences of %lld tokens, the mean prompt + output)\n",
      static_cast<long long>(seq_tokens));
  std::printf("%-10s %16s %10s %10s %14s %16s %16s\n", "dtype", "KV bytes/block", "blocks",
              "sequences", vs, "output tok/s", "total tok/s");
  for (const DtypeRow& r : rows) {
    std::printf("%-10s %16llu %10d %10.0f %13.2fx %16.1f %16.1f\n", r.dtype.c_str(),
                static_cast<unsigned long long>(r.kv_bytes_per_block), r.num_blocks, r.seqs,
                r.seqs_ratio, r.output_tokens_per_s, r.total_tokens_per_s);
  }
  std::printf("\n");
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::fprintf(stderr, "pvllm bench: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

int run_bench(BenchOptions& o) {
  // The context comes from the model unless --max-model-len lowers it.
  if (o.model.empty() == o.random_weights.empty()) {
    std::fprintf(stderr,
                 "pvllm bench: give --model PATH or --random-weights SHAPE (one of them)\n");
    return 2;
  }
  const std::string model_name = o.model.empty() ? "random:" + o.random_weights : o.model;
  pvllm_model_config mc;
  try {
    mc = (o.random_weights.empty() ? pvllm::cxx::ModelInfo::inspect(o.model)
                                   : pvllm::cxx::ModelInfo::inspect_random(o.random_weights))
             .config();
  } catch (const pvllm::cxx::Error& e) {
    return report_error("inspect", e);
  }
  o.workload.context = o.max_model_len > 0 ? std::min(o.max_model_len, mc.max_position_embeddings)
                                           : mc.max_position_embeddings;
  o.workload.vocab_size = mc.vocab_size;

  std::vector<BenchRequest> reqs;
  std::string error;
  if (!make_workload(o.workload, &reqs, &error)) {
    std::fprintf(stderr, "pvllm bench: %s\n", error.c_str());
    return 2;
  }
  const std::string description = describe_workload(o.workload, reqs);
  if (!o.dump_workload_path.empty()) {
    // The exact requests, for other engines to replay (scripts/bench_vs_transformers.py).
    nlohmann::ordered_json j;
    j["description"] = description;
    j["context"] = o.workload.context;
    j["requests"] = nlohmann::ordered_json::array();
    for (const BenchRequest& q : reqs) {
      j["requests"].push_back({{"prompt_len", q.prompt.size()},
                               {"max_tokens", q.max_tokens},
                               {"n", q.n},
                               {"arrival_step", q.arrival_step}});
    }
    return write_file(o.dump_workload_path, j.dump(1) + "\n") ? 0 : 1;
  }
  const int32_t n = reqs.empty() ? 1 : reqs[0].n;
  if (!o.quiet) std::fprintf(stderr, "pvllm bench: %s\n", description.c_str());
  // One sequence of the workload's mean prompt + output length, rounded up:
  // the unit of "sequences that fit".
  int64_t sum_tokens = 0;
  for (const BenchRequest& q : reqs) {
    sum_tokens += static_cast<int64_t>(q.prompt.size()) + q.max_tokens;
  }
  const int64_t num_reqs = std::max<int64_t>(1, static_cast<int64_t>(reqs.size()));
  const int64_t seq_tokens = std::max<int64_t>(1, (sum_tokens + num_reqs - 1) / num_reqs);

  std::vector<std::string> allocators;
  if (o.allocator == "both") {
    allocators = {"paged", "contiguous"};
  } else {
    allocators = {o.allocator};
  }
  const size_t num_dtypes = o.kv_cache_dtypes.size();
  std::vector<RunResult> runs;
  std::vector<std::vector<Figure>> figs;
  for (const std::string& d : o.kv_cache_dtypes) {
    for (const std::string& a : allocators) {
      std::string label = a;
      if (num_dtypes > 1) {
        label = allocators.size() > 1 ? a + " " + kv_cache_dtype_label(d) : kv_cache_dtype_label(d);
      }
      if (!o.quiet) std::fprintf(stderr, "pvllm bench: running %s ...\n", label.c_str());
      runs.push_back(run_workload(o, a, d, reqs));
      runs.back().label = label;
      if (!runs.back().ok) {
        std::fprintf(stderr, "pvllm bench: %s run failed: %s\n", label.c_str(),
                     runs.back().error.c_str());
        return 1;
      }
      figs.push_back(figures(runs.back(), o.block_size, n, seq_tokens));
    }
  }
  const std::vector<RatioColumn> ratios = ratio_columns(num_dtypes, allocators.size(), runs);
  const std::vector<DtypeRow> dtypes =
      dtype_rows(runs, figs, allocators.size(), seq_tokens, o.block_size);

  std::string dtype_list;
  for (const DtypeRow& d : dtypes) dtype_list += (dtype_list.empty() ? "" : ",") + d.dtype;
  std::printf(
      "workload  %s\nmodel     %s (context %d)\nKV budget %lld MiB, block size %d, KV cache %s\n"
      "preempt   by %s\n\n",
      description.c_str(), model_name.c_str(), o.workload.context,
      static_cast<long long>(o.kv_cache_mb), o.block_size, dtype_list.c_str(),
      o.preemption_mode.c_str());
  if (num_dtypes > 1) print_dtype_table(dtypes, seq_tokens);
  print_table(runs, figs, ratios);

  if (!o.json_path.empty()) {
    nlohmann::ordered_json j;
    j["model"] = model_name;
    j["device"] = o.device;
    j["dtype"] = o.dtype;
    if (!o.quantize.empty()) j["quantize"] = o.quantize;
    j["kv_cache_dtypes"] = nlohmann::ordered_json::array();
    for (const DtypeRow& d : dtypes) j["kv_cache_dtypes"].push_back(d.dtype);
    j["preemption_mode"] = o.preemption_mode;
    j["workload"] = o.workload.name;
    j["description"] = description;
    j["context"] = o.workload.context;
    j["seed"] = o.workload.seed;
    j["n"] = n;
    j["num_requests"] = reqs.size();
    j["block_size"] = o.block_size;
    j["kv_cache_mb"] = o.kv_cache_mb;
    j["prefix_caching"] = !o.no_prefix_caching;
    j["cuda_graphs"] = !o.no_cuda_graphs;
    j["seq_tokens"] = seq_tokens;
    j["runs"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < runs.size(); ++i) {
      nlohmann::ordered_json run;
      run["allocator"] = runs[i].allocator;
      run["kv_cache_dtype"] = runs[i].kv_cache_dtype;
      for (const Figure& f : figs[i]) run[f.key] = f.value;
      j["runs"].push_back(run);
    }
    if (num_dtypes == 1 && runs.size() == 2) {
      nlohmann::ordered_json paged_over_contiguous;
      for (size_t k = 0; k < figs[0].size(); ++k) {
        if (is_ratio_key(figs[0][k].key)) {
          paged_over_contiguous[figs[0][k].key] = ratio(figs[0][k].value, figs[1][k].value);
        }
      }
      j["paged_over_contiguous"] = paged_over_contiguous;
    }
    if (num_dtypes > 1) {
      // Per dtype (its first allocator's run): what the one budget holds,
      // and the ratio of the unrounded fits over the first dtype's.
      j["kv_cache_dtype_table"] = nlohmann::ordered_json::array();
      for (const DtypeRow& d : dtypes) {
        j["kv_cache_dtype_table"].push_back({{"kv_cache_dtype", d.dtype},
                                             {"kv_bytes_per_block", d.kv_bytes_per_block},
                                             {"num_blocks", d.num_blocks},
                                             {"seqs_that_fit", d.seqs},
                                             {"seqs_over_first", d.seqs_ratio},
                                             {"output_tokens_per_s", d.output_tokens_per_s},
                                             {"total_tokens_per_s", d.total_tokens_per_s}});
      }
    }
    if (!write_file(o.json_path, j.dump(2) + "\n")) return 1;
  }
  if (!o.markdown_path.empty()) {
    const std::string md = "Workload: " + description + "; KV budget " +
                           std::to_string(o.kv_cache_mb) + " MiB, block size " +
                           std::to_string(o.block_size) + ".\n\n" +
                           markdown_table(runs, figs, ratios);
    if (!write_file(o.markdown_path, md)) return 1;
  }
  if (!o.summary_path.empty()) {
    // One TSV row per run, appended, with a header when the file is new:
    // scripts collect many runs into one table for plots.
    std::string rows;
    std::ifstream existing(o.summary_path);
    if (!existing.good() || existing.peek() == std::ifstream::traits_type::eof()) {
      rows += "label\tworkload\tallocator\tn\tprefix_caching\tkv_cache_dtype";
      for (const Figure& f : figs[0]) rows += std::string("\t") + f.key;
      rows += "\n";
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      rows += (o.label.empty() ? o.workload.name : o.label) + "\t" + o.workload.name + "\t" +
              runs[i].allocator + "\t" + std::to_string(n) + "\t" +
              (o.no_prefix_caching ? "0" : "1") + "\t" + runs[i].kv_cache_dtype;
      for (const Figure& f : figs[i]) rows += "\t" + format_value(f.value, f.decimals);
      rows += "\n";
    }
    std::ofstream out(o.summary_path, std::ios::app);
    out << rows;
    if (!out) {
      std::fprintf(stderr, "pvllm bench: cannot write %s\n", o.summary_path.c_str());
      return 1;
    }
  }
  if (!o.timeline_path.empty()) {
    std::string tsv =
        "# allocator\tstep\ttime_s\trunning\twaiting\tblocks_used\ttokens_stored\tslots_reserved"
        "\tkv_util\n";
    for (const RunResult& r : runs) {
      for (const StepSample& s : r.timeline) {
        char line[256];
        std::snprintf(line, sizeof(line), "%s\t%lld\t%.4f\t%d\t%d\t%d\t%lld\t%lld\t%.4f\n",
                      r.label.c_str(), static_cast<long long>(s.step), s.time_s, s.num_running,
                      s.num_waiting, s.num_blocks_used, static_cast<long long>(s.num_tokens_stored),
                      static_cast<long long>(s.num_slots_reserved),
                      s.num_slots_reserved > 0 ? static_cast<double>(s.num_tokens_stored) /
                                                     static_cast<double>(s.num_slots_reserved)
                                               : 0.0);
        tsv += line;
      }
      tsv += "\n\n";  // gnuplot: one data block per run (index 0, 1, ...)
    }
    if (!write_file(o.timeline_path, tsv)) return 1;
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure throughput and KV-cache memory on a seeded synthetic workload, paged vs "
      "contiguous allocation on the same budget");
  cmd->add_option("-m,--model", o->model, "Model folder (Hugging Face) or llama2.c .bin");
  cmd->add_option("--random-weights", o->random_weights,
                  "Instead of --model, a model of this shape with random bf16 weights built in "
                  "memory: tiny, tinyllama-1.1b, llama-2-7b, llama-3-8b");
  cmd->add_option("--device", o->device, kDeviceOption)->capture_default_str();
  add_dtype_option(cmd, &o->dtype);
  add_quantize_option(cmd, &o->quantize);
  add_speculative_options(cmd, &o->speculative);
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtypes,
                  std::string(kKvCacheDtypeOption) +
                      "; a comma list (f32,f16,int8) runs the workload once per dtype on the one "
                      "KV budget and prints what each holds side by side")
      ->delimiter(',')
      ->check(kv_cache_dtype_validator())
      ->type_name("DTYPE[,DTYPE...]")
      ->capture_default_str();
  cmd->add_option("-w,--workload", o->workload.name,
                  "chat (log-normal lengths, Poisson arrivals), nano (256 x uniform "
                  "[100, 1024]), shared-prefix (long system prompt + questions), parallel "
                  "(n = 4 samples), fixed (--input-len / --output-len)")
      ->capture_default_str()
      ->check(CLI::IsMember(workload_names()));
  cmd->add_option("--kv-allocator", o->allocator, "paged, contiguous or both (side by side)")
      ->capture_default_str()
      ->check(CLI::IsMember({"paged", "contiguous", "both"}));
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block (8..256, power of two)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-mb", o->kv_cache_mb, "KV budget in MiB, the same for every run")
      ->check(CLI::Range(int64_t{1}, INT64_MAX >> 20))
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Context length (0 = the model's); contiguous reserves this per sequence")
      ->capture_default_str();
  cmd->add_option("--seed", o->workload.seed, "Workload seed")->capture_default_str();
  cmd->add_option("--num-requests", o->workload.num_requests,
                  "Requests (0 = the workload's default: chat 300, nano 256, shared-prefix 64, "
                  "parallel 16, fixed 64)")
      ->capture_default_str();
  cmd->add_option("--rate", o->workload.rate,
                  "Arrivals per engine step, Poisson (chat default 2, shared-prefix default 1)");
  cmd->add_option("--n", o->workload.n, "Samples per request (default 4 for parallel, else 1)");
  cmd->add_option("--input-len", o->workload.input_len, "fixed: prompt tokens")
      ->capture_default_str();
  cmd->add_option("--output-len", o->workload.output_len, "fixed: output tokens")
      ->capture_default_str();
  cmd->add_option("--system-prompt-len", o->workload.system_prompt_len,
                  "shared-prefix: system prompt tokens (at most half the context)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences running at once")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step")
      ->capture_default_str();
  cmd->add_option("--threads", o->num_threads, "CPU threads (0 = all cores)")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Turn the prefix cache off");
  cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs,
                "CUDA: launch every step eagerly instead of replaying captured decode graphs");
  cmd->add_option("--preemption-mode", o->preemption_mode,
                  "recompute, swap (to host memory) or auto (by the estimated cost)")
      ->capture_default_str()
      ->check(CLI::IsMember({"recompute", "swap", "auto"}));
  cmd->add_option("--swap-space-mb", o->swap_space_mb,
                  "Host swap space of swap and auto, MiB (default: the engine's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--json", o->json_path, "Write the figures as JSON to FILE");
  cmd->add_option("--markdown", o->markdown_path, "Write the figures as a markdown table");
  cmd->add_option("--timeline", o->timeline_path,
                  "Write per-step samples (TSV, one block per run) for plots");
  cmd->add_option("--summary", o->summary_path,
                  "Append one TSV row per run to FILE (header when new), for scripts");
  cmd->add_option("--dump-workload", o->dump_workload_path,
                  "Write the workload's requests (prompt length, max tokens, n, arrival) as "
                  "JSON to FILE and exit without running");
  cmd->add_option("--label", o->label, "The rows' label in --summary (default: the workload)");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  cmd->footer(
      "Time is counted in engine steps: a request is submitted before the first step at or "
      "after its arrival step, so every allocator sees the same trace. Prompts are random "
      "token ids; generation ignores EOS and samples at temperature 1 with a seed per "
      "request.\n"
      "\n"
      "Examples:\n"
      "  pvllm bench --model models/stories260K --workload chat --num-requests 16 "
      "--kv-allocator both --kv-cache-mb 4\n"
      "  pvllm bench --random-weights tinyllama-1.1b --device cuda --workload nano "
      "--kv-allocator paged --kv-cache-mb 16384   # nano-vllm's benchmark on a GPU\n"
      "  pvllm bench --model models/stories260K --workload fixed --kv-allocator paged "
      "--kv-cache-dtype f32,f16,int8   # what one KV budget holds in each dtype");
  cmd->callback([o, exit_code]() { *exit_code = run_bench(*o); });
}

}  // namespace pvllm_cli
