// Engine::step: take, schedule, run, process, publish.
//
//   take_new_requests   inbox → the output processor and the scheduler;
//                       aborts applied
//   schedule            the scheduler's batch (core/sched/scheduler.h)
//   plan                the draws of each scheduled sequence, decided once
//                       (OutputProcessor::plan)
//   run                 block copies and swaps, the forward pass and the
//                       draws in the backend (ModelRunner::run)
//   record_ran          the scheduler advances what ran
//   process             fork, append, stop, finish (OutputProcessor)
//   publish             events to the request queues, stats
#include <algorithm>
#include <string>
#include <utility>

#include "core/engine/engine.h"
#include "core/engine/output_processor.h"

namespace pvllm {

Status Engine::step() {
  Status status;
  {
    std::lock_guard<std::mutex> step_lock(step_mu_);
    status = step_locked();
  }
  // Outside the step lock: a handler may call into the engine.
  events_.deliver_to_handlers();
  return status;
}

Status Engine::step_locked() {
  StepCounts counts;
  counts.start = std::chrono::steady_clock::now();
  processor_->set_step_time(counts.start);
  std::vector<Output> events;
  take_new_requests(&events);
  const ScheduledBatch batch = scheduler_->schedule();
  const std::span<const SeqPlan> plans = processor_->plan(batch);
  runner_->run(batch, plans, &run_);
  processor_->set_step_time(std::chrono::steady_clock::now());
  counts.ran = !batch.empty();
  std::string lost_why;
  const std::vector<uint64_t> lost = lost_sequences(batch, &lost_why);
  record_ran(batch, &counts);
  processor_->process(batch, plans, run_.outcomes, &events);
  settle_proposals();
  for (uint64_t seq_id : lost) processor_->fail_lost(seq_id, lost_why, &events);
  publish(counts, &events);
  return counts.status;
}

// Moves submitted requests into the output processor (and their first
// sequences into the scheduler), and applies aborts.
void Engine::take_new_requests(std::vector<Output>* events) {
  std::vector<std::unique_ptr<Request>> inbox;
  std::vector<uint64_t> aborts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
    aborts.swap(abort_inbox_);
  }
  for (std::unique_ptr<Request>& req : inbox) processor_->add(std::move(req));
  for (uint64_t id : aborts) processor_->abort(id, events);
}

// Sequences whose K/V the batch's block traffic lost outside the batch
// (read before anything ends them, while every pointer is live): those
// swapped out by a failed swap, and those forked from others whose copies
// failed. They end with kError after the batch is processed.
std::vector<uint64_t> Engine::lost_sequences(const ScheduledBatch& batch, std::string* why) const {
  std::vector<uint64_t> lost;
  if (!run_.forks_lost.ok()) {
    *why = "its K/V could not be copied from the sequence it was forked from: " +
           run_.forks_lost.message();
    lost = batch.forked;
  }
  if (!run_.swaps_lost.ok()) {
    if (why->empty()) *why = "its K/V could not be swapped out: " + run_.swaps_lost.message();
    for (const Sequence* s : batch.preempted) {
      if (s->status == SequenceStatus::kSwapped) lost.push_back(s->seq_id);
    }
  }
  return lost;
}

