// EngineConfig validation and the memory estimate made before loading.
#include <string>

#include "core/engine.h"

namespace pvllm {

namespace {

bool is_power_of_two(int32_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

Status EngineConfig::validate() const {
  if (model_path.empty()) return InvalidArgument("model_path is empty");
  if (device != "auto" && device != "cpu" && device.rfind("cuda", 0) != 0) {
    return InvalidArgument("device must be \"cpu\", \"auto\", \"cuda\" or \"cuda:N\", got \"" +
                           device + "\"");
  }
  if (!is_power_of_two(block_size) || block_size < 8 || block_size > 256) {
    return InvalidArgument("block_size must be a power of two from 8 to 256, got " +
                           std::to_string(block_size));
  }
  if (num_kv_blocks < 0) {
    return InvalidArgument("num_kv_blocks must be >= 0, got " + std::to_string(num_kv_blocks));
  }
  if (num_kv_blocks == 0 && kv_cache_bytes <= 0) {
    return InvalidArgument("kv_cache_bytes must be > 0 when num_kv_blocks is 0, got " +
                           std::to_string(kv_cache_bytes));
  }
  if (max_num_seqs < 1) {
    return InvalidArgument("max_num_seqs must be >= 1, got " + std::to_string(max_num_seqs));
  }
  if (max_num_batched_tokens < 1) {
    return InvalidArgument("max_num_batched_tokens must be >= 1, got " +
                           std::to_string(max_num_batched_tokens));
  }
  if (max_model_len < 0) {
    return InvalidArgument("max_model_len must be >= 0, got " + std::to_string(max_model_len));
  }
  if (kv_allocator != KvAllocator::kPaged && kv_allocator != KvAllocator::kContiguous) {
    return InvalidArgument("kv_allocator must be paged (0) or contiguous (1), got " +
                           std::to_string(static_cast<int32_t>(kv_allocator)));
  }
  if (num_threads < 0) {
    return InvalidArgument("num_threads must be >= 0, got " + std::to_string(num_threads));
  }
  return Status::Ok();
}

Status estimate_memory(const EngineConfig& config, MemoryEstimate* out) {
  PVLLM_RETURN_IF_ERROR(config.validate());
  ModelSummary summary;
  PVLLM_RETURN_IF_ERROR(inspect_model(config.model_path, &summary));
  out->weight_bytes = summary.weight_bytes;
  out->kv_bytes_per_block = kv_bytes_per_block_f32(summary.config, config.block_size);
  if (config.num_kv_blocks > 0) {
    out->num_blocks = config.num_kv_blocks;
  } else {
    const uint64_t blocks = static_cast<uint64_t>(config.kv_cache_bytes) / out->kv_bytes_per_block;
    out->num_blocks =
        static_cast<int32_t>(std::min<uint64_t>(blocks, INT32_MAX / config.block_size));
  }
  out->kv_bytes_total = out->kv_bytes_per_block * static_cast<size_t>(out->num_blocks);
  out->max_tokens_in_cache = out->num_blocks * config.block_size;
  return Status::Ok();
}

}  // namespace pvllm
