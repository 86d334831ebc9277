// Requests and their samples inside the engine: the draws a step makes for
// them, the forking of n samples, and turning drawn tokens into output
// events (stop checks, detokenizing, held-back text) until each finishes.
#include <algorithm>
#include <string>
#include <utility>

#include "core/base/check.h"
#include "core/engine/engine.h"
#include "core/engine/request.h"

namespace pvllm {

namespace {

// Bytes of `text` from `from` that may be released when `hold` trailing
// bytes must stay back, never cutting a UTF-8 character.
size_t releasable_end(const std::string& text, size_t from, size_t hold) {
  if (text.size() <= from + hold) return from;
  size_t end = text.size() - hold;
  while (end > from && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

}  // namespace

// What a sample's detokenizer is primed with: -1 (no prompt) when there is
// no tokenizer (random-weights models), since it then never reads one.
int32_t Engine::last_prompt_token(const Request& req) const {
  return tokenizer_ ? req.prompt_ids.back() : -1;
}

// What a sequence's draws follow: the request's params, or for beam search
// a greedy draw that asks for the 2W best tokens.
const SamplingParams& Engine::draw_params(const Request& req) const {
  return req.beam ? req.beam_draw_params : req.params;
}

// Whether `seq` draws every sample of its request this step: the first
// token of a request with n > 1 is drawn n times from its last prompt row,
// and the siblings are forked right after.
bool Engine::draws_all_samples(const Sequence& seq) const {
  const Request& req = *requests_.at(seq.request_id);
  return !req.forked && req.params.n > 1;
}

// The draws of `seqs`, in batch order: n for a request's first token, one for
// every other sequence that samples. A sequence's draws read its logits row.
void Engine::plan_draws(std::span<const ScheduledSeq> seqs, std::vector<SampleRow>* rows) {
  rows->clear();
  draw_masks_.clear();
  int32_t logits_index = 0;
  for (const ScheduledSeq& s : seqs) {
    if (!s.samples_next_token) continue;
    const Sequence& seq = *s.seq;
    const Request& req = *requests_.at(seq.request_id);
    const bool all = draws_all_samples(seq);
    const std::span<const int32_t> tokens(seq.token_ids);
    for (int32_t k = 0; k < (all ? req.params.n : 1); ++k) {
      SampleRow r;
      r.logits_index = logits_index;
      r.params = &draw_params(req);
      r.seed = req.seed;
      r.sample_index = all ? k : seq.sample_index;
      r.step = seq.num_generated_tokens();
      r.prompt_ids = tokens.first(seq.num_prompt_tokens);
      r.output_ids = tokens.subspan(seq.num_prompt_tokens);
      // The n first draws of a request all start where its first sample is.
      if (req.constraint) r.allowed = draw_mask(req, *req.samples.at(all ? 0 : seq.sample_index));
      rows->push_back(r);
    }
    ++logits_index;
  }
}

// A new sequence continuing `parent`: its blocks shared copy-on-write
// (paged) or copied into a run of its own (contiguous), running at once.
// Without a run (or when the copy fails) it waits and is recomputed from
// its tokens like a preempted sequence. Copies run now: the parent's K/V is
// computed and nothing writes it before the next step.
Sequence* Engine::fork_sequence(Sequence* parent) {
  auto child = std::make_unique<Sequence>();
  child->seq_id = next_seq_id_++;
  child->request_id = parent->request_id;
  child->priority = parent->priority;
  child->arrival_order = parent->arrival_order;
  child->group = parent->group;
  child->token_ids = parent->token_ids;
  child->num_prompt_tokens = parent->num_prompt_tokens;
  child->num_computed_tokens = parent->num_computed_tokens;
  std::vector<BlockCopy> copies;
  bool forked = kv_cache_->fork(parent->block_table, parent->num_computed_tokens,
                                &child->block_table, &copies);
  if (forked && !copies.empty() && !backend_->copy_blocks(copies).ok()) {
    kv_cache_->free(&child->block_table);
    forked = false;
  }
  if (forked) {
    scheduler_->add_running(child.get());
  } else {
    scheduler_->add(child.get());
  }
  Sequence* raw = child.get();
  sequences_[child->seq_id] = std::move(child);
  return raw;
}

// Creates the n - 1 siblings of a request's first sequence, sharing its
// blocks copy-on-write, right before its first token is sampled.
void Engine::fork_samples(Sequence* parent, std::vector<Sequence*>* children) {
  Request& req = *requests_.at(parent->request_id);
  req.forked = true;
  parent->num_seats = 1;
  for (int32_t k = 1; k < req.params.n; ++k) {
    Sequence* child = fork_sequence(parent);
    child->sample_index = k;
    auto state = std::make_unique<SampleState>(tokenizer_.get(), last_prompt_token(req));
    state->seq = child;
    start_matcher(req, state.get());
    req.samples.push_back(std::move(state));
    children->push_back(child);
  }
}

// One drawn token: a stop token ends the sample unreported; otherwise it is
// appended and detokenized, and a stop string, max_tokens or the context
// may end the sample. Text that could still grow into a stop string is held
// back.
void Engine::append_token(Sequence* seq, const SampleResult& r, std::vector<Output>* events) {
  Request& req = *requests_.at(seq->request_id);
  SampleState& state = *req.samples.at(seq->sample_index);
  Output ev;
  ev.request_id = req.id;
  ev.sample_index = seq->sample_index;

  const bool stop_token =
      std::find(req.stop_ids.begin(), req.stop_ids.end(), r.token_id) != req.stop_ids.end();
  if (state.matcher && !stop_token && !state.matcher->accept(r.token_id)) {
    const std::string why =
        state.matcher->failed() ? state.matcher->error()
        : r.token_id < 0
            ? "no token of the vocabulary continues the output constraint"
            : "token " + std::to_string(r.token_id) + " does not continue the output constraint";
    finish_sequence(seq, FinishReason::kError, nullptr, why, events);
    return;
  }
  FinishReason finish = FinishReason::kNone;
  if (stop_token) {
    finish = FinishReason::kStop;  // the stop token itself is not reported
  } else {
    seq->token_ids.push_back(r.token_id);
    ev.token_ids.push_back(r.token_id);
    note_token(&req);
    if (req.params.logprobs >= 0) {
      ev.logprobs.push_back(OutputLogprobs{r.token_id, r.logprob, r.top_logprobs});
    }
    if (tokenizer_) state.text += state.detok.push(r.token_id);
    // A stop string ends the text right before it.
    for (const std::string& stop : req.params.stop) {
      const size_t from = state.num_text_sent > stop.size() ? state.num_text_sent - stop.size() : 0;
      const size_t at = state.text.find(stop, from);
      if (at != std::string::npos) {
        state.text.resize(at);
        finish = FinishReason::kStop;
      }
    }
    // A constraint that nothing may follow ends the text.
    if (finish == FinishReason::kNone && state.matcher && state.matcher->must_end()) {
      finish = FinishReason::kStop;
    }
    if (finish == FinishReason::kNone) {
      if (seq->num_generated_tokens() >= req.params.max_tokens ||
          seq->num_tokens() > max_model_len_) {
        finish = FinishReason::kLength;
      }
    }
  }

  const bool stopped_by_string = finish == FinishReason::kStop && !stop_token;
  if (finish != FinishReason::kNone) {
    if (tokenizer_ && !stopped_by_string) state.text += state.detok.flush();
    ev.text = state.text.substr(std::min(state.num_text_sent, state.text.size()));
    state.num_text_sent = state.text.size();
    finish_sequence(seq, finish, &ev, "", events);
    return;
  }
  const size_t hold = req.max_stop_len > 0 ? req.max_stop_len - 1 : 0;
  const size_t end = releasable_end(state.text, state.num_text_sent, hold);
  ev.text = state.text.substr(state.num_text_sent, end - state.num_text_sent);
  state.num_text_sent = end;
  events->push_back(std::move(ev));
}

// A token for `req` in the current step: counts it, and its step once.
void Engine::note_token(Request* req) {
  ++req->num_generated_tokens;
  note_token_step(req);
}

// The current step made tokens for `req`: its first and latest token times.
void Engine::note_token_step(Request* req) {
  if (req->num_token_steps > 0 && req->last_token_time == step_time_) return;
  if (req->num_token_steps == 0) req->first_token_time = step_time_;
  req->last_token_time = step_time_;
  ++req->num_token_steps;
}

RequestMetrics Engine::metrics_of(const Request& req) const {
  using Seconds = std::chrono::duration<double>;
  RequestMetrics m;
  m.e2e_latency = Seconds(step_time_ - req.submit_time).count();
  if (req.has_run) m.time_queued = Seconds(req.first_run_time - req.submit_time).count();
  if (req.num_token_steps > 0) {
    m.time_to_first_token = Seconds(req.first_token_time - req.submit_time).count();
  }
  if (req.num_token_steps > 1) {
    m.time_per_output_token = Seconds(req.last_token_time - req.first_token_time).count() /
                              static_cast<double>(req.num_token_steps - 1);
  }
  m.num_prompt_tokens = static_cast<int64_t>(req.prompt_ids.size());
  m.num_prefill_tokens = req.num_prefill_tokens;
  m.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
  m.num_generated_tokens = req.num_generated_tokens;
  return m;
}

void Engine::finish_sequence(Sequence* seq, FinishReason reason, Output* last,
                             const std::string& error, std::vector<Output>* events) {
  Request& req = *requests_.at(seq->request_id);
  SampleState& state = *req.samples.at(seq->sample_index);
  Output ev;
  if (last != nullptr) {
    ev = std::move(*last);
  } else {
    ev.request_id = req.id;
    ev.sample_index = seq->sample_index;
  }
  ev.finish_reason = reason;
  if (reason == FinishReason::kError) ev.error = error;
  events->push_back(std::move(ev));

  state.finished = true;
  state.seq = nullptr;
  scheduler_->finish(seq);
  sequences_.erase(seq->seq_id);
  ++req.num_finished;
  // A request whose first sequence ends before forking has n samples that
  // never started: each still gets its one final event.
  if (!req.forked && req.params.n > 1) {
    req.forked = true;
    for (int32_t k = 1; k < req.params.n; ++k) {
      Output sib;
      sib.request_id = req.id;
      sib.sample_index = k;
      sib.finish_reason = reason;
      if (reason == FinishReason::kError) sib.error = error;
      events->push_back(std::move(sib));
      ++req.num_finished;
    }
  }
  if (req.num_finished >= req.params.n) {
    events->back().request_finished = true;  // the request's last event, pushed just above
    events->back().metrics = metrics_of(req);
    finished_requests_.push_back(req.id);
  }
}

}  // namespace pvllm
