// Engine: the data path of DESIGN.md, as small parts with one owner each.
//
//   submit ──▶ inbox ──step()──▶ take new requests (OutputProcessor::add)
//     ──▶ schedule (Scheduler) ──▶ plan the draws (OutputProcessor::plan)
//     ──▶ run (ModelRunner: block copies and swaps, forward, draws)
//     ──▶ process (OutputProcessor: fork, append, stop, finish)
//     ──▶ publish (RequestEventQueues, stats) ──▶ poll / wait / handlers
//
// Threading: submit, poll, abort and stats take a short lock on the inbox
// and counters (the event queues have their own) and may be called from
// any thread while one thread is inside step(). step() calls are
// serialised by their own lock; the forward pass runs outside the inbox
// lock, and handlers are called after the step lock is released.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/backend_loader.h"
#include "core/base/status.h"
#include "core/engine/engine_config.h"
#include "core/engine/engine_stats.h"
#include "core/engine/model_runner.h"
#include "core/engine/output.h"
#include "core/engine/request_events.h"
#include "core/kv/kv_cache_manager.h"
#include "core/model/model.h"
#include "core/sample/sampling_params.h"
#include "core/sched/scheduler.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm {

class CreateProgress;   // core/engine/create_progress.h
class OutputProcessor;  // core/engine/output_processor.h
struct Request;         // core/engine/request.h

class Engine {
 public:
  static Status create(const EngineConfig& config, std::unique_ptr<Engine>* out);
  ~Engine();

