#include "core/engine/model_runner.h"

#include <algorithm>
#include <utility>

#include "core/base/check.h"
#include "core/sample/speculative.h"

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
    const int32_t num_tokens = seq.num_tokens();
    for (int32_t pos = first; pos < end; ++pos) {
      // Past the sequence's tokens: its proposals (speculative decoding).
      md->input_ids.push_back(pos < num_tokens ? seq.token_ids[pos]
                                               : seq.proposed[pos - num_tokens]);
      md->positions.push_back(pos);
      md->slot_mapping.push_back(kv_cache.slot(seq.block_table, pos));
    }
    md->query_start.push_back(static_cast<int32_t>(md->input_ids.size()));
    md->context_lens.push_back(end);
    std::copy(seq.block_table.blocks.begin(), seq.block_table.blocks.end(),
              md->block_tables.begin() + static_cast<size_t>(i) * max_blocks);
    if (s.samples_next_token) {
      // One row per proposal checked, then the last.
      const auto num_rows = static_cast<int32_t>(seq.proposed.size()) + 1;
      for (int32_t r = num_rows; r >= 1; --r) md->logits_rows.push_back(md->query_start.back() - r);
    }
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
    o.speculated = false;
    o.num_accepted = 0;
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
  const bool proposals =
      std::any_of(batch.seqs.begin(), batch.seqs.end(),
                  [](const ScheduledSeq& s) { return !s.seq->proposed.empty(); });
  if (plain.size() == batch.seqs.size()) {
    if (proposals) {
      forward_and_verify(batch.seqs, plans, out->outcomes);
    } else {
      forward_and_sample(batch.seqs, plans, out->outcomes);
    }
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
  if (proposals) {
    forward_and_verify(seqs, rest_plans, outcomes);
  } else {
    forward_and_sample(seqs, rest_plans, outcomes);
  }
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
  retry_in_halves(st, seqs, plans, outcomes, &ModelRunner::forward_and_sample);
}

void ModelRunner::retry_in_halves(const Status& st, std::span<const ScheduledSeq> seqs,
                                  std::span<const SeqPlan> plans, std::span<SeqOutcome> outcomes,
                                  RunPart run) {
  if (st.code() == StatusCode::kOutOfMemory && seqs.size() > 1) {
    const size_t half = seqs.size() / 2;
    (this->*run)(seqs.first(half), plans.first(half), outcomes.first(half));
    (this->*run)(seqs.subspan(half), plans.subspan(half), outcomes.subspan(half));
    return;
  }
  for (SeqOutcome& o : outcomes) o.status = st;
}

void ModelRunner::forward_and_verify(std::span<const ScheduledSeq> seqs,
                                     std::span<const SeqPlan> plans,
                                     std::span<SeqOutcome> outcomes) {
  ScheduledBatch sub;
  sub.seqs.assign(seqs.begin(), seqs.end());
  prepare_batch(sub, *kv_cache_, &metadata_);
  const size_t vocab = static_cast<size_t>(vocab_size_);
  logits_.resize(metadata_.logits_rows.size() * vocab);
  const Status st = backend_->forward(metadata_, logits_.data());
  if (!st.ok()) {
    retry_in_halves(st, seqs, plans, outcomes, &ModelRunner::forward_and_verify);
    return;
  }
  auto row_of = [&](size_t r) { return std::span<const float>(logits_.data() + r * vocab, vocab); };
  size_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!seqs[i].samples_next_token) continue;
    const Sequence& seq = *seqs[i].seq;
    SeqOutcome& outcome = outcomes[i];
    if (seq.proposed.empty()) {
      for (const SampleRow& draw : plans[i].draws) {
        outcome.samples.push_back(sample_token(row_of(row), *draw.params, draw.prompt_ids,
                                               draw.output_ids, draw.seed, draw.sample_index,
                                               draw.step, draw.allowed));
      }
      ++row;
      continue;
    }
    // A decode with proposals: one draw planned, at the first position;
    // each later position sees the proposals before it as output.
    PVLLM_CHECK(plans[i].draws.size() == 1 && plans[i].draws[0].allowed.empty(),
                "proposals for a sequence that draws more than once or under a constraint");
    const SampleRow& base = plans[i].draws[0];
    const SamplingParams& params = *base.params;
    outcome.speculated = true;
    spec_output_.assign(base.output_ids.begin(), base.output_ids.end());
    const auto k = static_cast<int32_t>(seq.proposed.size());
    for (int32_t j = 0; j <= k; ++j) {
      const std::span<const float> x = row_of(row + static_cast<size_t>(j));
      const int32_t step = base.step + j;
      if (j == k) {  // every proposal stood: the last row draws
        outcome.samples.push_back(sample_token(x, params, base.prompt_ids, spec_output_, base.seed,
                                               base.sample_index, step));
        break;
      }
      sample_distribution(x, params, base.prompt_ids, spec_output_, {}, &probs_);
      const SpeculativeVerdict v =
          verify_proposal(probs_, seq.proposed[j], {}, base.seed, base.sample_index, step);
      SampleResult r;
      r.token_id = v.token_id;
      if (params.logprobs >= 0 && v.token_id >= 0)
        r = token_logprobs(x, v.token_id, params.logprobs);
      outcome.samples.push_back(std::move(r));
      if (!v.accepted) break;
      ++outcome.num_accepted;
      spec_output_.push_back(seq.proposed[j]);
    }
    row += static_cast<size_t>(k) + 1;
  }
}

}  // namespace pvllm
