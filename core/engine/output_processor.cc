// The OutputProcessor's requests and their steps; appending tokens and
// finishing samples are in sample_output.cc.
#include "core/engine/output_processor.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/base/check.h"

namespace pvllm {

OutputProcessor::OutputProcessor(const Tokenizer* tokenizer, int32_t vocab_size,
                                 int32_t max_model_len, Scheduler* scheduler)
    : tokenizer_(tokenizer),
      vocab_size_(vocab_size),
      max_model_len_(max_model_len),
      scheduler_(scheduler),
      constraints_(tokenizer, vocab_size),
      beams_(this, tokenizer, max_model_len) {}

OutputProcessor::~OutputProcessor() = default;

std::unique_ptr<SampleState> OutputProcessor::new_sample(const Request& req, Sequence* seq) const {
  auto state = std::make_unique<SampleState>(tokenizer_, last_prompt_token(req, tokenizer_));
  state->seq = seq;
  constraints_.start_matcher(req, state.get());
  return state;
}

void OutputProcessor::add(std::unique_ptr<Request> req) {
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
    beams_.start(req.get(), seq.get());
  } else {
    req->samples.push_back(new_sample(*req, seq.get()));
  }
  if (req->params.prompt_logprobs >= 0) {
    req->prompt_logprobs.resize(req->prompt_ids.size() - 1);
    req->prompt_logprobs_complete = req->prompt_ids.size() <= 1;
    seq->skip_prefix_cache = !req->prompt_logprobs_complete;
    seq->max_chunk_tokens = prompt_logprobs_chunk_cap(vocab_size_);
  }
  scheduler_->add(seq.get());
  sequences_[seq->seq_id] = std::move(seq);
  requests_[req->id] = std::move(req);
}

void OutputProcessor::abort(uint64_t id, std::vector<Output>* events) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request* req = it->second.get();
  if (req->beam) {
    if (!req->beam->seqs.empty()) beams_.end(req, FinishReason::kAbort, "", events);
    return;
  }
  for (auto& sample : req->samples) {
    if (!sample->finished) finish(sample->seq, FinishReason::kAbort, nullptr, "", events);
  }
}

// n draws for a request's first token (from its last prompt row; the
// siblings are forked right after), one for every other sequence that
// samples; prompt logprobs for a first sequence's chunk whose rows predict
// prompt tokens (rows at positions p <= P - 2 predict token p + 1).
std::span<const SeqPlan> OutputProcessor::plan(const ScheduledBatch& batch) {
  constraints_.begin_step();
  if (plans_.size() < batch.seqs.size()) plans_.resize(batch.seqs.size());
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const ScheduledSeq& s = batch.seqs[i];
    const Sequence& seq = *s.seq;
    const Request& req = request_of(seq);
    SeqPlan& plan = plans_[i];
    plan.draws.clear();
    plan.prompt_logprobs = req.params.prompt_logprobs >= 0 && !req.prompt_logprobs_complete &&
                                   seq.sample_index == 0 &&
                                   seq.num_computed_tokens < seq.num_prompt_tokens - 1
                               ? req.params.prompt_logprobs
                               : -1;
    if (!s.samples_next_token) continue;
    const bool all = !req.forked && req.params.n > 1;
    const std::span<const int32_t> tokens(seq.token_ids);
    for (int32_t k = 0; k < (all ? req.params.n : 1); ++k) {
      SampleRow r;
      r.params = &req.draw_params();
      r.seed = req.seed;
      r.sample_index = all ? k : seq.sample_index;
      r.step = seq.num_generated_tokens();
      r.prompt_ids = tokens.first(seq.num_prompt_tokens);
      r.output_ids = tokens.subspan(seq.num_prompt_tokens);
      // The n first draws of a request all start where its first sample is.
      if (req.constraint) {
        r.allowed = constraints_.mask(req, *req.samples.at(all ? 0 : seq.sample_index));
      }
      plan.draws.push_back(r);
    }
  }
  return std::span<const SeqPlan>(plans_).first(batch.seqs.size());
}

