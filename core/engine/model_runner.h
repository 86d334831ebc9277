// ModelRunner: runs one scheduled batch on the backend. It moves the
// batch's blocks (fork copies, swaps, copy-on-write copies), turns the
// batch into the flat arrays a backend consumes (prepare_batch; DESIGN.md:
// "ModelRunner.prepare(batch) ──▶ BatchMetadata"), and runs the forward
// pass with the draws the OutputProcessor planned, one sequence at a time
// for prompt-logprobs chunks, and in halves when the backend runs out of
// memory. It keeps no state between steps but its buffers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/base/status.h"
#include "core/engine/step_plan.h"
#include "core/kv/kv_cache_manager.h"
#include "core/sched/scheduler.h"

namespace pvllm {

// Fills `md` for `batch`: one row per new token of every scheduled
// sequence, in batch order; a logits row for every sequence that samples
// (its last row), in batch order.
void prepare_batch(const ScheduledBatch& batch, const KvCacheManager& kv_cache, BatchMetadata* md);

class ModelRunner {
 public:
  ModelRunner(Backend* backend, const KvCacheManager* kv_cache, int32_t vocab_size)
      : backend_(backend), kv_cache_(kv_cache), vocab_size_(vocab_size) {}

  struct Result {
    std::vector<SeqOutcome> outcomes;  // outcomes[i] for batch.seqs[i]
    // Not ok: the fork copies failed (or never ran), so the sequences in
    // batch.forked lost their K/V; likewise the swap-outs and the
    // sequences swapped out by this batch.
    Status forks_lost;
    Status swaps_lost;
  };

  // Runs `batch` with plans[i] for batch.seqs[i]. A failure to move blocks
  // fails the whole batch; a batch that runs out of memory is split in
  // halves and each half retried (K/V writes repeat the same values), so
  // only a sequence that cannot run even alone fails and the rest keep
  // their work. Any other failure fails the batch.
  void run(const ScheduledBatch& batch, std::span<const SeqPlan> plans, Result* out);

 private:
  Status move_blocks(const ScheduledBatch& batch, Result* out);
  void forward_and_sample(std::span<const ScheduledSeq> seqs, std::span<const SeqPlan> plans,
                          std::span<SeqOutcome> outcomes);
  // The same for a batch where some sequences carry proposals
  // (speculative decoding): the logits of every row that draws come to the
  // host, where each proposal is verified (core/sample/speculative.h) and
  // the other draws made as the backend would make them.
  void forward_and_verify(std::span<const ScheduledSeq> seqs, std::span<const SeqPlan> plans,
                          std::span<SeqOutcome> outcomes);
  // After a failed run of `seqs` by `run`: out of memory, each half again
  // (so only a sequence that cannot run alone fails); else every outcome
  // fails with `st`.
  using RunPart = void (ModelRunner::*)(std::span<const ScheduledSeq>, std::span<const SeqPlan>,
                                        std::span<SeqOutcome>);
  void retry_in_halves(const Status& st, std::span<const ScheduledSeq> seqs,
                       std::span<const SeqPlan> plans, std::span<SeqOutcome> outcomes, RunPart run);
  // Prompt logprobs (prompt_logprobs.cc).
  void forward_with_prompt_logprobs(const ScheduledSeq& s, const SeqPlan& plan,
                                    SeqOutcome* outcome);

  Backend* const backend_;
  const KvCacheManager* const kv_cache_;
  const int32_t vocab_size_;
  BatchMetadata metadata_;
  std::vector<SampleRow> rows_;
  std::vector<SampleResult> results_;
  std::vector<float> logits_;         // forward_and_verify's rows
  std::vector<double> probs_;         // a position's target distribution
  std::vector<int32_t> spec_output_;  // output ids with the proposals that stood
};

}  // namespace pvllm
