// EngineStats: the engine's counters and gauges, a snapshot taken by
// Engine::stats() (the C ABI's pvllm_stats).
#pragma once

#include <cstdint>

namespace pvllm {

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_blocks_total = 0;
  int32_t num_blocks_used = 0;
  int32_t num_blocks_free = 0;
  int32_t num_blocks_cached = 0;
  float kv_utilization = 0.0f;
  int64_t reserved_unused_slots = 0;
  float prefix_cache_hit_rate = 0.0f;  // hits / queries, in blocks
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_queries = 0;
  int64_t num_preemptions = 0;
  int64_t num_prompt_tokens_processed = 0;
  int64_t num_generation_tokens = 0;
  int64_t num_cached_prompt_tokens = 0;  // prefill skipped thanks to the prefix cache
  int64_t num_steps = 0;
  int64_t num_requests_finished = 0;
  // Over distinct blocks of running sequences: slots holding computed K/V
  // and slots reserved (tokens stored / slots reserved = KV utilization as
  // the memory benchmarks define it).
  int64_t num_kv_tokens_stored = 0;
  int64_t num_kv_slots_reserved = 0;
  int64_t num_seqs_queued_for_memory = 0;  // admission refused for lack of blocks, once each
  int64_t num_block_copies = 0;            // copy-on-write and contiguous-fork copies
  // Preemption by swap (num_preemptions counts both kinds).
  int64_t num_preemptions_by_swap = 0;
  int64_t num_blocks_swapped_out = 0;
  int64_t num_blocks_swapped_in = 0;
  int64_t num_swap_bytes = 0;              // moved both ways
  int64_t num_prefix_cache_evictions = 0;  // cached blocks reclaimed for new use
  // Over every step, the context positions the attention of each computed
  // sequence reads: its whole context after the step, or the last
  // sliding_window of it. Times the K/V bytes per token, the cache traffic
  // a step's attention cannot avoid (the bandwidth roofline of
  // docs/performance.md counts it beside the weights read once per step).
  int64_t num_kv_tokens_attended = 0;
  // Structured output: the draws given a mask and the host time spent
  // making those masks (cache lookups, trie walks on a miss, copies).
  int64_t num_constrained_draws = 0;
  double constraint_mask_ms = 0.0;
  // Speculative decoding: decode steps that carried proposals, the tokens
  // proposed and those that stood, and of those steps how many had their
  // i-th proposal stand (acceptance by position, i < kSpecPositions).
  static constexpr int kSpecPositions = 16;
  int64_t num_spec_drafts = 0;
  int64_t num_spec_proposed_tokens = 0;
  int64_t num_spec_accepted_tokens = 0;
  int64_t spec_accepted_at[kSpecPositions] = {};
  // Wall time of the steps that ran a batch, over the last kStepWindow of
  // them (ms); 0 before the first.
  float step_time_p50_ms = 0.0f;
  float step_time_p99_ms = 0.0f;
  float step_time_max_ms = 0.0f;
};

}  // namespace pvllm