Sequence* OutputProcessor::find_sequence(uint64_t seq_id) const {
  const auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

int32_t OutputProcessor::max_proposals(const Sequence& seq) const {
  const Request& req = request_of(seq);
  if (!req.params.speculative || req.beam || req.constraint || (!req.forked && req.params.n > 1) ||
      (req.params.prompt_logprobs >= 0 && !req.prompt_logprobs_complete)) {
    return 0;
  }
  if (req.samples.at(seq.sample_index)->finished) return 0;
  // k proposals emit up to k + 1 tokens and feed positions up to
  // num_tokens + k - 1.
  const int32_t left = std::min(req.params.max_tokens - seq.num_generated_tokens() - 1,
                                max_model_len_ - seq.num_tokens());
  return std::max(left, 0);
}

void OutputProcessor::record_ran(const ScheduledSeq& s, SeqOutcome* outcome,
                                 Clock::time_point step_start) {
  Sequence& seq = *s.seq;
  Request& req = request_of(seq);
  if (!req.has_run) {
    req.has_run = true;
    req.first_run_time = step_start;
  }
  if (seq.num_computed_tokens < seq.num_prompt_tokens) {  // a prompt chunk
    // Its first chunk since admission starts right after the cached prefix.
    if (seq.num_cached_tokens > 0 && seq.num_computed_tokens == seq.num_cached_tokens) {
      req.num_cached_prompt_tokens += seq.num_cached_tokens;
    }
    req.num_prefill_tokens +=
        std::min(s.num_new_tokens, seq.num_prompt_tokens - seq.num_computed_tokens);
  }
  if (outcome->prompt_logprobs.empty()) return;
  const int32_t c0 = seq.num_computed_tokens;
  for (size_t r = 0; r < outcome->prompt_logprobs.size(); ++r) {
    req.prompt_logprobs.at(static_cast<size_t>(c0) + r) = std::move(outcome->prompt_logprobs[r]);
  }
  if (c0 + static_cast<int32_t>(outcome->prompt_logprobs.size()) == seq.num_prompt_tokens - 1) {
    req.prompt_logprobs_complete = true;
    seq.skip_prefix_cache = false;  // a recompute after a preemption may use the cache again
    seq.max_chunk_tokens = 0;
  }
}

void OutputProcessor::process(const ScheduledBatch& batch, std::span<const SeqPlan> plans,
                              std::span<const SeqOutcome> outcomes, std::vector<Output>* events) {
  // Beam requests take their step after the batch: their beams may be
  // anywhere in it.
  std::vector<Request*> beam_requests;
  std::vector<std::string> beam_errors;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    Sequence* seq = batch.seqs[i].seq;
    const SeqOutcome& outcome = outcomes[i];
    Request& req = request_of(*seq);
    if (req.beam) {
      const auto at = std::find(beam_requests.begin(), beam_requests.end(), &req);
      const size_t k = static_cast<size_t>(at - beam_requests.begin());
      if (at == beam_requests.end()) {
        beam_requests.push_back(&req);
        beam_errors.emplace_back();
      }
      if (!outcome.status.ok()) {
        if (beam_errors[k].empty()) beam_errors[k] = outcome.status.message();
      } else if (!plans[i].draws.empty()) {
        Beams::note_draw(&req, seq, outcome.samples.at(0));
      }
      continue;
    }
    if (!outcome.status.ok()) {
      finish(seq, FinishReason::kError, nullptr, outcome.status.message(), events);
      continue;
    }
    if (plans[i].draws.empty()) continue;
    std::vector<Sequence*> group{seq};
    if (plans[i].draws.size() > 1) {
      fork_samples(seq, &group);
    } else {
      req.forked = true;
    }
    if (outcome.speculated) {
      // Speculative decoding: the proposals that stood, then the token
      // after them, until one of them ends the sample.
      for (const SampleResult& r : outcome.samples) {
        if (seq->status != SequenceStatus::kRunning) break;
        append(seq, r, events);
      }
      continue;
    }
    PVLLM_CHECK(group.size() == outcome.samples.size(), "one draw per sample");
    for (size_t k = 0; k < group.size(); ++k) append(group[k], outcome.samples[k], events);
  }
  for (size_t i = 0; i < beam_requests.size(); ++i) {
    beams_.advance(beam_requests[i], beam_errors[i], events);
  }
}

void OutputProcessor::fail_lost(uint64_t seq_id, const std::string& why,
                                std::vector<Output>* events) {
  const auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return;  // ended already
  Sequence* seq = it->second.get();
  Request& req = request_of(*seq);
  if (req.beam) {
    if (!req.beam->seqs.empty()) beams_.end(&req, FinishReason::kError, why, events);
    return;
  }
  if (!req.samples.at(seq->sample_index)->finished) {
    finish(seq, FinishReason::kError, nullptr, why, events);
  }
}

// The request's prompt logprobs ride on its first event of this step, once
// they are complete (the prompt's last chunk ran in this step or before).
void OutputProcessor::attach_prompt_logprobs(std::vector<Output>* events) {
  for (Output& ev : *events) {
    const auto it = requests_.find(ev.request_id);
    if (it == requests_.end()) continue;
    Request& req = *it->second;
    if (!req.prompt_logprobs_complete || req.prompt_logprobs_sent) continue;
    ev.prompt_logprobs = std::move(req.prompt_logprobs);
    req.prompt_logprobs_sent = true;
  }
}

void OutputProcessor::forget_finished() {
  for (uint64_t id : finished_) requests_.erase(id);
  finished_.clear();
}

// A new sequence continuing `parent`, forked by the scheduler: it shares the
// parent's blocks, or gets copies in the next batch, or waits to be
// recomputed when the pool has no room.
Sequence* OutputProcessor::fork(Sequence* parent) {
  auto child = std::make_unique<Sequence>();
  child->seq_id = next_seq_id_++;
  child->request_id = parent->request_id;
  child->priority = parent->priority;
  child->arrival_order = parent->arrival_order;
  child->group = parent->group;
  child->token_ids = parent->token_ids;
  child->num_prompt_tokens = parent->num_prompt_tokens;
  child->num_computed_tokens = parent->num_computed_tokens;
  Sequence* raw = child.get();
  sequences_[child->seq_id] = std::move(child);
  scheduler_->fork(*parent, raw);
  return raw;
}

void OutputProcessor::retire(Sequence* seq) {
  scheduler_->finish(seq);
  sequences_.erase(seq->seq_id);
}

// Creates the n - 1 siblings of a request's first sequence right before its
// first token is appended.
void OutputProcessor::fork_samples(Sequence* parent, std::vector<Sequence*>* group) {
  Request& req = request_of(*parent);
  req.forked = true;
  parent->num_seats = 1;
  for (int32_t k = 1; k < req.params.n; ++k) {
    Sequence* child = fork(parent);
    child->sample_index = k;
    req.samples.push_back(new_sample(req, child));
    group->push_back(child);
  }
}

}  // namespace pvllm
