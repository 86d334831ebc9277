// Engine: creation, submission, aborts and stats. The step and its stages
// are in step.cc; requests after submit belong to the OutputProcessor.
#include "core/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <utility>

#include "core/base/fault_injection.h"
#include "core/engine/beams.h"
#include "core/engine/create_progress.h"
#include "core/engine/memory_plan.h"
#include "core/engine/output_processor.h"
#include "core/engine/request.h"
#include "core/engine/weight_reader.h"
#include "core/model/quantize_model.h"
#include "core/model/random_model.h"
#include "core/spec/ngram_proposer.h"

namespace pvllm {

Status Engine::create(const EngineConfig& config, std::unique_ptr<Engine>* out) {
  PVLLM_RETURN_IF_ERROR(config.validate());
  // Settle the device before loading any weight, so "cuda" without a
  // driver, device or module fails fast with the reason. A backend_factory
  // serves instead of the device's backend, as a host one.
  DeviceSpec device{DeviceSpec::Kind::kCpu, 0};
  if (!config.backend_factory) {
    PVLLM_RETURN_IF_ERROR(select_device(config.device, &device));
    PVLLM_RETURN_IF_ERROR(device_for_quantize(config, &device));
  }

  std::unique_ptr<Engine> engine(new Engine());
  engine->config_ = config;
  // Ids stay below 2^53 (exact in a double, hence in JSON): 13 bits of
  // serial, which wraps after 8191 engines, above 40 bits of count.
  static std::atomic<uint64_t> next_serial{0};
  engine->serial_ = next_serial.fetch_add(1, std::memory_order_relaxed) % 8191 + 1;
  engine->next_request_id_ = (engine->serial_ << kRequestIdBits) + 1;
  // A host engine's memory plan comes first, from the model's config and
  // tensor table: a context, pool or total the machine cannot hold is
  // refused before any weight is read or any buffer sized.
  if (device.kind == DeviceSpec::Kind::kCpu) {
    MemoryPlan plan;
    PVLLM_RETURN_IF_ERROR(plan_host_memory(config, &plan));
    engine->model_weight_bytes_ = plan.weight_bytes;
  }
  const CreateProgress progress(config.progress);
  // The tokenizer loads on its own thread while the weights are read and
  // the backend opens (a large tokenizer.json parses for as long as a large
  // model reads). Leaving early waits for it (the future's destructor).
  std::future<TokenizerLoad> tokenizer;
  PVLLM_RETURN_IF_ERROR(engine->load_model_and_tokenizer(progress, &tokenizer));
  PVLLM_RETURN_IF_ERROR(engine->open_backend(device, progress));
  PVLLM_RETURN_IF_ERROR(engine->open_swap_space());
  engine->make_scheduler();
  PVLLM_RETURN_IF_ERROR(engine->finish_tokenizer(&tokenizer));
  engine->make_request_parts();
  progress.report(CreateStage::kReady);
  *out = std::move(engine);
  return Status::Ok();
}

// The model (or a random-weights one), its tokenizer started, every weight
// page read in, and the context length.
Status Engine::load_model_and_tokenizer(const CreateProgress& progress,
                                        std::future<TokenizerLoad>* tokenizer) {
  progress.report(CreateStage::kLoadingModel);
  if (!config_.random_weights.empty()) {
    PVLLM_RETURN_IF_ERROR(
        make_random_model(config_.random_weights, DType::kBF16, /*seed=*/0, &model_));
  } else {
    LoadOptions options;
    options.checksums = config_.model_checksums;
    PVLLM_RETURN_IF_ERROR(load_model(config_.model_path, &model_, options));
  }

  // The tokenizer reads only its own fields of the model, which nothing
  // else in create writes.
  const EmbeddedTokenizer embedded = model_->embedded_tokenizer;
  const std::string tokenizer_path = model_->tokenizer_path;
  const std::string model_path = model_->path;
  if (embedded.kind != EmbeddedTokenizer::Kind::kNone || !tokenizer_path.empty()) {
    *tokenizer = std::async(std::launch::async, [embedded, tokenizer_path, model_path] {
      TokenizerLoad load;
      if (embedded.kind != EmbeddedTokenizer::Kind::kNone) {
        load.status = Tokenizer::load_embedded(embedded, &load.tokenizer);
        if (!load.status.ok()) {
          load.status = Status(load.status.code(), model_path + ": " + load.status.message());
        }
      } else {
        load.status = Tokenizer::load_file(tokenizer_path, &load.tokenizer);
      }
      return load;
    });
  }

  // Every weight page read now (a lazily checked .pvllm file's tensors
  // checked by the same read), so the disk reads happen here with progress.
  PVLLM_RETURN_IF_ERROR(read_weights(*model_, config_.num_threads, [&](float fraction) {
    progress.report(CreateStage::kReadingWeights, fraction);
  }));
  if (!config_.quantize.empty()) {
    progress.report(CreateStage::kQuantizing);
    PVLLM_RETURN_IF_ERROR(quantize_model(
        model_.get(), config_.quantize, config_.num_threads, [&](size_t done, size_t total) {
          progress.report(CreateStage::kQuantizing, static_cast<float>(done) / total);
        }));
  }
  progress.report(CreateStage::kLoadingTokenizer);  // under way since the model loaded
  return resolve_max_model_len(config_, model_->config, &max_model_len_);
}

// The tokenizer's result: it must not know more pieces than the model has
// rows, and its longest token bounds submit_text's early length check.
Status Engine::finish_tokenizer(std::future<TokenizerLoad>* tokenizer) {
  if (!tokenizer->valid()) return Status::Ok();  // the model has none
  TokenizerLoad load = tokenizer->get();
  PVLLM_RETURN_IF_ERROR(load.status);
  tokenizer_ = std::move(load.tokenizer);
  const ModelConfig& mc = model_->config;
  if (tokenizer_->vocab_size() > mc.vocab_size) {
    return CorruptModel((model_->tokenizer_path.empty() ? model_->path : model_->tokenizer_path) +
                        ": tokenizer has " + std::to_string(tokenizer_->vocab_size()) +
                        " pieces but the model's vocabulary is " + std::to_string(mc.vocab_size));
  }
  // The most text one token can stand for: its decoded bytes, or its
  // written form for special and added tokens matched in the text.
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    const size_t n =
        std::max(tokenizer_->token_bytes(id).size(), tokenizer_->id_to_token(id).size());
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(n));
  }
  return Status::Ok();
}

