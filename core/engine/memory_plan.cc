// The host memory plan shared by the estimate and Engine::create.
#include "core/engine/memory_plan.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/backend/backend.h"
#include "core/kv/kv_cache_manager.h"
#include "core/model/model.h"
#include "core/model/quantize_model.h"
#include "core/model/random_model.h"

namespace pvllm {

namespace {

// a * b, saturating at SIZE_MAX instead of wrapping.
size_t mul_sat(size_t a, size_t b) {
  if (a != 0 && b > SIZE_MAX / a) return SIZE_MAX;
  return a * b;
}

size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Floats the CPU backend keeps per batched token and per sampled row (see
// its scratch buffers in kernels/cpu/cpu_backend.cc).
size_t activation_bytes(const EngineConfig& config, const ModelConfig& m) {
  const size_t hidden = static_cast<size_t>(m.hidden_size);
  const size_t q = static_cast<size_t>(m.num_heads) * static_cast<size_t>(m.head_dim);
  const size_t kv = static_cast<size_t>(m.num_kv_heads) * static_cast<size_t>(m.head_dim);
  const size_t inter = static_cast<size_t>(m.intermediate_size);
  const size_t per_token =
      2 * hidden + 2 * q + 2 * kv + 2 * inter + static_cast<size_t>(m.head_dim);
  const size_t per_row = hidden + static_cast<size_t>(m.vocab_size);
  const size_t tokens = static_cast<size_t>(std::max(config.max_num_batched_tokens, 1));
  const size_t rows = static_cast<size_t>(std::max(config.max_num_seqs, 1));
  return mul_sat(add_sat(mul_sat(tokens, per_token), mul_sat(rows, per_row)), sizeof(float));
}

}  // namespace

Status resolve_max_model_len(const EngineConfig& config, const ModelConfig& model,
                             int32_t* max_model_len) {
  // Linear and dynamic RoPE scaling stretch the context past
  // max_position_embeddings by their factor.
  const int64_t longest = std::min<int64_t>(max_context_length(model), INT32_MAX);
  if (config.max_model_len > longest) {
    return InvalidArgument("max_model_len " + std::to_string(config.max_model_len) +
                           " exceeds the model's longest context " + std::to_string(longest) +
                           " (max_position_embeddings " +
                           std::to_string(model.max_position_embeddings) +
                           ", with its RoPE scaling)");
  }
  *max_model_len = config.max_model_len > 0 ? config.max_model_len : static_cast<int32_t>(longest);
  return Status::Ok();
}

Status check_pool_holds_a_sequence(const EngineConfig& config, const ModelConfig& model,
                                   int32_t max_model_len, int32_t num_blocks) {
  const int32_t window = model.sliding_window;
  const int32_t blocks_per_seq =
      min_blocks_for_one_sequence(config.kv_allocator, config.block_size, max_model_len, window);
  if (num_blocks >= blocks_per_seq) return Status::Ok();
  const int64_t whole = (int64_t{max_model_len} + config.block_size - 1) / config.block_size;
  const std::string window_part =
      blocks_per_seq < whole ? " (its sliding window of " + std::to_string(window) + ")" : "";
  return InvalidArgument("the KV budget buys " + std::to_string(num_blocks) + " blocks of " +
                         std::to_string(config.block_size) + " tokens, fewer than the " +
                         std::to_string(blocks_per_seq) + " one sequence of max_model_len " +
                         std::to_string(max_model_len) + window_part +
                         " needs; raise kv_cache_bytes or lower max_model_len");
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return mul_sat(static_cast<size_t>(pages), static_cast<size_t>(page_size));
}

Status plan_host_memory(const EngineConfig& config, const ModelConfig& model, size_t weight_bytes,
                        MemoryPlan* out, size_t total_memory_bytes) {
  MemoryPlan plan;
  PVLLM_RETURN_IF_ERROR(resolve_max_model_len(config, model, &plan.max_model_len));
  plan.weight_bytes = weight_bytes;
  PVLLM_RETURN_IF_ERROR(host_kv_cache_dtype(config.kv_cache_dtype, &plan.kv_cache_dtype));
  plan.kv_bytes_per_block = kv_bytes_per_block(model, config.block_size, plan.kv_cache_dtype);
  plan.num_blocks = num_host_kv_blocks(config, model);
  plan.kv_bytes_total = mul_sat(plan.kv_bytes_per_block, static_cast<size_t>(plan.num_blocks));
  plan.max_tokens_in_cache = int64_t{plan.num_blocks} * config.block_size;
  plan.activation_bytes = activation_bytes(config, model);
  if (config.preemption_mode != PreemptionMode::kRecompute) {
    plan.swap_bytes = mul_sat(
        plan.kv_bytes_per_block,
        static_cast<size_t>(swap_pool_blocks(config.swap_space_bytes, plan.kv_bytes_per_block,
                                             plan.num_blocks, config.block_size)));
  }
  plan.total_bytes =
      add_sat(add_sat(add_sat(plan.weight_bytes, plan.kv_bytes_total), plan.activation_bytes),
              plan.swap_bytes);
  PVLLM_RETURN_IF_ERROR(
      check_pool_holds_a_sequence(config, model, plan.max_model_len, plan.num_blocks));
  const size_t memory = total_memory_bytes > 0 ? total_memory_bytes : physical_memory_bytes();
  if (memory > 0 && plan.total_bytes > memory) {
    return OutOfMemory("the engine needs " + mib(plan.total_bytes) + " (weights " +
                       mib(plan.weight_bytes) + ", KV pool " + mib(plan.kv_bytes_total) +
                       ", activations " + mib(plan.activation_bytes) + ", swap space " +
                       mib(plan.swap_bytes) + ") but the machine has " + mib(memory) +
                       "; lower kv_cache_bytes, num_kv_blocks or " + "max_num_batched_tokens");
  }
  *out = plan;
  return Status::Ok();
}

Status plan_host_memory(const EngineConfig& config, MemoryPlan* out) {
  ModelSummary summary;
  if (!config.random_weights.empty()) {
    PVLLM_RETURN_IF_ERROR(inspect_random_model(config.random_weights, DType::kBF16, &summary));
  } else {
    PVLLM_RETURN_IF_ERROR(inspect_model(config.model_path, &summary));
  }
  if (!config.quantize.empty()) {
    PVLLM_RETURN_IF_ERROR(quantized_weight_bytes(summary, config.quantize, &summary.weight_bytes));
  }
  return plan_host_memory(config, summary.config, summary.weight_bytes, out);
}

}  // namespace pvllm