// Records what ran (the requests' timing and counts, prompt logprobs, then
// the scheduler's computed tokens and prefix-cache hashes) and counts the
// step; the step reports the batch's first failure.
void Engine::record_ran(const ScheduledBatch& batch, StepCounts* counts) {
  ScheduledBatch ran;
  speculated_.clear();
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const ScheduledSeq& s = batch.seqs[i];
    SeqOutcome& outcome = run_.outcomes[i];
    const bool proposals = !s.seq->proposed.empty();
    if (!proposals &&
        (s.num_new_tokens > 1 || s.seq->num_computed_tokens < s.seq->num_prompt_tokens)) {
      counts->num_prompt_tokens += s.num_new_tokens;
    }
    if (!outcome.status.ok()) {
      if (counts->status.ok()) counts->status = outcome.status;
      continue;
    }
    if (proposals) {
      // Its K/V stands for the last input token and the proposals that
      // stood; the scheduler hears of it once they are appended.
      speculated_.emplace_back(s.seq->seq_id, 1 + outcome.num_accepted);
      Sequence& seq = *s.seq;
      if (outcome.num_accepted == 0) {
        seq.spec_misses = std::min(seq.spec_misses + 1, 6);
        seq.spec_wait = (1 << seq.spec_misses) - 1;
      } else {
        seq.spec_misses = 0;
      }
      counts->num_spec_drafts += 1;
      counts->num_spec_proposed += static_cast<int64_t>(s.seq->proposed.size());
      counts->num_spec_accepted += outcome.num_accepted;
      for (int32_t p = 0; p < outcome.num_accepted && p < EngineStats::kSpecPositions; ++p) {
        ++counts->spec_accepted_at[p];
      }
    } else {
      ran.seqs.push_back(s);
    }
    const int64_t context = int64_t{s.seq->num_computed_tokens} + s.num_new_tokens;
    const int32_t window = model_->config.sliding_window;
    counts->num_kv_tokens_attended += window > 0 ? std::min<int64_t>(context, window) : context;
    counts->num_sampled += static_cast<int64_t>(outcome.samples.size());
    processor_->record_ran(s, &outcome, counts->start);
  }
  scheduler_->on_batch_computed(ran);
  // The proposals have been fed and verified; process() may end and free
  // sequences, so they are cleared here, while every one is alive.
  for (const ScheduledSeq& s : batch.seqs) s.seq->proposed.clear();
}

void Engine::propose(Sequence* seq, int32_t max) {
  if (config_.speculative_max_running > 0 &&
      scheduler_->num_running() > config_.speculative_max_running) {
    return;
  }
  if (seq->spec_wait > 0) {  // backing off after failed drafts
    --seq->spec_wait;
    return;
  }
  const int32_t k = std::min({config_.speculative_tokens, max, processor_->max_proposals(*seq)});
  if (k <= 0) return;
  proposer_->propose({seq->request_id, seq->sample_index, seq->token_ids, seq->num_prompt_tokens},
                     k, &seq->proposed);
  if (static_cast<int32_t>(seq->proposed.size()) > k) seq->proposed.resize(k);
  // A token outside the vocabulary ends the proposal there.
  const int32_t vocab = model_->config.vocab_size;
  seq->proposed.erase(std::find_if(seq->proposed.begin(), seq->proposed.end(),
                                   [vocab](int32_t id) { return id < 0 || id >= vocab; }),
                      seq->proposed.end());
}

void Engine::settle_proposals() {
  ScheduledBatch stood;
  for (const auto& [seq_id, num_stood] : speculated_) {
    Sequence* seq = processor_->find_sequence(seq_id);
    if (seq == nullptr || seq->status != SequenceStatus::kRunning) continue;  // it ended
    stood.seqs.push_back(ScheduledSeq{seq, num_stood, true});
  }
  scheduler_->on_batch_computed(stood);
  for (const ScheduledSeq& s : stood.seqs) {
    // Blocks past the computed K/V held only rejected proposals (the next
    // step takes a slot for its input as any decode does).
    if (s.seq->status == SequenceStatus::kRunning) {
      kv_cache_->drop_blocks_after(&s.seq->block_table, s.seq->num_computed_tokens);
    }
  }
}

// Hands the step's events to their request queues, forgets finished
// requests, and updates the stats, under the lock shared with submit /
// abort / stats.
void Engine::publish(const StepCounts& counts, std::vector<Output>* events) {
  processor_->attach_prompt_logprobs(events);
  std::lock_guard<std::mutex> lock(mu_);
  honour_late_aborts_locked(events);
  for (uint64_t id : processor_->finished_requests()) {
    live_request_ids_.erase(id);
    ++stats_.num_requests_finished;
  }
  processor_->forget_finished();
  events_.publish(events);
  update_stats_locked(counts);
}

