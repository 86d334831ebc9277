// Engine::step and its stages:
//
//   take_new_requests   inbox → sequences in the scheduler; aborts applied
//   schedule            the scheduler's batch (core/sched/scheduler.h)
//   run_batch           copy-on-write copies, then the forward pass and the
//                       draws in the backend (split on out of memory)
//   append_or_fail      record what ran, fork n samples, append tokens; end
//                       the sequences whose batch failed
//   publish             events to the outbox, finished requests, stats
#include <algorithm>
#include <string>
#include <utility>

#include "core/base/check.h"
#include "core/engine/engine.h"
#include "core/engine/model_runner.h"
#include "core/engine/request.h"

namespace pvllm {

Status Engine::step() {
  std::lock_guard<std::mutex> step_lock(step_mu_);
  StepResult step;
  step.start = step_time_ = std::chrono::steady_clock::now();
  take_new_requests(&step);
  const ScheduledBatch batch = scheduler_->schedule();
  std::vector<SeqOutcome> outcomes = run_batch(batch);
  step_time_ = std::chrono::steady_clock::now();
  step.ran = !batch.empty();
  append_or_fail(batch, outcomes, &step);
  fail_lost_swaps(&step);
  publish(&step);
  return step.status;
}

// Moves submitted requests into the scheduler and applies aborts.
void Engine::take_new_requests(StepResult* step) {
  finished_requests_.clear();
  std::vector<std::unique_ptr<Request>> inbox;
  std::vector<uint64_t> aborts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
    aborts.swap(abort_inbox_);
  }
  for (std::unique_ptr<Request>& req : inbox) {
    auto seq = std::make_unique<Sequence>();
    seq->seq_id = next_seq_id_++;
    seq->request_id = req->id;
    seq->sample_index = 0;
    seq->priority = req->priority;
    seq->arrival_order = req->arrival_order;
    seq->token_ids = req->prompt_ids;
    seq->num_prompt_tokens = static_cast<int32_t>(req->prompt_ids.size());
    seq->num_seats = req->params.n;
    if (req->params.beam_width > 0) {
      start_beam_search(req.get(), seq.get());
    } else {
      auto state = std::make_unique<SampleState>(tokenizer_.get(), last_prompt_token(*req));
      state->seq = seq.get();
      start_matcher(*req, state.get());
      req->samples.push_back(std::move(state));
    }
    if (req->params.prompt_logprobs >= 0) {
      req->prompt_logprobs.resize(req->prompt_ids.size() - 1);
      req->prompt_logprobs_complete = req->prompt_ids.size() <= 1;
      seq->skip_prefix_cache = !req->prompt_logprobs_complete;
      seq->max_chunk_tokens = prompt_logprobs_chunk_cap(model_->config.vocab_size);
    }
    scheduler_->add(seq.get());
    sequences_[seq->seq_id] = std::move(seq);
    requests_[req->id] = std::move(req);
  }
  for (uint64_t id : aborts) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // finished in the meantime
    if (it->second->beam) {
      if (!it->second->beam_seqs.empty()) {
        end_beam_search(it->second.get(), FinishReason::kAbort, "", &step->events);
      }
      continue;
    }
    for (auto& sample : it->second->samples) {
      if (!sample->finished) {
        finish_sequence(sample->seq, FinishReason::kAbort, nullptr, "", &step->events);
      }
    }
  }
}

// The batch's swap traffic, out before in (a block swapped out this step may
// be the one a swap-in fills). A failure loses the swapped sequences' K/V,
// so they end with kError (swap_failures_), and the batch fails.
Status Engine::swap(const ScheduledBatch& batch) {
  Status st = batch.swap_out.empty() ? Status::Ok()
                                     : backend_->swap_blocks(batch.swap_out, SwapDirection::kOut);
  if (st.ok() && !batch.swap_in.empty()) {
    st = backend_->swap_blocks(batch.swap_in, SwapDirection::kIn);
  }
  swap_failures_.clear();
  if (!st.ok()) {
    swap_failure_ = st;
    for (Sequence* s : batch.preempted) {
      if (s->status == SequenceStatus::kSwapped) swap_failures_.push_back(s);
    }
  }
  return st;
}

// Sequences swapped out by a swap that failed: their K/V is lost, so they
// end with kError (a beam ends its whole search).
void Engine::fail_lost_swaps(StepResult* step) {
  const std::string why = "its K/V could not be swapped out: " + swap_failure_.message();
  for (Sequence* seq : swap_failures_) {
    Request& req = *requests_.at(seq->request_id);
    if (req.beam) {
      if (!req.beam_seqs.empty()) end_beam_search(&req, FinishReason::kError, why, &step->events);
    } else {
      finish_sequence(seq, FinishReason::kError, nullptr, why, &step->events);
    }
  }
  swap_failures_.clear();
}

