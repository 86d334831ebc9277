// What an engine is made with: the model, the device, the KV pool and the
// batch limits; its checks; and the memory a configuration needs, computed
// before loading anything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/base/status.h"
#include "core/kv/block_manager.h"
#include "core/model/model.h"
#include "core/sched/scheduler.h"
#include "core/spec/proposer.h"

namespace pvllm {

struct EngineConfig {
  std::string model_path;
  // A shape of random_model_shapes() ("tinyllama-1.1b", ...): the model is
  // built in memory with random bf16 weights and model_path is ignored.
  // Empty = load model_path. Such a model has no tokenizer.
  std::string random_weights;
  // A .pvllm model's tensor checksums: kFull checks every one before create
  // returns; kLazy as the engine first reads each tensor (create's page
  // pass), one read instead of two; kNone not at all. The header is always
  // checked. Other formats have no checksums.
  ChecksumMode model_checksums = ChecksumMode::kFull;
  // Quantize the weight matrices while loading, by a scheme of
  // core/model/quantize_model.h ("q4_k_m", "q8_0", ...); empty: serve them
  // as stored.
  std::string quantize;
  std::string device = "auto";  // "cpu", "cuda", "cuda:N" or "auto" (CUDA when usable)
  int32_t block_size = 16;      // power of two, 8..256
  // KV pool: num_kv_blocks when > 0, otherwise as many blocks as
  // kv_cache_bytes buys (default 256 MiB).
  int64_t kv_cache_bytes = 256ll << 20;
  int32_t num_kv_blocks = 0;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_model_len = 0;  // 0 = the model's max_position_embeddings
  bool enable_prefix_caching = true;
  // kPaged (default) grows each sequence a block at a time; kContiguous is
  // the measuring baseline: each sequence reserves max_model_len slots as
  // one run of blocks at admission, prefix caching is off and forks copy.
  KvAllocator kv_allocator = KvAllocator::kPaged;
  // Preemption (core/sched/scheduler.h): recompute (default); swap, the
  // K/V copied to a host swap space and back; or auto, whichever the
  // backend's cost estimates favour for each sequence. swap_space_bytes
  // sizes the swap space of swap and auto (0 = as many blocks as the KV
  // pool); it counts in the host memory the engine needs.
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  int64_t swap_space_bytes = 0;
  int32_t num_threads = 0;  // 0 = all cores
  // CUDA devices only ("cuda", "cuda:N", or "auto" when a GPU is found;
  // see core/backend/backend_loader.h). The KV pool takes
  // free memory * gpu_memory_utilization after the weights (num_kv_blocks
  // > 0 still fixes the count; kv_cache_bytes is ignored on the GPU).
  float gpu_memory_utilization = 0.90f;
  int32_t dtype = 0;  // 0 = auto (bf16 unless the checkpoint is f16), 1 = bf16, 2 = fp16, 3 = fp32
  // What the KV pool stores (core/kv/kv_cache_dtype.h): auto is fp32 on the
  // CPU and the activation dtype on CUDA; the CPU serves f32, f16, bf16 and
  // int8, CUDA int8, fp8_e4m3 and its activation dtype.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  bool enable_cuda_graphs = true;  // replay captured graphs for pure-decode steps
  // Speculative decoding (docs/speculative.md): "off", or "ngram" (prompt
  // lookup, ngram_min..ngram_max tokens); up to speculative_tokens
  // proposals per decode step (1..kMaxSpeculativeTokens); none while more
  // than speculative_max_running sequences run (0: no limit).
  std::string speculative = "off";
  int32_t speculative_tokens = 4;
  int32_t ngram_min = 1;
  int32_t ngram_max = 4;
  int32_t speculative_max_running = 0;
  static constexpr int32_t kMaxSpeculativeTokens = 16;
  // C++ only: a proposer of the embedder's (a ReplayProposer in tests and
  // benchmarks) used whatever `speculative` says.
  std::shared_ptr<Proposer> proposer;
  // C++ only: a backend made by the embedder instead of the device's (the
  // device string is then not resolved). Called once with the loaded model
  // and the KV pool's shape; custom backends and fault-injecting tests use it.
  std::function<Status(const Model&, const BackendOptions&, std::unique_ptr<Backend>*)>
      backend_factory;
  // Called during create() with a fraction in [0, 1] and a stage name.
  std::function<void(float fraction, const char* stage)> progress;

  Status validate() const;
};

// Memory a configuration needs, computed before loading any weight.
struct MemoryEstimate {
  size_t weight_bytes = 0;
  size_t kv_bytes_per_block = 0;
  int32_t num_blocks = 0;  // what the KV budget buys
  size_t kv_bytes_total = 0;
  int64_t max_tokens_in_cache = 0;
  size_t activation_bytes = 0;  // host engines: the CPU backend's scratch at its largest
  size_t swap_bytes = 0;        // host engines: the swap space (preemption by swap)
};
Status estimate_memory(const EngineConfig& config, MemoryEstimate* out);

// Quantizing while loading (config.quantize) serves on the CPU backend
// only: `device` as select_device settled it stays when it is the CPU,
// becomes the CPU for "auto", and is UNSUPPORTED, naming the scheme and
// the device, for "cuda" (before any weight is read or quantized).
Status device_for_quantize(const EngineConfig& config, struct DeviceSpec* device);

// The KV pool of a host (CPU) backend: num_kv_blocks when set, otherwise
// what kv_cache_bytes buys (kv_pool_blocks, K/V as host_kv_cache_dtype
// stores them; fp32 when that refuses). What create allocates and what the
// estimate reports.
int32_t num_host_kv_blocks(const EngineConfig& config, const struct ModelConfig& model);

}  // namespace pvllm
