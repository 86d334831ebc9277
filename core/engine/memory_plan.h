// The host engine's memory plan: one calculation that both
// pvllm_estimate_memory and Engine::create run, so that the estimate says
// OK exactly when create gets past its memory checks. All sizes are computed
// in 64-bit arithmetic from the model's config and the engine config before
// anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/status.h"
#include "core/engine/engine_config.h"
#include "core/model/model_config.h"

namespace pvllm {

struct MemoryPlan {
  int32_t max_model_len = 0;                         // the context one sequence may reach
  size_t weight_bytes = 0;                           // as stored (mapped from the file)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kF32;  // what the pool stores (resolved)
  size_t kv_bytes_per_block = 0;                     // K and V of every layer, one block, as stored
  int32_t num_blocks = 0;                            // the KV pool
  size_t kv_bytes_total = 0;
  int64_t max_tokens_in_cache = 0;  // num_blocks * block_size
  // The CPU backend's activation buffers at their largest: per batched
  // token the residual stream, q/k/v, attention out, gate/up and the RoPE
  // tables; per sequence the final hidden row and its logits.
  size_t activation_bytes = 0;
  size_t swap_bytes = 0;   // the swap space (preemption by swap or auto)
  size_t total_bytes = 0;  // weights + KV pool + activations + swap space
};

// The context length: config.max_model_len when set (refused beyond the
// model's longest context), else the model's longest context (with its RoPE
// scaling), capped at INT32_MAX.
Status resolve_max_model_len(const EngineConfig& config, const ModelConfig& model,
                             int32_t* max_model_len);

// Refuses a KV pool of num_blocks that cannot hold one sequence of
// max_model_len (under a sliding window, one window's blocks).
Status check_pool_holds_a_sequence(const EngineConfig& config, const ModelConfig& model,
                                   int32_t max_model_len, int32_t num_blocks);

// The plan of a host (CPU) engine. Fails as create would: INVALID_ARGUMENT
// for a context the model cannot reach or a pool that cannot hold one
// sequence; OUT_OF_MEMORY when the total exceeds the machine's physical
// memory (total_memory_bytes, 0 = read it from the system).
Status plan_host_memory(const EngineConfig& config, const ModelConfig& model, size_t weight_bytes,
                        MemoryPlan* out, size_t total_memory_bytes = 0);

// plan_host_memory for config's model, read from its config and tensor
// table (pvllm_model_inspect's reading) before any weight is loaded.
Status plan_host_memory(const EngineConfig& config, MemoryPlan* out);

// The machine's physical memory in bytes (0 when it cannot be read).
size_t physical_memory_bytes();

}  // namespace pvllm
