#include "core/engine/model_runner.h"

#include <algorithm>
#include <utility>

namespace pvllm {

void prepare_batch(const ScheduledBatch& batch, const KvCacheManager& kv_cache, BatchMetadata* md) {
  const int32_t num_seqs = static_cast<int32_t>(batch.seqs.size());
  md->num_seqs = num_seqs;
  md->num_tokens = batch.num_batched_tokens;
  md->input_ids.clear();
  md->positions.clear();
  md->slot_mapping.clear();
  md->query_start.assign(1, 0);
  md->context_lens.clear();
  md->logits_rows.clear();

  int32_t max_blocks = 0;
  for (const ScheduledSeq& s : batch.seqs) {
    max_blocks = std::max(max_blocks, static_cast<int32_t>(s.seq->block_table.blocks.size()));
  }
  md->max_blocks_per_seq = max_blocks;
  md->block_tables.assign(static_cast<size_t>(num_seqs) * max_blocks, -1);

  for (int32_t i = 0; i < num_seqs; ++i) {
    const ScheduledSeq& s = batch.seqs[i];
    const Sequence& seq = *s.seq;
    const int32_t first = seq.num_computed_tokens;
    const int32_t end = first + s.num_new_tokens;
    for (int32_t pos = first; pos < end; ++pos) {
      md->input_ids.push_back(seq.token_ids[pos]);
      md->positions.push_back(pos);
      md->slot_mapping.push_back(kv_cache.slot(seq.block_table, pos));
    }
    md->query_start.push_back(static_cast<int32_t>(md->input_ids.size()));
    md->context_lens.push_back(end);
    std::copy(seq.block_table.blocks.begin(), seq.block_table.blocks.end(),
              md->block_tables.begin() + static_cast<size_t>(i) * max_blocks);
    if (s.samples_next_token) md->logits_rows.push_back(md->query_start.back() - 1);
  }
  md->num_tokens = static_cast<int32_t>(md->input_ids.size());
}

void ModelRunner::run(const ScheduledBatch& batch, std::span<const SeqPlan> plans, Result* out) {
  // Reused step to step (their vectors keep their capacity).
  out->outcomes.resize(batch.seqs.size());
  for (SeqOutcome& o : out->outcomes) {
    o.status = Status::Ok();
    o.samples.clear();
    o.prompt_logprobs.clear();
  }
  out->forks_lost = Status::Ok();
  out->swaps_lost = Status::Ok();
  if (batch.empty()) {
    // Nothing runs (every sequence ended or waits): pending fork copies
    // still fill their children.
    if (!batch.fork_copies.empty()) out->forks_lost = backend_->copy_blocks(batch.fork_copies);
    return;
  }
  const Status moved = move_blocks(batch, out);
  if (!moved.ok()) {
    for (SeqOutcome& o : out->outcomes) o.status = moved;
    return;
  }
  // Chunks that owe prompt logprobs run one by one through the backend's
  // full-logits path; the rest of the batch runs as one.
  std::vector<size_t> plain;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (plans[i].prompt_logprobs >= 0) {
      forward_with_prompt_logprobs(batch.seqs[i], plans[i], &out->outcomes[i]);
    } else {
      plain.push_back(i);
    }
  }
  if (plain.size() == batch.seqs.size()) {
    forward_and_sample(batch.seqs, plans, out->outcomes);
    return;
  }
  if (plain.empty()) return;
  std::vector<ScheduledSeq> seqs;
  std::vector<SeqPlan> rest_plans;
  std::vector<SeqOutcome> outcomes(plain.size());
  for (size_t i : plain) {
    seqs.push_back(batch.seqs[i]);
    rest_plans.push_back(plans[i]);
  }
  forward_and_sample(seqs, rest_plans, outcomes);
  for (size_t k = 0; k < plain.size(); ++k) out->outcomes[plain[k]] = std::move(outcomes[k]);
}

// Fork copies first (the blocks they read may be given to others by this
// batch), then the swaps, out before in (a block swapped out may be the one
// a swap-in fills), then the copies on write.
Status ModelRunner::move_blocks(const ScheduledBatch& batch, Result* out) {
  Status st = batch.fork_copies.empty() ? Status::Ok() : backend_->copy_blocks(batch.fork_copies);
  if (!st.ok()) {
    out->forks_lost = st;
    if (!batch.swap_out.empty()) out->swaps_lost = st;
    return st;
  }
  if (!batch.swap_out.empty()) st = backend_->swap_blocks(batch.swap_out, SwapDirection::kOut);
  if (st.ok() && !batch.swap_in.empty()) {
    st = backend_->swap_blocks(batch.swap_in, SwapDirection::kIn);
  }
  if (!st.ok()) {
    out->swaps_lost = st;
    return st;
  }
  return backend_->copy_blocks(batch.copies);
}

void ModelRunner::forward_and_sample(std::span<const ScheduledSeq> seqs,
                                     std::span<const SeqPlan> plans,
                                     std::span<SeqOutcome> outcomes) {
  ScheduledBatch sub;
  sub.seqs.assign(seqs.begin(), seqs.end());
  prepare_batch(sub, *kv_cache_, &metadata_);
  rows_.clear();
  int32_t logits_index = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!seqs[i].samples_next_token) continue;
    for (SampleRow row : plans[i].draws) {
      row.logits_index = logits_index;
      rows_.push_back(row);
    }
    ++logits_index;
  }
  const Status st = backend_->forward_sample(metadata_, rows_, &results_);
  if (st.ok()) {
    auto next = results_.begin();
    for (size_t i = 0; i < seqs.size(); ++i) {
      const size_t num_draws = plans[i].draws.size();
      outcomes[i].samples.assign(next, next + static_cast<std::ptrdiff_t>(num_draws));
      next += static_cast<std::ptrdiff_t>(num_draws);
    }
    return;
  }
  if (st.code() == StatusCode::kOutOfMemory && seqs.size() > 1) {
    const size_t half = seqs.size() / 2;
    forward_and_sample(seqs.first(half), plans.first(half), outcomes.first(half));
    forward_and_sample(seqs.subspan(half), plans.subspan(half), outcomes.subspan(half));
    return;
  }
  for (SeqOutcome& o : outcomes) o.status = st;
}

}  // namespace pvllm
