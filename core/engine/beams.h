// Beam search, a part of the OutputProcessor: a request with beam_width W
// keeps its live beams as sequences. Each step every live beam draws its 2W
// most likely next tokens (a greedy draw asking for 2W logprobs); once all
// have drawn, core/sample/beam_search.h picks the next live beams, and the
// processor mirrors the choice: a beam chosen k times is forked k - 1 times
// (its blocks shared copy-on-write), a beam not chosen is retired, and each
// chosen beam appends its token. Beams advance together: one that was
// preempted recomputes and draws later while the others wait, holding
// their blocks. The request's events come at the end: its best n
// hypotheses as samples 0..n-1, each in one event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/engine/output.h"
#include "core/engine/request.h"
#include "core/kv/kv_cache_manager.h"

namespace pvllm {

// What a beam request needs of the engine, checked at submit.
struct BeamLimits {
  KvAllocator kv_allocator = KvAllocator::kPaged;
  int32_t max_num_seqs = 0;
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  int32_t max_model_len = 0;
};

// Ok for params without beam search; otherwise what the engine needs besides
// valid params: the paged allocator (beams share blocks), seats for every
// beam, and a pool that holds every beam at its longest without sharing, so
// the beams can always all be in at once (the scheduler admits them
// together).
Status check_beam_search(const SamplingParams& params, size_t prompt_len, const BeamLimits& limits);

class Beams {
 public:
  // What beams need of the processor that owns them.
  class Host {
   public:
    // A new running sequence continuing `parent` (core/sched/scheduler.h's
    // fork).
    virtual Sequence* fork(Sequence* parent) = 0;
    // Takes a sequence out for good: out of the scheduler, forgotten.
    virtual void retire(Sequence* seq) = 0;
    // The current step made tokens for `req`.
    virtual void note_token_step(Request* req) = 0;
    // `events->back()` is the request's last event: gives it its metrics and
    // marks the request finished.
    virtual void finish_request(Request* req, std::vector<Output>* events) = 0;

   protected:
    ~Host() = default;
  };

  Beams(Host* host, const Tokenizer* tokenizer, int32_t max_model_len)
      : host_(host), tokenizer_(tokenizer), max_model_len_(max_model_len) {}

  // Makes `seq` (the request's first sequence) its first beam.
  void start(Request* req, Sequence* seq) const;
  // The draw of a beam that ran in this step.
  static void note_draw(Request* req, Sequence* seq, const SampleResult& draw);
  // After the batch: the request takes its beam step once all its beams
  // have drawn; with a non-empty `error` (one of its beams failed) it ends
  // with kError.
  void advance(Request* req, const std::string& error, std::vector<Output>* events);
  // Ends the search: with kNone, its best n hypotheses become the request's
  // samples (kStop when a stop token ended one, else kLength); with another
  // reason (abort, error), each sample ends with it and no tokens.
  void end(Request* req, FinishReason reason, const std::string& error,
           std::vector<Output>* events);

 private:
  void step(Request* req, std::vector<Output>* events);

  Host* const host_;
  const Tokenizer* const tokenizer_;
  const int32_t max_model_len_;
};

}  // namespace pvllm
