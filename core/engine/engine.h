// Engine: the data path of DESIGN.md in one object.
//
//   submit ──▶ inbox ──step()──▶ take new requests ──▶ schedule
//     ──▶ run the batch (prepare, forward and sample in the backend)
//     ──▶ append tokens or fail the batch (stop checks, fork, detokenize)
//     ──▶ publish outputs and stats ──▶ outbox ──poll()
//
// Threading: submit, poll, abort and stats take a short lock on the inbox,
// outbox and counters and may be called from any thread while one thread
// is inside step(). step() calls are serialised by their own lock; the
// forward pass runs outside the inbox lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/backend_loader.h"
#include "core/base/status.h"
#include "core/engine/engine_config.h"
#include "core/kv/kv_cache_manager.h"
#include "core/model/model.h"
#include "core/sample/sampler.h"
#include "core/sample/sampling_params.h"
#include "core/sched/scheduler.h"
#include "core/sched/sequence.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm {

class CreateProgress;  // core/engine/create_progress.h
namespace structured {
class ConstraintCompiler;  // core/structured/constraint.h
}

enum class FinishReason : int32_t {
  kNone = 0,    // still running
  kStop = 1,    // EOS, a stop token or a stop string
  kLength = 2,  // max_tokens or the model's context
  kAbort = 3,   // aborted by the caller
  kError = 4,   // failed; see Output::error
};

struct OutputLogprobs {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

// A request's timing and token counts, given with its last event.
struct RequestMetrics {
  double time_queued = 0;            // s from submit to the first step that ran any of its tokens
  double time_to_first_token = 0;    // s from submit to the end of the step of its first token
  double time_per_output_token = 0;  // s, mean gap between its token steps after the first
  double e2e_latency = 0;            // s from submit to the end of its last step
  int64_t num_prompt_tokens = 0;
  int64_t num_prefill_tokens = 0;        // prompt tokens computed, recomputation included
  int64_t num_cached_prompt_tokens = 0;  // prompt tokens the prefix cache spared
  int64_t num_generated_tokens = 0;      // over all its samples
};

// One event for one sample of one request.
struct Output {
  uint64_t request_id = 0;
  int32_t sample_index = 0;
  std::vector<int32_t> token_ids;  // new tokens since the last event
  std::string text;                // their text delta (complete UTF-8)
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<OutputLogprobs> logprobs;  // one per new token when requested
  std::string error;                     // with kError
  // The request's last event: every one of its n samples has finished.
  bool request_finished = false;
  // The event's place among its request's events (all samples): 0, 1, 2,
  // ... in the order the engine made them, so events taken by several
  // pollers can be put back in order.
  uint64_t sequence = 0;
  RequestMetrics metrics;  // with request_finished; zero on other events
  // On the request's first event when it asked for prompt logprobs: entry i
  // for prompt token i + 1 (the first token has none), the token's logprob
  // and its top alternatives.
  std::vector<OutputLogprobs> prompt_logprobs;
  // Beam search: the hypothesis' score (core/sample/beam_search.h); 0
  // otherwise.
  double score = 0;
};

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_blocks_total = 0;
  int32_t num_blocks_used = 0;
  int32_t num_blocks_free = 0;
  int32_t num_blocks_cached = 0;
  float kv_utilization = 0.0f;
  int64_t reserved_unused_slots = 0;
  float prefix_cache_hit_rate = 0.0f;  // hits / queries, in blocks
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_queries = 0;
  int64_t num_preemptions = 0;
  int64_t num_prompt_tokens_processed = 0;
  int64_t num_generation_tokens = 0;
  int64_t num_cached_prompt_tokens = 0;  // prefill skipped thanks to the prefix cache
  int64_t num_steps = 0;
  int64_t num_requests_finished = 0;
  // Over distinct blocks of running sequences: slots holding computed K/V
  // and slots reserved (tokens stored / slots reserved = KV utilization as
  // the memory benchmarks define it).
  int64_t num_kv_tokens_stored = 0;
  int64_t num_kv_slots_reserved = 0;
  int64_t num_seqs_queued_for_memory = 0;  // admission refused for lack of blocks, once each
  int64_t num_block_copies = 0;            // copy-on-write and contiguous-fork copies
  // Preemption by swap (num_preemptions counts both kinds).
  int64_t num_preemptions_by_swap = 0;
  int64_t num_blocks_swapped_out = 0;
  int64_t num_blocks_swapped_in = 0;
  int64_t num_swap_bytes = 0;              // moved both ways
  int64_t num_prefix_cache_evictions = 0;  // cached blocks reclaimed for new use
  // Over every step, the context positions the attention of each computed
  // sequence reads: its whole context after the step, or the last
  // sliding_window of it. Times the K/V bytes per token, the cache traffic
  // a step's attention cannot avoid (the bandwidth roofline of
  // docs/performance.md counts it beside the weights read once per step).
  int64_t num_kv_tokens_attended = 0;
  // Structured output: the draws given a mask and the host time spent
  // making those masks (cache lookups, trie walks on a miss, copies).
  int64_t num_constrained_draws = 0;
  double constraint_mask_ms = 0.0;
  // Wall time of the steps that ran a batch, over the last kStepWindow of
  // them (ms); 0 before the first.
  float step_time_p50_ms = 0.0f;
  float step_time_p99_ms = 0.0f;
  float step_time_max_ms = 0.0f;
};

