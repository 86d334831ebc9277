// Beam search in the engine: a request with beam_width W keeps its live
// beams as sequences. Each step every live beam draws its 2W most likely
// next tokens (a greedy draw asking for 2W logprobs); once all have drawn,
// core/sample/beam_search.h picks the next live beams, and the engine
// mirrors the choice: a beam chosen k times is forked k - 1 times (its
// blocks shared copy-on-write), a beam not chosen is freed, and each
// chosen beam appends its token. Beams advance together: one that was
// preempted recomputes and draws later while the others wait, holding
// their blocks. The request's events come at the end: its best n
// hypotheses as samples 0..n-1, each in one event.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/base/check.h"
#include "core/engine/engine.h"
#include "core/engine/request.h"

namespace pvllm {

namespace {

int64_t beam_max_tokens(const SamplingParams& p, size_t prompt_len, int32_t max_model_len) {
  // The context ends a beam as it ends a sample (append_token): after the
  // token that makes the sequence longer than max_model_len.
  return std::min<int64_t>(p.max_tokens,
                           int64_t{max_model_len} - static_cast<int64_t>(prompt_len) + 1);
}

}  // namespace

// What the engine needs besides valid params: the paged allocator (beams
// share blocks), seats for every beam, and a pool that holds every beam at
// its longest without sharing, so the beams can always all be in at once
// (the scheduler admits them together).
Status Engine::check_beam_search(const SamplingParams& p, size_t prompt_len) const {
  if (p.beam_width == 0) return Status::Ok();
  if (config_.kv_allocator != KvAllocator::kPaged) {
    return Unsupported("beam search needs the paged KV allocator (its beams share blocks)");
  }
  if (p.beam_width > config_.max_num_seqs) {
    return InvalidArgument("sampling params: beam_width " + std::to_string(p.beam_width) +
                           " exceeds max_num_seqs " + std::to_string(config_.max_num_seqs));
  }
  const int64_t bs = kv_cache_->block_size();
  const int64_t longest =
      static_cast<int64_t>(prompt_len) + beam_max_tokens(p, prompt_len, max_model_len_);
  const int64_t need = p.beam_width * ((longest + bs - 1) / bs);
  if (need > kv_cache_->num_blocks()) {
    return InvalidArgument("sampling params: beam_width " + std::to_string(p.beam_width) +
                           " with beams of up to " + std::to_string(longest) + " tokens needs " +
                           std::to_string(need) + " KV blocks, more than the pool's " +
                           std::to_string(kv_cache_->num_blocks()) +
                           " (fewer beams, fewer max_tokens or a larger KV budget)");
  }
  return Status::Ok();
}

void Engine::start_beam_search(Request* req, Sequence* seq) {
  const SamplingParams& p = req->params;
  BeamConfig bc;
  bc.width = p.beam_width;
  bc.length_penalty = p.length_penalty;
  bc.early_stopping = p.early_stopping;
  bc.max_tokens = static_cast<int32_t>(beam_max_tokens(p, req->prompt_ids.size(), max_model_len_));
  req->beam = std::make_unique<BeamSearch>(bc);
  req->beam_seqs = {seq};
  req->beam_draws.assign(1, std::nullopt);
  req->beam_draw_params = SamplingParams{};
  req->beam_draw_params.temperature = 0.0f;
  req->beam_draw_params.logprobs = 2 * p.beam_width;
  req->forked = true;  // no n-sample fork: beams fork themselves
  seq->num_seats = p.beam_width;
  seq->group = req->id;
}

// The draws of beams that ran in this step; a failure of any beam ends the
// request (after the batch has been gone through: its beams may still be
// further down the batch).
void Engine::note_beam_draw(Sequence* seq, const SampleResult& draw) {
  Request& req = *requests_.at(seq->request_id);
  const auto it = std::find(req.beam_seqs.begin(), req.beam_seqs.end(), seq);
  PVLLM_CHECK(it != req.beam_seqs.end(), "a draw for a sequence that is no live beam");
  req.beam_draws[static_cast<size_t>(it - req.beam_seqs.begin())] = draw;
}

// After the batch: each beam request whose beams have all drawn takes its
// beam step; one whose beam failed ends with kError.
void Engine::advance_beams(const std::vector<uint64_t>& request_ids,
                           const std::vector<std::string>& errors, std::vector<Output>* events) {
  for (size_t i = 0; i < request_ids.size(); ++i) {
    auto it = requests_.find(request_ids[i]);
    if (it == requests_.end()) continue;  // already ended this step
    Request& req = *it->second;
    if (!errors[i].empty()) {
      end_beam_search(&req, FinishReason::kError, errors[i], events);
      continue;
    }
    const bool all_drawn = std::all_of(req.beam_draws.begin(), req.beam_draws.end(),
                                       [](const auto& d) { return d.has_value(); });
    if (all_drawn) beam_step(&req, events);
  }
}

void Engine::beam_step(Request* req, std::vector<Output>* events) {
  const size_t width = static_cast<size_t>(req->params.beam_width);
  std::vector<std::vector<TokenLogprob>> tops;
  for (const auto& d : req->beam_draws) {
    std::vector<TokenLogprob> top = d->top_logprobs;
    if (top.size() > 2 * width) top.resize(2 * width);
    tops.push_back(std::move(top));
  }
  note_token_step(req);
  const std::vector<BeamChoice> choices = req->beam->step(tops, [req](int32_t token) {
    return std::find(req->stop_ids.begin(), req->stop_ids.end(), token) != req->stop_ids.end();
  });
  if (choices.empty() || req->beam->length() >= req->beam->max_tokens()) {
    end_beam_search(req, FinishReason::kNone, "", events);
    return;
  }
  // Mirror the choices: forks first (from the parents' state before their
  // own tokens), then every chosen beam appends its token.
  std::vector<Sequence*> next(choices.size(), nullptr);
  std::vector<bool> kept(req->beam_seqs.size(), false);
  for (size_t j = 0; j < choices.size(); ++j) {
    Sequence* parent = req->beam_seqs[static_cast<size_t>(choices[j].parent)];
    if (!kept[static_cast<size_t>(choices[j].parent)]) {
      kept[static_cast<size_t>(choices[j].parent)] = true;
      next[j] = parent;
    } else {
      next[j] = fork_sequence(parent);
    }
  }
  for (size_t b = 0; b < req->beam_seqs.size(); ++b) {
    if (!kept[b]) retire_sequence(req->beam_seqs[b]);
  }
  for (size_t j = 0; j < choices.size(); ++j) {
    next[j]->num_seats = 1;
    next[j]->token_ids.push_back(choices[j].token);
  }
  req->beam_seqs = std::move(next);
  req->beam_draws.assign(req->beam_seqs.size(), std::nullopt);
}

// Ends a beam request: with kNone, the search's best n hypotheses become
// its samples (kStop when a stop token ended one, else kLength); with
// another reason (abort, error), each sample ends with it and no tokens.
void Engine::end_beam_search(Request* req, FinishReason reason, const std::string& error,
                             std::vector<Output>* events) {
  for (Sequence* seq : req->beam_seqs) retire_sequence(seq);
  req->beam_seqs.clear();
  req->beam_draws.clear();
  std::vector<BeamHypothesis> best;
  if (reason == FinishReason::kNone) best = req->beam->finish(req->params.n);
  for (int32_t i = 0; i < req->params.n; ++i) {
    Output ev;
    ev.request_id = req->id;
    ev.sample_index = i;
    ev.finish_reason = reason;
    if (reason == FinishReason::kError) ev.error = error;
    if (static_cast<size_t>(i) < best.size()) {
      const BeamHypothesis& h = best[static_cast<size_t>(i)];
      ev.finish_reason = h.stopped ? FinishReason::kStop : FinishReason::kLength;
      ev.token_ids = h.tokens;
      ev.score = h.score;
      if (tokenizer_) {
        IncrementalDetokenizer detok(tokenizer_.get(), last_prompt_token(*req));
        for (int32_t t : h.tokens) ev.text += detok.push(t);
        ev.text += detok.flush();
      }
      if (req->params.logprobs >= 0) {
        for (size_t t = 0; t < h.tokens.size(); ++t) {
          ev.logprobs.push_back(OutputLogprobs{h.tokens[t], h.logprobs[t], {}});
        }
      }
      req->num_generated_tokens += static_cast<int64_t>(h.tokens.size());
    } else if (reason == FinishReason::kNone) {
      ev.finish_reason = FinishReason::kLength;  // fewer hypotheses than n: none for this one
    }
    events->push_back(std::move(ev));
  }
  req->num_finished = req->params.n;
  for (auto& s : req->samples) s->finished = true;
  events->back().request_finished = true;
  events->back().metrics = metrics_of(*req);
  finished_requests_.push_back(req->id);
}

// Takes a sequence out for good: the scheduler frees its blocks and the
// engine forgets it.
void Engine::retire_sequence(Sequence* seq) {
  scheduler_->finish(seq);
  sequences_.erase(seq->seq_id);
}

}  // namespace pvllm