// outcomes[i] is batch.seqs[i]'s. A failed block copy fails the whole batch.
std::vector<Engine::SeqOutcome> Engine::run_batch(const ScheduledBatch& batch) {
  std::vector<SeqOutcome> outcomes(batch.seqs.size());
  if (batch.empty()) return outcomes;
  Status copied = swap(batch);
  if (copied.ok()) copied = backend_->copy_blocks(batch.copies);
  if (!copied.ok()) {
    for (SeqOutcome& o : outcomes) o.status = copied;
    return outcomes;
  }
  forward_and_sample(batch.seqs, outcomes);
  return outcomes;
}

// Chunks that owe prompt logprobs run one by one through the backend's
// full-logits path (prompt_logprobs.cc); the rest of the batch runs as one.
void Engine::forward_and_sample(std::span<const ScheduledSeq> seqs,
                                std::span<SeqOutcome> outcomes) {
  std::vector<size_t> plain;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (needs_prompt_logits(seqs[i])) {
      forward_with_prompt_logprobs(seqs[i], &outcomes[i]);
    } else {
      plain.push_back(i);
    }
  }
  if (plain.size() == seqs.size()) {
    forward_and_sample_plain(seqs, outcomes);
    return;
  }
  if (plain.empty()) return;
  std::vector<ScheduledSeq> rest;
  std::vector<SeqOutcome> rest_outcomes(plain.size());
  for (size_t i : plain) rest.push_back(seqs[i]);
  forward_and_sample_plain(rest, rest_outcomes);
  for (size_t k = 0; k < plain.size(); ++k) outcomes[plain[k]] = std::move(rest_outcomes[k]);
}

// A batch that runs out of memory is split in halves and each half retried
// (K/V writes repeat the same values), so only a sequence that cannot run
// even alone fails and the rest keep their work. Any other failure fails
// the batch. Masks of constrained rows are part of forward_sample's
// contract: every backend draws with them.
void Engine::forward_and_sample_plain(std::span<const ScheduledSeq> seqs,
                                      std::span<SeqOutcome> outcomes) {
  ScheduledBatch sub;
  sub.seqs.assign(seqs.begin(), seqs.end());
  prepare_batch(sub, *kv_cache_, &metadata_);
  plan_draws(seqs, &sample_rows_);
  const Status st = backend_->forward_sample(metadata_, sample_rows_, &sample_results_);
  if (st.ok()) {
    auto next = sample_results_.begin();
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (!seqs[i].samples_next_token) continue;
      const Sequence& seq = *seqs[i].seq;
      const int32_t num_draws = draws_all_samples(seq) ? requests_.at(seq.request_id)->params.n : 1;
      outcomes[i].samples.assign(next, next + num_draws);
      next += num_draws;
    }
    return;
  }
  if (st.code() == StatusCode::kOutOfMemory && seqs.size() > 1) {
    const size_t half = seqs.size() / 2;
    forward_and_sample_plain(seqs.first(half), outcomes.first(half));
    forward_and_sample_plain(seqs.subspan(half), outcomes.subspan(half));
    return;
  }
  for (SeqOutcome& o : outcomes) o.status = st;
}

// Records what ran (computed tokens, prefix-cache hashes), ends the
// sequences whose batch failed with kError and the message, forks first
// tokens of n > 1 requests and appends every drawn token. The step reports
// the first failure.
void Engine::append_or_fail(const ScheduledBatch& batch, std::span<SeqOutcome> outcomes,
                            StepResult* step) {
  ScheduledBatch ran;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const ScheduledSeq& s = batch.seqs[i];
    if (s.num_new_tokens > 1 || s.seq->num_computed_tokens < s.seq->num_prompt_tokens) {
      step->num_prompt_tokens += s.num_new_tokens;
    }
    if (outcomes[i].status.ok()) {
      ran.seqs.push_back(s);
      const int64_t context = int64_t{s.seq->num_computed_tokens} + s.num_new_tokens;
      const int32_t window = model_->config.sliding_window;
      step->num_kv_tokens_attended += window > 0 ? std::min<int64_t>(context, window) : context;
    } else if (step->status.ok()) {
      step->status = outcomes[i].status;
    }
  }
  for (const ScheduledSeq& s : ran.seqs) note_ran(s, *step);
  scheduler_->on_batch_computed(ran);
  // Beam requests take their step after the batch (advance_beams): their
  // beams may be anywhere in it.
  std::vector<uint64_t> beam_requests;
  std::vector<std::string> beam_errors;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    Sequence* seq = batch.seqs[i].seq;
    if (Request& req = *requests_.at(seq->request_id); req.beam) {
      const auto at = std::find(beam_requests.begin(), beam_requests.end(), req.id);
      const size_t k = static_cast<size_t>(at - beam_requests.begin());
      if (at == beam_requests.end()) {
        beam_requests.push_back(req.id);
        beam_errors.emplace_back();
      }
      if (!outcomes[i].status.ok()) {
        if (beam_errors[k].empty()) beam_errors[k] = outcomes[i].status.message();
      } else if (batch.seqs[i].samples_next_token) {
        note_beam_draw(seq, outcomes[i].samples.at(0));
        ++step->num_sampled;
      }
      continue;
    }
    if (!outcomes[i].status.ok()) {
      finish_sequence(seq, FinishReason::kError, nullptr, outcomes[i].status.message(),
                      &step->events);
      continue;
    }
    if (!batch.seqs[i].samples_next_token) continue;
    std::vector<Sequence*> group{seq};
    if (draws_all_samples(*seq)) {
      fork_samples(seq, &group);
    } else {
      requests_.at(seq->request_id)->forked = true;
    }
    PVLLM_CHECK(group.size() == outcomes[i].samples.size(), "one draw per sample");
    for (size_t k = 0; k < group.size(); ++k) {
      append_token(group[k], outcomes[i].samples[k], &step->events);
      ++step->num_sampled;
    }
  }
  advance_beams(beam_requests, beam_errors, &step->events);
}

