// Engine: submit → schedule → prepare → forward → sample → append → poll.
#include "core/engine/engine.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>

#include "core/backend/backend_loader.h"
#include "core/backend/registry.h"
#include "core/base/check.h"
#include "core/engine/model_runner.h"
#include "core/model/random_model.h"

namespace pvllm {

// One sample's output state: its detokenizer and the text not yet
// released (held back while it could still grow into a stop string).
struct Engine::SampleState {
  Sequence* seq = nullptr;
  IncrementalDetokenizer detok;
  std::string text;          // all text produced so far
  size_t num_text_sent = 0;  // bytes of `text` already in events
  bool finished = false;

  SampleState(const Tokenizer* tok, int32_t last_prompt_token) : detok(tok, last_prompt_token) {}
};

struct Engine::Request {
  uint64_t id = 0;
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int32_t priority = 0;
  uint64_t arrival = 0;
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;  // tokens that end generation
  size_t max_stop_len = 0;        // longest stop string, in bytes
  bool forked = false;            // the n samples exist
  std::vector<std::unique_ptr<SampleState>> samples;
  int32_t num_finished = 0;
};

namespace {

// Bytes of `text` from `from` that may be released when `hold` trailing
// bytes must stay back, never cutting a UTF-8 character.
size_t releasable_end(const std::string& text, size_t from, size_t hold) {
  if (text.size() <= from + hold) return from;
  size_t end = text.size() - hold;
  while (end > from && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

// Reads one byte per page of a tensor so the OS maps it in.
void touch_pages(const Tensor& t) {
  const volatile unsigned char* p = static_cast<const unsigned char*>(t.data);
  if (p == nullptr) return;
  unsigned char sink = 0;
  for (size_t off = 0; off < t.nbytes(); off += 4096) sink ^= p[off];
  (void)sink;
}

}  // namespace

Status Engine::create(const EngineConfig& config, std::unique_ptr<Engine>* out) {
  PVLLM_RETURN_IF_ERROR(config.validate());
  // Settle the device before loading any weight, so "cuda" without a
  // driver, device or module fails fast with the reason.
  DeviceSpec device;
  PVLLM_RETURN_IF_ERROR(parse_device(config.device, &device));
  bool use_cuda = false;
  if (!config.backend_factory) PVLLM_RETURN_IF_ERROR(resolve_cuda(device, &use_cuda));
  auto progress = [&](float f, const char* stage) {
    if (config.progress) config.progress(f, stage);
  };
  std::unique_ptr<Engine> engine(new Engine());
  engine->config_ = config;

  progress(0.0f, "loading model");
  if (!config.random_weights.empty()) {
    progress(0.0f, "making random weights");
    PVLLM_RETURN_IF_ERROR(
        make_random_model(config.random_weights, DType::kBF16, /*seed=*/0, &engine->model_));
  } else {
    PVLLM_RETURN_IF_ERROR(load_model(config.model_path, &engine->model_));
  }
  const ModelConfig& mc = engine->model_->config;

  // Read every weight page now, so a large model's disk reads happen here
  // with progress shown rather than inside the first step.
  const auto& layers = engine->model_->weights.layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    for (const Tensor* t :
         {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down}) {
      touch_pages(*t);
    }
    progress(0.05f + 0.5f * static_cast<float>(i + 1) / layers.size(), "reading weights");
  }
  touch_pages(engine->model_->weights.embed);
  touch_pages(engine->model_->weights.lm_head);

  progress(0.6f, "loading tokenizer");
  if (!engine->model_->tokenizer_path.empty()) {
    PVLLM_RETURN_IF_ERROR(Tokenizer::load(engine->model_->tokenizer_path, &engine->tokenizer_));
    if (engine->tokenizer_->vocab_size() > mc.vocab_size) {
      return CorruptModel(engine->model_->tokenizer_path + ": tokenizer has " +
                          std::to_string(engine->tokenizer_->vocab_size()) +
                          " pieces but the model's vocabulary is " + std::to_string(mc.vocab_size));
    }
  }

  engine->max_model_len_ =
      config.max_model_len > 0 ? config.max_model_len : mc.max_position_embeddings;
  if (engine->max_model_len_ > mc.max_position_embeddings) {
    return InvalidArgument("max_model_len " + std::to_string(config.max_model_len) +
                           " exceeds the model's max_position_embeddings " +
                           std::to_string(mc.max_position_embeddings));
  }

  MemoryEstimate est;
  est.kv_bytes_per_block = kv_bytes_per_block_f32(mc, config.block_size);
  int64_t num_blocks = config.num_kv_blocks;
  if (num_blocks == 0) {
    num_blocks = config.kv_cache_bytes / static_cast<int64_t>(est.kv_bytes_per_block);
  }
  const int64_t blocks_per_seq =
      (engine->max_model_len_ + config.block_size - 1) / config.block_size;
  if (use_cuda) {
    // The GPU backend sizes its pool from free memory (or num_kv_blocks);
    // the block manager then uses the count it reports.
    progress(0.7f, "uploading weights and allocating the KV cache");
    CudaBackendOptions co;
    co.device_index = device.index;
    co.block_size = config.block_size;
    co.num_blocks = config.num_kv_blocks;
    co.gpu_memory_utilization = config.gpu_memory_utilization;
    co.dtype = config.dtype;
    co.max_num_batched_tokens = config.max_num_batched_tokens;
    co.max_num_seqs = config.max_num_seqs;
    co.max_model_len = engine->max_model_len_;
    co.enable_cuda_graphs = config.enable_cuda_graphs ? 1 : 0;
    const CudaModule* module = nullptr;
    PVLLM_RETURN_IF_ERROR(CudaModule::get(&module));
    const Status st = module->create_backend(*engine->model_, co, &engine->backend_);
    if (st.ok()) {
      num_blocks = engine->backend_->num_blocks();
    } else if (device.kind == DeviceSpec::Kind::kAuto && st.code() == StatusCode::kUnsupported) {
      use_cuda = false;  // "auto": a shape the CUDA kernels do not serve runs on the CPU
    } else {
      return st;
    }
  }
  if (num_blocks < blocks_per_seq) {
    return InvalidArgument("the KV budget buys " + std::to_string(num_blocks) + " blocks of " +
                           std::to_string(config.block_size) + " tokens, fewer than the " +
                           std::to_string(blocks_per_seq) + " one sequence of max_model_len " +
                           std::to_string(engine->max_model_len_) +
                           " needs; raise kv_cache_bytes or lower max_model_len");
  }
  num_blocks = std::min<int64_t>(num_blocks, INT32_MAX / config.block_size);

  progress(0.7f, "allocating KV cache");
  BackendOptions bo;
  bo.num_blocks = static_cast<int32_t>(num_blocks);
  bo.block_size = config.block_size;
  bo.num_threads = config.num_threads;
  if (config.backend_factory) {
    PVLLM_RETURN_IF_ERROR(config.backend_factory(*engine->model_, bo, &engine->backend_));
    if (!engine->backend_) return Internal("the backend factory returned no backend");
  } else if (!use_cuda) {
    PVLLM_RETURN_IF_ERROR(create_backend("cpu", *engine->model_, bo, &engine->backend_));
  }

  engine->block_manager_ = std::make_unique<BlockManager>(
      static_cast<int32_t>(num_blocks), config.block_size, config.enable_prefix_caching,
      config.kv_allocator, engine->max_model_len_);
  SchedulerConfig sc;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  engine->scheduler_ = std::make_unique<Scheduler>(sc, engine->block_manager_.get());
  engine->stats_.num_blocks_total = static_cast<int32_t>(num_blocks);
  engine->stats_.num_blocks_free = static_cast<int32_t>(num_blocks);
  progress(1.0f, "ready");
  *out = std::move(engine);
  return Status::Ok();
}

Engine::~Engine() = default;

Status Engine::submit_text(std::string_view prompt, const SamplingParams& params, int32_t priority,
                           uint64_t* request_id) {
  if (!tokenizer_) {
    return Status(StatusCode::kTokenizerError,
                  model_->tokenizer_path.empty() && model_->path.rfind("random:", 0) == 0
                      ? "a random-weights model (" + model_->path.substr(7) +
                            ") has no tokenizer; submit token ids instead"
                      : std::string("the model has no tokenizer.model; submit token ids instead"));
  }
  if (prompt.empty()) return InvalidArgument("prompt is empty");
  std::vector<int32_t> ids;
  PVLLM_RETURN_IF_ERROR(tokenizer_->encode(prompt, /*add_bos=*/true, &ids));
  return submit_tokens(std::move(ids), params, priority, request_id);
}

Status Engine::submit_tokens(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                             int32_t priority, uint64_t* request_id) {
  const ModelConfig& mc = model_->config;
  if (prompt_ids.empty()) return InvalidArgument("prompt has no tokens");
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    if (prompt_ids[i] < 0 || prompt_ids[i] >= mc.vocab_size) {
      return InvalidArgument("prompt token " + std::to_string(i) + " is " +
                             std::to_string(prompt_ids[i]) + ", outside the vocabulary [0, " +
                             std::to_string(mc.vocab_size) + ")");
    }
  }
  if (static_cast<int64_t>(prompt_ids.size()) > max_model_len_) {
    return InvalidArgument("prompt has " + std::to_string(prompt_ids.size()) +
                           " tokens; the context holds " + std::to_string(max_model_len_));
  }
  PVLLM_RETURN_IF_ERROR(params.validate(mc.vocab_size));
  if (params.n > config_.max_num_seqs) {
    return InvalidArgument("n = " + std::to_string(params.n) + " exceeds max_num_seqs " +
                           std::to_string(config_.max_num_seqs));
  }