// The backend with its KV pool, as the backend loader chooses it: the CUDA
// backend sizes its own pool from free device memory (or num_kv_blocks); a
// host backend gets the host memory plan's. Either way the pool must hold
// one whole sequence.
Status Engine::open_backend(const DeviceSpec& device, const CreateProgress& progress) {
  progress.report(CreateStage::kOpeningBackend);
  bool on_cuda = false;
  PVLLM_RETURN_IF_ERROR(
      pvllm::open_backend(device, model_.get(), backend_options(), &backend_, &on_cuda));
  if (!on_cuda) return Status::Ok();  // the host plan checked its pool
  return check_pool_holds_a_sequence(config_, model_->config, max_model_len_,
                                     backend_->num_blocks());
}

// The engine's settings for whichever backend opens. A host backend's pool
// comes from the host plan, checked again (create checked it before
// loading when the device was settled as the CPU; "auto" may land on the
// CPU only now).
OpenBackendOptions Engine::backend_options() {
  OpenBackendOptions o;
  o.block_size = config_.block_size;
  o.num_threads = config_.num_threads;
  o.kv_cache_dtype = config_.kv_cache_dtype;
  o.host_num_blocks = [this](int32_t* num_blocks) {
    if (model_weight_bytes_ == 0) model_weight_bytes_ = model_->weight_bytes();
    MemoryPlan plan;
    PVLLM_RETURN_IF_ERROR(plan_host_memory(config_, model_->config, model_weight_bytes_, &plan));
    *num_blocks = plan.num_blocks;
    return Status::Ok();
  };
  o.cuda.num_blocks = config_.num_kv_blocks;
  o.cuda.gpu_memory_utilization = config_.gpu_memory_utilization;
  o.cuda.dtype = config_.dtype;
  o.cuda.kv_cache_dtype = static_cast<int32_t>(config_.kv_cache_dtype);
  o.cuda.max_num_batched_tokens = config_.max_num_batched_tokens;
  o.cuda.max_num_seqs = config_.max_num_seqs;
  o.cuda.max_model_len = max_model_len_;
  o.cuda.enable_cuda_graphs = config_.enable_cuda_graphs ? 1 : 0;
  o.cuda.fail_device_alloc = [] { return fault::should_fail(fault::Site::kDeviceAlloc); };
  o.factory = config_.backend_factory;
  return o;
}

// The KV bookkeeping over the backend's pool, and the scheduler over it.
// The host swap space of preemption by swap or auto, from the backend.
Status Engine::open_swap_space() {
  if (config_.preemption_mode == PreemptionMode::kRecompute) return Status::Ok();
  int32_t num_blocks = 0;
  PVLLM_RETURN_IF_ERROR(backend_->reserve_swap_space(config_.swap_space_bytes, &num_blocks));
  swap_pool_ = std::make_unique<SwapPool>(num_blocks);
  return Status::Ok();
}