// Hands the step's events to poll, forgets finished requests, and updates
// the stats, under the lock shared with submit / poll / abort / stats.
void Engine::publish(StepResult* step) {
  attach_prompt_logprobs(&step->events);
  std::lock_guard<std::mutex> lock(mu_);
  honour_late_aborts_locked(step);
  for (Output& ev : step->events) {
    auto it = requests_.find(ev.request_id);
    if (it != requests_.end()) ev.sequence = it->second->next_event_sequence++;
  }
  for (uint64_t id : finished_requests_) {
    requests_.erase(id);
    live_request_ids_.erase(id);
    ++stats_.num_requests_finished;
  }
  for (Output& ev : step->events) outbox_.push_back(std::move(ev));
  update_stats_locked(*step);
}

// An abort accepted while this step ran (after take_new_requests took the
// aborts) found its request live, so pvllm_abort said OK; when the step has
// just finished that request, its samples that finished in this step end
// with kAbort, as they would have had the abort come a moment earlier. So an
// accepted abort always ends the request with kAbort, and an abort after the
// final event is NotFound (live_request_ids_ no longer holds the id).
void Engine::honour_late_aborts_locked(StepResult* step) {
  if (abort_inbox_.empty() || finished_requests_.empty()) return;
  for (uint64_t id : finished_requests_) {
    if (std::find(abort_inbox_.begin(), abort_inbox_.end(), id) == abort_inbox_.end()) continue;
    for (Output& ev : step->events) {
      if (ev.request_id != id) continue;
      if (ev.finish_reason == FinishReason::kStop || ev.finish_reason == FinishReason::kLength) {
        ev.finish_reason = FinishReason::kAbort;
      }
    }
    abort_inbox_.erase(std::remove(abort_inbox_.begin(), abort_inbox_.end(), id),
                       abort_inbox_.end());
  }
}

void Engine::note_ran(const ScheduledSeq& s, const StepResult& step) {
  Request& req = *requests_.at(s.seq->request_id);
  if (!req.has_run) {
    req.has_run = true;
    req.first_run_time = step.start;
  }
  const Sequence& seq = *s.seq;
  if (seq.num_computed_tokens < seq.num_prompt_tokens) {  // a prompt chunk
    // Its first chunk since admission starts right after the cached prefix.
    if (seq.num_cached_tokens > 0 && seq.num_computed_tokens == seq.num_cached_tokens) {
      req.num_cached_prompt_tokens += seq.num_cached_tokens;
    }
    req.num_prefill_tokens +=
        std::min(s.num_new_tokens, seq.num_prompt_tokens - seq.num_computed_tokens);
  }
}

void Engine::update_stats_locked(const StepResult& step) {
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
  if (step.ran) {
    const float ms =
        std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - step.start)
            .count();
    if (step_times_ms_.size() < kStepWindow) {
      step_times_ms_.push_back(ms);
    } else {
      step_times_ms_[next_step_time_] = ms;
    }
    next_step_time_ = (next_step_time_ + 1) % kStepWindow;
  }
  stats_.num_prompt_tokens_processed += step.num_prompt_tokens;
  stats_.num_generation_tokens += step.num_sampled;
  stats_.num_kv_tokens_attended += step.num_kv_tokens_attended;
  ++stats_.num_steps;
}

}  // namespace pvllm