  auto req = std::make_unique<Request>();
  req->prompt_ids = std::move(prompt_ids);
  req->params = params;
  req->priority = priority;
  if (!params.ignore_eos) {
    req->stop_ids.push_back(mc.eos_token_id);
    req->stop_ids.insert(req->stop_ids.end(), mc.extra_stop_token_ids.begin(),
                         mc.extra_stop_token_ids.end());
  }
  req->stop_ids.insert(req->stop_ids.end(), params.stop_token_ids.begin(),
                       params.stop_token_ids.end());
  for (const std::string& s : params.stop)
    req->max_stop_len = std::max(req->max_stop_len, s.size());
  if (params.has_seed) {
    req->seed = params.seed;
  } else {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    req->seed = rng();
  }

  std::lock_guard<std::mutex> lock(mu_);
  req->id = next_request_id_++;
  req->arrival = next_arrival_++;
  *request_id = req->id;
  live_request_ids_[req->id] = true;
  inbox_.push_back(std::move(req));
  return Status::Ok();
}

Status Engine::abort(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_request_ids_.count(request_id) == 0) {
    return NotFound("request " + std::to_string(request_id) + " is unknown or already finished");
  }
  abort_inbox_.push_back(request_id);
  return Status::Ok();
}

void Engine::poll(std::vector<Output>* out, size_t max_events) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!outbox_.empty() && max_events > 0) {
    out->push_back(std::move(outbox_.front()));
    outbox_.pop_front();
    --max_events;
  }
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.num_waiting += static_cast<int32_t>(inbox_.size());
  return s;
}

