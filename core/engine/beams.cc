#include "core/engine/beams.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/base/check.h"

namespace pvllm {

namespace {

int64_t beam_max_tokens(const SamplingParams& p, size_t prompt_len, int32_t max_model_len) {
  // The context ends a beam as it ends a sample (OutputProcessor::append):
  // after the token that makes the sequence longer than max_model_len.
  return std::min<int64_t>(p.max_tokens,
                           int64_t{max_model_len} - static_cast<int64_t>(prompt_len) + 1);
}

}  // namespace

Status check_beam_search(const SamplingParams& p, size_t prompt_len, const BeamLimits& limits) {
  if (p.beam_width == 0) return Status::Ok();
  if (limits.kv_allocator != KvAllocator::kPaged) {
    return Unsupported("beam search needs the paged KV allocator (its beams share blocks)");
  }
  if (p.beam_width > limits.max_num_seqs) {
    return InvalidArgument("sampling params: beam_width " + std::to_string(p.beam_width) +
                           " exceeds max_num_seqs " + std::to_string(limits.max_num_seqs));
  }
  const int64_t bs = limits.block_size;
  const int64_t longest =
      static_cast<int64_t>(prompt_len) + beam_max_tokens(p, prompt_len, limits.max_model_len);
  const int64_t need = p.beam_width * ((longest + bs - 1) / bs);
  if (need > limits.num_blocks) {
    return InvalidArgument("sampling params: beam_width " + std::to_string(p.beam_width) +
                           " with beams of up to " + std::to_string(longest) + " tokens needs " +
                           std::to_string(need) + " KV blocks, more than the pool's " +
                           std::to_string(limits.num_blocks) +
                           " (fewer beams, fewer max_tokens or a larger KV budget)");
  }
  return Status::Ok();
}

void Beams::start(Request* req, Sequence* seq) const {
  const SamplingParams& p = req->params;
  BeamConfig bc;
  bc.width = p.beam_width;
  bc.length_penalty = p.length_penalty;
  bc.early_stopping = p.early_stopping;
  bc.max_tokens = static_cast<int32_t>(beam_max_tokens(p, req->prompt_ids.size(), max_model_len_));
  req->beam = std::make_unique<BeamState>();
  BeamState& beam = *req->beam;
  beam.search = std::make_unique<BeamSearch>(bc);
  beam.seqs = {seq};
  beam.draws.assign(1, std::nullopt);
  beam.draw_params.temperature = 0.0f;
  beam.draw_params.logprobs = 2 * p.beam_width;
  req->forked = true;  // no n-sample fork: beams fork themselves
  seq->num_seats = p.beam_width;
  seq->group = req->id;
}

void Beams::note_draw(Request* req, Sequence* seq, const SampleResult& draw) {
  BeamState& beam = *req->beam;
  const auto it = std::find(beam.seqs.begin(), beam.seqs.end(), seq);
  PVLLM_CHECK(it != beam.seqs.end(), "a draw for a sequence that is no live beam");
  beam.draws[static_cast<size_t>(it - beam.seqs.begin())] = draw;
}

void Beams::advance(Request* req, const std::string& error, std::vector<Output>* events) {
  if (req->beam->seqs.empty()) return;  // already ended this step
  if (!error.empty()) {
    end(req, FinishReason::kError, error, events);
    return;
  }
  const auto& draws = req->beam->draws;
  if (std::all_of(draws.begin(), draws.end(), [](const auto& d) { return d.has_value(); })) {
    step(req, events);
  }
}

void Beams::step(Request* req, std::vector<Output>* events) {
  BeamState& beam = *req->beam;
  const size_t width = static_cast<size_t>(req->params.beam_width);
  std::vector<std::vector<TokenLogprob>> tops;
  for (const auto& d : beam.draws) {
    std::vector<TokenLogprob> top = d->top_logprobs;
    if (top.size() > 2 * width) top.resize(2 * width);
    tops.push_back(std::move(top));
  }
  host_->note_token_step(req);
  const std::vector<BeamChoice> choices = beam.search->step(tops, [req](int32_t token) {
    return std::find(req->stop_ids.begin(), req->stop_ids.end(), token) != req->stop_ids.end();
  });
  if (choices.empty() || beam.search->length() >= beam.search->max_tokens()) {
    end(req, FinishReason::kNone, "", events);
    return;
  }
  // Mirror the choices: forks first (from the parents' state before their
  // own tokens), then every chosen beam appends its token.
  std::vector<Sequence*> next(choices.size(), nullptr);
  std::vector<bool> kept(beam.seqs.size(), false);
  for (size_t j = 0; j < choices.size(); ++j) {
    const size_t parent = static_cast<size_t>(choices[j].parent);
    if (!kept[parent]) {
      kept[parent] = true;
      next[j] = beam.seqs[parent];
    } else {
      next[j] = host_->fork(beam.seqs[parent]);
    }
  }
  for (size_t b = 0; b < beam.seqs.size(); ++b) {
    if (!kept[b]) host_->retire(beam.seqs[b]);
  }
  for (size_t j = 0; j < choices.size(); ++j) {
    next[j]->num_seats = 1;
    next[j]->token_ids.push_back(choices[j].token);
  }
  beam.seqs = std::move(next);
  beam.draws.assign(beam.seqs.size(), std::nullopt);
}

void Beams::end(Request* req, FinishReason reason, const std::string& error,
                std::vector<Output>* events) {
  BeamState& beam = *req->beam;
  for (Sequence* seq : beam.seqs) host_->retire(seq);
  beam.seqs.clear();
  beam.draws.clear();
  std::vector<BeamHypothesis> best;
  if (reason == FinishReason::kNone) best = beam.search->finish(req->params.n);
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
      if (tokenizer_ != nullptr) {
        IncrementalDetokenizer detok(tokenizer_, last_prompt_token(*req, tokenizer_));
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
  host_->finish_request(req, events);
}

}  // namespace pvllm
