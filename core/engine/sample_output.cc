// The OutputProcessor's samples: a drawn token becomes an output event
// (stop checks, detokenizing, held-back text) until the sample finishes,
// and a request's last event carries its metrics.
#include <algorithm>
#include <string>
#include <utility>

#include "core/engine/output_processor.h"

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

// One drawn token: a stop token ends the sample unreported; otherwise it is
// appended and detokenized, and a stop string, max_tokens or the context
// may end the sample. Text that could still grow into a stop string is held
// back.
void OutputProcessor::append(Sequence* seq, const SampleResult& r, std::vector<Output>* events) {
  Request& req = request_of(*seq);
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
    finish(seq, FinishReason::kError, nullptr, why, events);
    return;
  }
  FinishReason reason = FinishReason::kNone;
  if (stop_token) {
    reason = FinishReason::kStop;  // the stop token itself is not reported
  } else {
    seq->token_ids.push_back(r.token_id);
    ev.token_ids.push_back(r.token_id);
    ++req.num_generated_tokens;
    note_token_step(&req);
    if (req.params.logprobs >= 0) {
      ev.logprobs.push_back(OutputLogprobs{r.token_id, r.logprob, r.top_logprobs});
    }
    if (tokenizer_ != nullptr) state.text += state.detok.push(r.token_id);
    // A stop string ends the text right before it.
    for (const std::string& stop : req.params.stop) {
      const size_t from = state.num_text_sent > stop.size() ? state.num_text_sent - stop.size() : 0;
      const size_t at = state.text.find(stop, from);
      if (at != std::string::npos) {
        state.text.resize(at);
        reason = FinishReason::kStop;
      }
    }
    // A constraint that nothing may follow ends the text.
    if (reason == FinishReason::kNone && state.matcher && state.matcher->must_end()) {
      reason = FinishReason::kStop;
    }
    if (reason == FinishReason::kNone) {
      if (seq->num_generated_tokens() >= req.params.max_tokens ||
          seq->num_tokens() > max_model_len_) {
        reason = FinishReason::kLength;
      }
    }
  }

  const bool stopped_by_string = reason == FinishReason::kStop && !stop_token;
  if (reason != FinishReason::kNone) {
    if (tokenizer_ != nullptr && !stopped_by_string) state.text += state.detok.flush();
    ev.text = state.text.substr(std::min(state.num_text_sent, state.text.size()));
    state.num_text_sent = state.text.size();
    finish(seq, reason, &ev, "", events);
    return;
  }
  const size_t hold = req.max_stop_len > 0 ? req.max_stop_len - 1 : 0;
  const size_t end = releasable_end(state.text, state.num_text_sent, hold);
  ev.text = state.text.substr(state.num_text_sent, end - state.num_text_sent);
  state.num_text_sent = end;
  events->push_back(std::move(ev));
}

void OutputProcessor::note_token_step(Request* req) {
  if (req->num_token_steps > 0 && req->last_token_time == step_time_) return;
  if (req->num_token_steps == 0) req->first_token_time = step_time_;
  req->last_token_time = step_time_;
  ++req->num_token_steps;
}

RequestMetrics OutputProcessor::metrics_of(const Request& req) const {
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

void OutputProcessor::finish_request(Request* req, std::vector<Output>* events) {
  events->back().request_finished = true;
  events->back().metrics = metrics_of(*req);
  finished_.push_back(req->id);
}

void OutputProcessor::finish(Sequence* seq, FinishReason reason, Output* last,
                             const std::string& error, std::vector<Output>* events) {
  Request& req = request_of(*seq);
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
  retire(seq);
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
  if (req.num_finished >= req.params.n) finish_request(&req, events);
}

}  // namespace pvllm