bool Engine::has_unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !live_request_ids_.empty();
}

// What a sample's detokenizer is primed with: -1 (no prompt) when there is
// no tokenizer (random-weights models), since it then never reads one.
int32_t Engine::last_prompt_token(const Request& req) const {
  return tokenizer_ ? req.prompt_ids.back() : -1;
}

// Moves submitted requests into the scheduler and applies aborts.
void Engine::admit_inbox() {
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
    seq->arrival = req->arrival;
    seq->token_ids = req->prompt_ids;
    seq->num_prompt_tokens = static_cast<int32_t>(req->prompt_ids.size());
    seq->num_seats = req->params.n;
    auto state = std::make_unique<SampleState>(tokenizer_.get(), last_prompt_token(*req));
    state->seq = seq.get();
    req->samples.push_back(std::move(state));
    scheduler_->add(seq.get());
    sequences_[seq->seq_id] = std::move(seq);
    requests_[req->id] = std::move(req);
  }
  for (uint64_t id : aborts) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // finished in the meantime
    for (auto& sample : it->second->samples) {
      if (!sample->finished)
        finish_sequence(sample->seq, FinishReason::kAbort, nullptr, &pending_events_);
    }
  }
}

// Creates the n - 1 siblings of a request's first sequence, sharing its
// blocks copy-on-write, right before its first token is sampled.
void Engine::fork_samples(Sequence* parent, std::vector<Sequence*>* children) {
  Request& req = *requests_.at(parent->request_id);
  req.forked = true;
  parent->num_seats = 1;
  for (int32_t k = 1; k < req.params.n; ++k) {
    auto child = std::make_unique<Sequence>();
    child->seq_id = next_seq_id_++;
    child->request_id = parent->request_id;
    child->sample_index = k;
    child->priority = parent->priority;
    child->arrival = parent->arrival;
    child->token_ids = parent->token_ids;
    child->num_prompt_tokens = parent->num_prompt_tokens;
    child->num_computed_tokens = parent->num_computed_tokens;
    // Paged: shares the parent's blocks. Contiguous: a new run plus copies,
    // run now since the parent's K/V is computed and nothing writes it
    // before the next step. No run (or a failed copy) sends the child back
    // to wait: it is recomputed from its tokens like a preempted sequence.
    std::vector<BlockCopy> copies;
    bool forked = block_manager_->fork(parent->block_table, parent->num_computed_tokens,
                                       &child->block_table, &copies);
    if (forked && !copies.empty() && !backend_->copy_blocks(copies).ok()) {
      block_manager_->free(&child->block_table);
      forked = false;
    }
    if (forked) {
      scheduler_->add_running(child.get());
    } else {
      scheduler_->add(child.get());
    }
    auto state = std::make_unique<SampleState>(tokenizer_.get(), last_prompt_token(req));
    state->seq = child.get();
    req.samples.push_back(std::move(state));
    children->push_back(child.get());
    sequences_[child->seq_id] = std::move(child);
  }
}