  // Submits a prompt given as text or as token ids. Text is tokenized with
  // the special tokens the tokenizer adds (BOS) when add_special_tokens.
  // `delivery` says who takes the request's events (request_events.h).
  Status submit_text(std::string_view prompt, const SamplingParams& params, int32_t priority,
                     uint64_t* request_id, bool add_special_tokens = true,
                     OutputDelivery delivery = {});
  Status submit_tokens(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                       int32_t priority, uint64_t* request_id, OutputDelivery delivery = {});
  // Runs one scheduler iteration and publishes what it made (handlers are
  // called before it returns). Returns a non-ok status only for failures
  // of the engine itself; requests that fail end with kError outputs.
  Status step();
  // The requests' events (RequestEventQueues): up to max_events of the
  // oldest of shared requests; one request's; waiting for one; dropping
  // one's.
  void poll(std::vector<Output>* out, size_t max_events = SIZE_MAX) {
    events_.take_shared(max_events, out);
  }
  Status poll_request(uint64_t request_id, size_t max_events, std::vector<Output>* out) {
    return events_.take_request(request_id, max_events, out);
  }
  Status wait(uint64_t request_id, int32_t timeout_ms) {
    return events_.wait(request_id, timeout_ms);
  }
  Status detach(uint64_t request_id) { return events_.detach(request_id); }
  // Aborts a request in any state; NotFound if it is unknown or finished
  // (its final event made). When abort returns Ok, the request's samples
  // that had not finished end with kAbort, also when the step running at
  // the time of the call would have finished them.
  Status abort(uint64_t request_id);
  // Request ids carry the engine's serial number in their high bits (see
  // kRequestIdBits), so an id of another engine of the process is told
  // apart from an unknown one of this engine.
  // True for an id that some other engine made (its serial is not this
  // engine's, nor 0); such an id is a caller's mix-up, not an unknown id.
  bool is_other_engines_request_id(uint64_t id) const {
    const uint64_t serial = id >> kRequestIdBits;
    return serial != 0 && serial != serial_;
  }
  static constexpr int kRequestIdBits = 40;
  EngineStats stats() const;
  bool has_unfinished() const;
  // Requests submitted and not yet finished; a request counts once, whatever
  // its n (pvllm_step's out_num_unfinished).
  int32_t num_unfinished_requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int32_t>(live_request_ids_.size());
  }

  const Model& model() const { return *model_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const EngineConfig& config() const { return config_; }
  // The backend serving the engine, as it names itself ("cpu (avx2)").
  std::string backend_name() const { return backend_->name(); }
  int32_t max_model_len() const { return max_model_len_; }

 private:
  // What one step counted, for the stats.
  struct StepCounts {
    Status status;  // the first failure of the batch, if any
    int64_t num_prompt_tokens = 0;
    int64_t num_sampled = 0;
    int64_t num_kv_tokens_attended = 0;  // see EngineStats
    int64_t num_spec_drafts = 0;         // speculative decoding, see EngineStats
    int64_t num_spec_proposed = 0;
    int64_t num_spec_accepted = 0;
    int64_t spec_accepted_at[EngineStats::kSpecPositions] = {};
    std::chrono::steady_clock::time_point start;  // when the step began
    bool ran = false;                             // it ran a batch
  };

  Engine() = default;

  // A tokenizer loaded beside the rest of create (engine.cc).
  struct TokenizerLoad {
    Status status;
    std::unique_ptr<Tokenizer> tokenizer;
  };

  // create(), in order (engine.cc).
  // Loads the model and starts loading its tokenizer on another thread
  // (it needs nothing the rest of create does); `*tokenizer` is its result,
  // taken by finish_tokenizer once the backend is open.
  Status load_model_and_tokenizer(const CreateProgress& progress,
                                  std::future<TokenizerLoad>* tokenizer);
  Status finish_tokenizer(std::future<TokenizerLoad>* tokenizer);
  Status open_backend(const DeviceSpec& device, const CreateProgress& progress);
  OpenBackendOptions backend_options();
  Status open_swap_space();
  void make_scheduler();

  // After create has its tokenizer: the model runner and the output
  // processor.
  void make_request_parts();

  // step(), in order (step.cc).
  Status step_locked();
  void take_new_requests(std::vector<Output>* events);
  void record_ran(const ScheduledBatch& batch, StepCounts* counts);
  // Speculative decoding: fills seq->proposed (Scheduler::ProposeFn), and
  // after a step advances the sequences that had proposals by what stood
  // and gives back the blocks only rejected ones used.
  void propose(Sequence* seq, int32_t max);
  void settle_proposals();
  std::vector<uint64_t> lost_sequences(const ScheduledBatch& batch, std::string* why) const;
  void publish(const StepCounts& counts, std::vector<Output>* events);
  void honour_late_aborts_locked(std::vector<Output>* events);
  void update_stats_locked(const StepCounts& counts);

  EngineConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvCacheManager> kv_cache_;
  std::unique_ptr<SwapPool> swap_pool_;  // preemption by swap or auto; null otherwise
  size_t swap_block_bytes_ = 0;          // bytes one swapped block moves each way
  std::unique_ptr<Scheduler> scheduler_;
  int32_t max_model_len_ = 0;
  size_t model_weight_bytes_ = 0;  // as the memory plan counts them
  int32_t max_token_bytes_ = 1;    // the longest decoded token, for submit_text's early check
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<OutputProcessor> processor_;
  RequestEventQueues events_;

  // Only step() touches these.
  ModelRunner::Result run_;
  std::shared_ptr<Proposer> proposer_;  // null: no speculative decoding
  // This step's sequences that carried proposals, by id (process() may end
  // and free them): how many positions stood (the last input token and the
  // accepted proposals), for the scheduler after the outputs are appended.
  std::vector<std::pair<uint64_t, int32_t>> speculated_;

  // Shared with submit / poll / abort / stats.
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Request>> inbox_;
  std::vector<uint64_t> abort_inbox_;
  EngineStats stats_;
  std::unordered_set<uint64_t> live_request_ids_;  // submitted, not yet finished
  uint64_t serial_ = 0;                            // this engine's number in the process, 1..2^13-1
  uint64_t next_request_id_ = 1;                   // serial_ << kRequestIdBits, plus 1, 2, ...
  uint64_t next_arrival_order_ = 0;

  // Durations of the latest steps that ran a batch (ms), a ring of
  // kStepWindow; stats() takes their percentiles.
  static constexpr size_t kStepWindow = 1024;
  std::vector<float> step_times_ms_;
  size_t next_step_time_ = 0;

  std::mutex step_mu_;
};

}  // namespace pvllm
