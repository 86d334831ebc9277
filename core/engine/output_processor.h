// OutputProcessor: the engine's requests after submit. It owns their
// records and sequences, plans each step's draws (how many each scheduled
// sequence makes, decided once), and turns what the model runner drew into
// output events: the n-sample fork, appending tokens, detokenizing, stop
// strings, finishing, per-request metrics, prompt logprobs. Beam search and
// structured output are parts it owns (beams.h, constraints.h).
//
// Only the engine's step thread calls it, except constraints().compile.
// It holds no backend: tests drive it with a scheduler and made-up draws.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/engine/beams.h"
#include "core/engine/constraints.h"
#include "core/engine/output.h"
#include "core/engine/request.h"
#include "core/engine/step_plan.h"
#include "core/sched/scheduler.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm {

class OutputProcessor final : private Beams::Host {
 public:
  using Clock = std::chrono::steady_clock;

  // `tokenizer` may be null (token ids only); `scheduler` outlives this.
  OutputProcessor(const Tokenizer* tokenizer, int32_t vocab_size, int32_t max_model_len,
                  Scheduler* scheduler);
  ~OutputProcessor();

  Constraints& constraints() { return constraints_; }

  // Takes a submitted request: its first sequence goes to the scheduler.
  void add(std::unique_ptr<Request> req);
  // Ends the samples of request `id` that have not finished with kAbort;
  // nothing when it is not here (finished in the meantime).
  void abort(uint64_t id, std::vector<Output>* events);

  // A step, in order:
  // The end of the step's forward pass: its tokens' time.
  void set_step_time(Clock::time_point t) { step_time_ = t; }
  // The plan of each of `batch`'s sequences: entry i for batch.seqs[i],
  // valid until the next plan().
  std::span<const SeqPlan> plan(const ScheduledBatch& batch);
  // For each sequence that ran, before the scheduler advances it: its
  // request's timing and counts, and the prompt logprobs it computed.
  void record_ran(const ScheduledSeq& s, SeqOutcome* outcome, Clock::time_point step_start);
  // After the scheduler advanced what ran: ends the sequences whose batch
  // failed with kError, forks the first tokens of n > 1 requests, appends
  // every draw, and takes the beam steps.
  void process(const ScheduledBatch& batch, std::span<const SeqPlan> plans,
               std::span<const SeqOutcome> outcomes, std::vector<Output>* events);
  // Ends sequence `seq_id`, whose K/V was lost outside its batch (a failed
  // swap-out or fork copy), with kError (a beam ends its whole search);
  // nothing when it has ended already.
  void fail_lost(uint64_t seq_id, const std::string& why, std::vector<Output>* events);
  // Gives each request's complete prompt logprobs to its first event here.
  void attach_prompt_logprobs(std::vector<Output>* events);
  // Requests whose last event this step made, in order.
  const std::vector<uint64_t>& finished_requests() const { return finished_; }
  // Forgets them (after their events are published).
  void forget_finished();

  size_t num_requests() const { return requests_.size(); }

  // Speculative decoding: how many proposals `seq` (about to decode) may
  // take: 0 for a request that keeps out of it or cannot have it (beam
  // search, a constraint, the draw that forks n samples, prompt logprobs
  // still owed), else what max_tokens and the model's length leave after
  // the token that follows them.
  int32_t max_proposals(const Sequence& seq) const;
  // The live sequence `seq_id`, or null once it has ended (process() may
  // end and free sequences of the batch it processes).
  Sequence* find_sequence(uint64_t seq_id) const;

 private:
  // Beams::Host.
  Sequence* fork(Sequence* parent) override;
  void retire(Sequence* seq) override;
  void note_token_step(Request* req) override;
  void finish_request(Request* req, std::vector<Output>* events) override;

  Request& request_of(const Sequence& seq) const { return *requests_.at(seq.request_id); }
  std::unique_ptr<SampleState> new_sample(const Request& req, Sequence* seq) const;
  void fork_samples(Sequence* parent, std::vector<Sequence*>* group);
  void append(Sequence* seq, const SampleResult& r, std::vector<Output>* events);
  // Ends one sample: its final event (`last`, when this step produced one,
  // else an empty one) carries the reason (and `error` with kError); frees
  // its blocks.
  void finish(Sequence* seq, FinishReason reason, Output* last, const std::string& error,
              std::vector<Output>* events);
  RequestMetrics metrics_of(const Request& req) const;

  const Tokenizer* const tokenizer_;
  const int32_t vocab_size_;
  const int32_t max_model_len_;
  Scheduler* const scheduler_;
  Constraints constraints_;
  Beams beams_;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;
  uint64_t next_seq_id_ = 1;
  std::vector<uint64_t> finished_;  // this step's
  std::vector<SeqPlan> plans_;      // this step's; never shrunk, so draws keep their capacity
  Clock::time_point step_time_;
};

}  // namespace pvllm