void Engine::append_token(Sequence* seq, const SampleResult& r, std::vector<Output>* events) {
  Request& req = *requests_.at(seq->request_id);
  SampleState& state = *req.samples.at(seq->sample_index);
  Output ev;
  ev.request_id = req.id;
  ev.sample_index = seq->sample_index;

  const bool stop_token =
      std::find(req.stop_ids.begin(), req.stop_ids.end(), r.token_id) != req.stop_ids.end();
  FinishReason finish = FinishReason::kNone;
  if (stop_token) {
    finish = FinishReason::kStop;  // the stop token itself is not reported
  } else {
    seq->token_ids.push_back(r.token_id);
    ev.token_ids.push_back(r.token_id);
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
    finish_sequence(seq, finish, &ev, events);
    return;
  }
  const size_t hold = req.max_stop_len > 0 ? req.max_stop_len - 1 : 0;
  const size_t end = releasable_end(state.text, state.num_text_sent, hold);
  ev.text = state.text.substr(state.num_text_sent, end - state.num_text_sent);
  state.num_text_sent = end;
  events->push_back(std::move(ev));
}

void Engine::finish_sequence(Sequence* seq, FinishReason reason, Output* last,
                             std::vector<Output>* events) {
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
  if (reason == FinishReason::kError) ev.error = step_error_;
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
      if (reason == FinishReason::kError) sib.error = step_error_;
      events->push_back(std::move(sib));
      ++req.num_finished;
    }
  }
  if (req.num_finished >= req.params.n) {
    events->back().request_finished = true;  // the request's last event, pushed just above
    finished_requests_.push_back(req.id);
  }
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
void Engine::plan_draws(std::span<const ScheduledSeq> seqs, std::vector<SampleRow>* rows) const {
  rows->clear();
  int32_t logits_index = 0;
  for (const ScheduledSeq& s : seqs) {
    if (!s.samples) continue;
    const Sequence& seq = *s.seq;
    const Request& req = *requests_.at(seq.request_id);
    const bool all = draws_all_samples(seq);
    const std::span<const int32_t> tokens(seq.token_ids);
    for (int32_t k = 0; k < (all ? req.params.n : 1); ++k) {
      SampleRow r;
      r.logits_index = logits_index;
      r.params = &req.params;
      r.seed = req.seed;
      r.sample_index = all ? k : seq.sample_index;
      r.step = seq.num_generated_tokens();
      r.prompt_ids = tokens.first(seq.num_prompt_tokens);
      r.output_ids = tokens.subspan(seq.num_prompt_tokens);
      rows->push_back(r);
    }
    ++logits_index;
  }
}