class Engine {
 public:
  static Status create(const EngineConfig& config, std::unique_ptr<Engine>* out);
  ~Engine();

  // Submits a prompt given as text or as token ids. Text is tokenized with
  // the special tokens the tokenizer adds (BOS) when add_special_tokens.
  Status submit_text(std::string_view prompt, const SamplingParams& params, int32_t priority,
                     uint64_t* request_id, bool add_special_tokens = true);
  Status submit_tokens(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                       int32_t priority, uint64_t* request_id);
  // Runs one scheduler iteration. Returns a non-ok status only for failures
  // of the engine itself; requests that fail end with kError outputs.
  Status step();
  // Moves up to max_events pending outputs into *out (appends).
  void poll(std::vector<Output>* out, size_t max_events = SIZE_MAX);
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
  struct Request;      // core/engine/request.h
  struct SampleState;  // core/engine/request.h

  // What one scheduled sequence got from its forward pass this step.
  struct SeqOutcome {
    Status status;                      // ok, or why its batch could not run
    std::vector<SampleResult> samples;  // its draws (see plan_draws); empty if it does not sample
  };
  // What one step produced, handed from stage to stage.
  struct StepResult {
    std::vector<Output> events;
    Status status;  // the first failure of the batch, if any
    int64_t num_prompt_tokens = 0;
    int64_t num_sampled = 0;
    int64_t num_kv_tokens_attended = 0;           // see EngineStats
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

  // step(), in order (step.cc).
  void take_new_requests(StepResult* step);
  std::vector<SeqOutcome> run_batch(const ScheduledBatch& batch);
  Status swap(const ScheduledBatch& batch);
  void fail_lost_swaps(StepResult* step);
  void forward_and_sample(std::span<const ScheduledSeq> seqs, std::span<SeqOutcome> outcomes);
  void forward_and_sample_plain(std::span<const ScheduledSeq> seqs, std::span<SeqOutcome> outcomes);
  // Prompt logprobs (prompt_logprobs.cc).
  bool needs_prompt_logits(const ScheduledSeq& s) const;
  void forward_with_prompt_logprobs(const ScheduledSeq& s, SeqOutcome* outcome);
  void attach_prompt_logprobs(std::vector<Output>* events);
  void append_or_fail(const ScheduledBatch& batch, std::span<SeqOutcome> outcomes,
                      StepResult* step);
  void publish(StepResult* step);
  // The per-request timing and counts of what ran (append_or_fail).
  void note_ran(const ScheduledSeq& s, const StepResult& step);
  void honour_late_aborts_locked(StepResult* step);
  void update_stats_locked(const StepResult& step);

  // Requests and their samples (requests.cc).
  int32_t last_prompt_token(const Request& req) const;
  const SamplingParams& draw_params(const Request& req) const;
  Sequence* fork_sequence(Sequence* parent);
  void retire_sequence(Sequence* seq);
  // Beam search (beams.cc).
  Status check_beam_search(const SamplingParams& params, size_t prompt_len) const;
  void start_beam_search(Request* req, Sequence* seq);
  void note_beam_draw(Sequence* seq, const SampleResult& draw);
  void advance_beams(const std::vector<uint64_t>& request_ids,
                     const std::vector<std::string>& errors, std::vector<Output>* events);
  void beam_step(Request* req, std::vector<Output>* events);
  void end_beam_search(Request* req, FinishReason reason, const std::string& error,
                       std::vector<Output>* events);
  bool draws_all_samples(const Sequence& seq) const;
  void plan_draws(std::span<const ScheduledSeq> seqs, std::vector<SampleRow>* rows);
  // Structured output (constraints.cc).
  Status compile_constraint(const SamplingParams& params, Request* req);
  void start_matcher(const Request& req, SampleState* state) const;
  std::span<const uint64_t> draw_mask(const Request& req, const SampleState& state);
  void fork_samples(Sequence* parent, std::vector<Sequence*>* children);
  void append_token(Sequence* seq, const SampleResult& r, std::vector<Output>* events);
  void note_token(Request* req);
  void note_token_step(Request* req);
  RequestMetrics metrics_of(const Request& req) const;
  // Ends one sample: its final event (`last`, when this step produced one,
  // else an empty one) carries the reason (and `error` with kError); frees
  // its blocks.
  void finish_sequence(Sequence* seq, FinishReason reason, Output* last, const std::string& error,
                       std::vector<Output>* events);

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
  // Compiles and caches output constraints (built at the first one).
  std::mutex constraints_mu_;
  std::unique_ptr<structured::ConstraintCompiler> constraints_;

  // Only step() touches these.
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;
  BatchMetadata metadata_;
  std::vector<SampleRow> sample_rows_;
  std::vector<SampleResult> sample_results_;
  // This step's structured-output masks, one per constrained draw.
  std::vector<std::vector<uint64_t>> draw_masks_;
  uint64_t next_seq_id_ = 1;
  std::vector<uint64_t> finished_requests_;  // this step's
  std::vector<Sequence*> swap_failures_;     // this step's: swapped out, K/V lost
  Status swap_failure_;
  // The end of the current step's forward pass: the time its tokens (and
  // finishing requests) are stamped with.
  std::chrono::steady_clock::time_point step_time_;

  // Shared with submit / poll / abort / stats.
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Request>> inbox_;
  std::vector<uint64_t> abort_inbox_;
  std::deque<Output> outbox_;
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