void Engine::make_scheduler() {
  const int32_t num_blocks = backend_->num_blocks();
  kv_cache_ = make_kv_cache_manager(config_.kv_allocator, num_blocks, config_.block_size,
                                    config_.enable_prefix_caching, max_model_len_,
                                    model_->config.sliding_window);
  SchedulerConfig sc;
  sc.max_num_seqs = config_.max_num_seqs;
  sc.max_num_batched_tokens = config_.max_num_batched_tokens;
  sc.preemption_mode = config_.preemption_mode;
  const PreemptionCosts costs = backend_->preemption_costs();
  sc.recompute_seconds_per_token = costs.recompute_seconds_per_token;
  sc.swap_seconds_per_block = costs.swap_seconds_per_block;
  swap_block_bytes_ = costs.block_bytes;
  scheduler_ = std::make_unique<Scheduler>(sc, kv_cache_.get(), swap_pool_.get());
  stats_.num_blocks_total = num_blocks;
  stats_.num_blocks_free = num_blocks;
}

void Engine::make_request_parts() {
  runner_ =
      std::make_unique<ModelRunner>(backend_.get(), kv_cache_.get(), model_->config.vocab_size);
  processor_ = std::make_unique<OutputProcessor>(tokenizer_.get(), model_->config.vocab_size,
                                                 max_model_len_, scheduler_.get());
  if (config_.proposer) {
    proposer_ = config_.proposer;
  } else if (config_.speculative == "ngram") {
    proposer_ = std::make_shared<NgramProposer>(config_.ngram_min, config_.ngram_max);
  }
  if (proposer_) {
    scheduler_->set_proposer([this](Sequence* seq, int32_t max) { propose(seq, max); });
  }
}

Engine::~Engine() = default;

Status Engine::submit_text(std::string_view prompt, const SamplingParams& params, int32_t priority,
                           uint64_t* request_id, bool add_special_tokens, OutputDelivery delivery) {
  if (!tokenizer_) {
    return Status(
        StatusCode::kTokenizerError,
        model_->tokenizer_path.empty() && model_->path.rfind("random:", 0) == 0
            ? "a random-weights model (" + model_->path.substr(7) +
                  ") has no tokenizer; submit token ids instead"
            : std::string("the model has no tokenizer.model or tokenizer.json; submit token "
                          "ids instead"));
  }
  if (prompt.empty()) return InvalidArgument("prompt is empty");
  // No token decodes to more than max_token_bytes_ bytes, so a text longer
  // than the context times that cannot fit: refused before tokenizing it
  // (which takes seconds and gigabytes for megabytes of text).
  const int64_t max_prompt_bytes = int64_t{max_model_len_} * max_token_bytes_;
  if (static_cast<int64_t>(prompt.size()) > max_prompt_bytes) {
    return InvalidArgument("prompt is " + std::to_string(prompt.size()) + " bytes; a context of " +
                           std::to_string(max_model_len_) + " tokens holds at most " +
                           std::to_string(max_prompt_bytes) +
                           " bytes of text (no token is longer than " +
                           std::to_string(max_token_bytes_) + " bytes)");
  }
  std::vector<int32_t> ids;
  PVLLM_RETURN_IF_ERROR(tokenizer_->encode(prompt, add_special_tokens, &ids));
  return submit_tokens(std::move(ids), params, priority, request_id, std::move(delivery));
}

Status Engine::submit_tokens(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                             int32_t priority, uint64_t* request_id, OutputDelivery delivery) {
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
  BeamLimits beam_limits;
  beam_limits.kv_allocator = config_.kv_allocator;
  beam_limits.max_num_seqs = config_.max_num_seqs;
  beam_limits.block_size = kv_cache_->block_size();
  beam_limits.num_blocks = kv_cache_->num_blocks();
  beam_limits.max_model_len = max_model_len_;
  PVLLM_RETURN_IF_ERROR(check_beam_search(params, prompt_ids.size(), beam_limits));

  auto req = std::make_unique<Request>();
  req->prompt_ids = std::move(prompt_ids);
  req->params = params;
  req->priority = priority;
  PVLLM_RETURN_IF_ERROR(processor_->constraints().compile(params, req.get()));
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

  req->submit_time = Request::Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  req->id = next_request_id_++;
  req->arrival_order = next_arrival_order_++;
  *request_id = req->id;
  // Its queue opens before the step can make any of its events.
  events_.open(req->id, std::move(delivery));
  live_request_ids_.insert(req->id);
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

EngineStats Engine::stats() const {
  std::vector<float> times;
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
    s.num_waiting += static_cast<int32_t>(inbox_.size());
    times = step_times_ms_;
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    auto at = [&](double q) { return times[static_cast<size_t>(q * (times.size() - 1) + 0.5)]; };
    s.step_time_p50_ms = at(0.5);
    s.step_time_p99_ms = at(0.99);
    s.step_time_max_ms = times.back();
  }
  return s;
}

bool Engine::has_unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !live_request_ids_.empty();
}

}  // namespace pvllm