// Runs `seqs` through the backend; outcomes[i] is seqs[i]'s. A batch that
// runs out of memory is split in halves and each half retried (K/V writes
// repeat the same values), so only a sequence that cannot run even alone
// fails and the rest keep their work. Any other failure fails the batch.
void Engine::execute(std::span<const ScheduledSeq> seqs, std::span<SeqOutcome> outcomes) {
  ScheduledBatch sub;
  sub.seqs.assign(seqs.begin(), seqs.end());
  prepare_batch(sub, *block_manager_, &metadata_);
  plan_draws(seqs, &sample_rows_);
  const Status st = backend_->forward_sample(metadata_, sample_rows_, &sample_results_);
  if (st.ok()) {
    size_t next = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (!seqs[i].samples) continue;
      const size_t num_draws =
          draws_all_samples(*seqs[i].seq)
              ? static_cast<size_t>(requests_.at(seqs[i].seq->request_id)->params.n)
              : 1;
      outcomes[i].samples.assign(sample_results_.begin() + next,
                                 sample_results_.begin() + next + num_draws);
      next += num_draws;
    }
    return;
  }
  if (st.code() == StatusCode::kOutOfMemory && seqs.size() > 1) {
    const size_t half = seqs.size() / 2;
    execute(seqs.first(half), outcomes.first(half));
    execute(seqs.subspan(half), outcomes.subspan(half));
    return;
  }
  for (SeqOutcome& o : outcomes) o.status = st;
}

// Records what ran (computed tokens, prefix-cache hashes), ends the
// sequences whose batch failed with kError, forks first tokens of n > 1
// requests and appends every drawn token. Returns the first failure.
Status Engine::apply_outcomes(const ScheduledBatch& batch, std::span<SeqOutcome> outcomes,
                              std::vector<Output>* events, int64_t* num_sampled) {
  ScheduledBatch ran;
  Status first_failure = Status::Ok();
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (outcomes[i].status.ok()) {
      ran.seqs.push_back(batch.seqs[i]);
    } else if (first_failure.ok()) {
      first_failure = outcomes[i].status;
    }
  }
  scheduler_->on_batch_computed(ran);
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    Sequence* seq = batch.seqs[i].seq;
    if (!outcomes[i].status.ok()) {
      step_error_ = outcomes[i].status.message();
      finish_sequence(seq, FinishReason::kError, nullptr, events);
      continue;
    }
    if (!batch.seqs[i].samples) continue;
    std::vector<Sequence*> group{seq};
    if (draws_all_samples(*seq)) {
      fork_samples(seq, &group);
    } else {
      requests_.at(seq->request_id)->forked = true;
    }
    PVLLM_CHECK(group.size() == outcomes[i].samples.size(), "one draw per sample");
    for (size_t k = 0; k < group.size(); ++k) {
      append_token(group[k], outcomes[i].samples[k], events);
      ++*num_sampled;
    }
  }
  return first_failure;
}

Status Engine::step() {
  std::lock_guard<std::mutex> step_lock(step_mu_);
  std::vector<Output> events;
  pending_events_.clear();
  finished_requests_.clear();
  admit_inbox();
  events.swap(pending_events_);

  ScheduledBatch batch = scheduler_->schedule();
  Status status = Status::Ok();
  int64_t num_prompt_tokens = 0;
  int64_t num_sampled = 0;
  if (!batch.empty()) {
    for (const ScheduledSeq& s : batch.seqs) {
      if (s.num_new_tokens > 1 || s.seq->num_computed_tokens < s.seq->num_prompt_tokens) {
        num_prompt_tokens += s.num_new_tokens;
      }
    }
    std::vector<SeqOutcome> outcomes(batch.seqs.size());
    status = backend_->copy_blocks(batch.copies);
    if (status.ok()) {
      execute(batch.seqs, outcomes);
    } else {
      for (SeqOutcome& o : outcomes) o.status = status;
    }
    status = apply_outcomes(batch, outcomes, &events, &num_sampled);
  }

  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id : finished_requests_) {
    requests_.erase(id);
    live_request_ids_.erase(id);
    ++stats_.num_requests_finished;
  }
  for (Output& ev : events) outbox_.push_back(std::move(ev));
  const BlockManagerMetrics m = block_manager_->metrics();
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
  stats_.num_cached_prompt_tokens = m.prefix_hits * block_manager_->block_size();
  stats_.num_preemptions = scheduler_->num_preemptions();
  const KvOccupancy occ = scheduler_->kv_occupancy();
  stats_.num_kv_tokens_stored = occ.num_tokens_stored;
  stats_.num_kv_slots_reserved = occ.num_slots_reserved;
  stats_.num_seqs_queued_for_memory = scheduler_->num_queued_for_memory();
  stats_.num_block_copies = m.num_cow_copies;
  stats_.num_prompt_tokens_processed += num_prompt_tokens;
  stats_.num_generation_tokens += num_sampled;
  ++stats_.num_steps;
  return status;
}

}  // namespace pvllm
