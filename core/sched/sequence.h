// Sequence: one stream of tokens being generated. A request with n samples
// starts as one sequence (its prompt is prefilled once) and is forked into n
// after the prompt's first token is sampled.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kv/kv_cache_manager.h"

namespace pvllm {

// kSwapped: preempted by swap; its K/V waits in the host swap pool
// (swapped_blocks) and comes back without recompute.
enum class SequenceStatus : uint8_t { kWaiting = 0, kRunning = 1, kFinished = 2, kSwapped = 3 };

struct Sequence {
  uint64_t seq_id = 0;
  uint64_t request_id = 0;
  int32_t sample_index = 0;
  int32_t priority = 0;        // lower values are served first (as in vLLM)
  uint64_t arrival_order = 0;  // the request's place in submit order; ties broken by seq_id
  SequenceStatus status = SequenceStatus::kWaiting;

  std::vector<int32_t> token_ids;  // prompt followed by generated tokens
  int32_t num_prompt_tokens = 0;
  // K/V exist for positions [0, num_computed_tokens).
  int32_t num_computed_tokens = 0;
  // Of those, how many came from the prefix cache at the last admission.
  int32_t num_cached_tokens = 0;
  // Scheduler seats this sequence needs when admitted: n for a request's
  // first sequence before it forks, 1 otherwise.
  int32_t num_seats = 1;
  int32_t num_preemptions = 0;
  // Set the first time it waited while admission was refused for lack of KV
  // blocks (not seats or token budget); counted once in
  // Scheduler::num_queued_for_memory.
  bool queued_for_memory = false;
  // Prompt logprobs: the prompt is computed whole (no prefix-cache hit at
  // admission) in chunks of at most max_chunk_tokens (0 = no cap of its
  // own), each row's logits going to the host.
  bool skip_prefix_cache = false;
  int32_t max_chunk_tokens = 0;
  // Non-zero for sequences that advance together (the beams of one beam
  // search): the scheduler preempts them together and admits them only
  // when all of them fit, so that none holds blocks waiting for a sibling
  // that cannot get in.
  uint64_t group = 0;

  // Speculative decoding: the tokens proposed to follow this step's input
  // (fed after it, verified by the step's draws; empty when none). Set
  // while the step is scheduled, cleared once it is processed.
  std::vector<int32_t> proposed;
  // Back-off: drafts in a row whose proposals all failed (up to 6), and the
  // decode steps left before it proposes again (2^misses - 1 after a miss).
  int32_t spec_misses = 0;
  int32_t spec_wait = 0;

  BlockTable block_table;
  // While swapped: the swap-pool blocks holding its first
  // blocks_for(num_computed_tokens) blocks, in order.
  std::vector<BlockId> swapped_blocks;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_generated_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Tokens still to be fed to the model before the next sample.
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
};

// True when a should be served before b: lower priority value, then earlier
// arrival, then lower seq id.
inline bool served_before(const Sequence& a, const Sequence& b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  if (a.arrival_order != b.arrival_order) return a.arrival_order < b.arrival_order;
  return a.seq_id < b.seq_id;
}

}  // namespace pvllm