// An abort accepted while this step ran (after take_new_requests took the
// aborts) found its request live, so pvllm_abort said OK; when the step has
// just finished that request, its samples that finished in this step end
// with kAbort, as they would have had the abort come a moment earlier. So an
// accepted abort always ends the request with kAbort, and an abort after the
// final event is NotFound (live_request_ids_ no longer holds the id).
void Engine::honour_late_aborts_locked(std::vector<Output>* events) {
  const std::vector<uint64_t>& finished = processor_->finished_requests();
  if (abort_inbox_.empty() || finished.empty()) return;
  for (uint64_t id : finished) {
    if (std::find(abort_inbox_.begin(), abort_inbox_.end(), id) == abort_inbox_.end()) continue;
    for (Output& ev : *events) {
      if (ev.request_id != id) continue;
      if (ev.finish_reason == FinishReason::kStop || ev.finish_reason == FinishReason::kLength) {
        ev.finish_reason = FinishReason::kAbort;
      }
    }
    abort_inbox_.erase(std::remove(abort_inbox_.begin(), abort_inbox_.end(), id),
                       abort_inbox_.end());
  }
}

void Engine::update_stats_locked(const StepCounts& counts) {
  const KvCacheMetrics m = kv_cache_->metrics();
  stats_.num_running = scheduler_->num_running();
  stats_.num_waiting = scheduler_->num_waiting();
  stats_.num_blocks_total = m.num_blocks;
  stats_.num_blocks_used = m.num_used_blocks;
  stats_.num_blocks_free = m.num_free_blocks;
  stats_.num_blocks_cached = m.num_cached_blocks;
  stats_.kv_utilization = m.utilization;
  stats_.reserved_unused_slots = scheduler_->num_reserved_unused_slots();
  stats_.prefix_cache_hits = m.prefix_hits;
  stats_.prefix_cache_queries = m.prefix_queries;
  stats_.prefix_cache_hit_rate =
      m.prefix_queries > 0 ? static_cast<float>(m.prefix_hits) / m.prefix_queries : 0.0f;
  stats_.num_cached_prompt_tokens = m.prefix_hits * kv_cache_->block_size();
  stats_.num_preemptions = scheduler_->num_preemptions();
  stats_.num_spec_drafts += counts.num_spec_drafts;
  stats_.num_spec_proposed_tokens += counts.num_spec_proposed;
  stats_.num_spec_accepted_tokens += counts.num_spec_accepted;
  for (int p = 0; p < EngineStats::kSpecPositions; ++p) {
    stats_.spec_accepted_at[p] += counts.spec_accepted_at[p];
  }
  const KvOccupancy occ = scheduler_->kv_occupancy();
  stats_.num_kv_tokens_stored = occ.num_tokens_stored;
  stats_.num_kv_slots_reserved = occ.num_slots_reserved;
  stats_.num_seqs_queued_for_memory = scheduler_->num_queued_for_memory();
  stats_.num_block_copies = m.num_cow_copies;
  stats_.num_preemptions_by_swap = scheduler_->num_preemptions_by_swap();
  stats_.num_blocks_swapped_out = scheduler_->num_blocks_swapped_out();
  stats_.num_blocks_swapped_in = scheduler_->num_blocks_swapped_in();
  stats_.num_swap_bytes = (stats_.num_blocks_swapped_out + stats_.num_blocks_swapped_in) *
                          static_cast<int64_t>(swap_block_bytes_);
  stats_.num_prefix_cache_evictions = m.num_evictions;
  stats_.num_constrained_draws = processor_->constraints().num_constrained_draws();
  stats_.constraint_mask_ms = processor_->constraints().mask_ms();
  if (counts.ran) {
    const float ms =
        std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - counts.start)
            .count();
    if (step_times_ms_.size() < kStepWindow) {
      step_times_ms_.push_back(ms);
    } else {
      step_times_ms_[next_step_time_] = ms;
    }
    next_step_time_ = (next_step_time_ + 1) % kStepWindow;
  }
  stats_.num_prompt_tokens_processed += counts.num_prompt_tokens;
  stats_.num_generation_tokens += counts.num_sampled;
  stats_.num_kv_tokens_attended += counts.num_kv_tokens_attended;
  ++stats_.num_steps;
}

}  // namespace pvllm
