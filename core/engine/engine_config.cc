// EngineConfig validation and the memory estimate made before loading.
#include "core/engine/engine_config.h"

#include <algorithm>
#include <string>

#include "core/backend/backend_loader.h"
#include "core/backend/cuda_module_interface.h"
#include "core/engine/memory_plan.h"
#include "core/model/model.h"
#include "core/model/quantize_model.h"
#include "core/model/random_model.h"

namespace pvllm {

namespace {

bool is_power_of_two(int32_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The checkpoint's dtype as the CUDA backend's auto dtype reads it: that of
// the token embedding (the first tensor when none is named so).
DType checkpoint_dtype(const ModelSummary& summary) {
  for (const auto& t : summary.tensors) {
    if (t.name.find("embed") != std::string::npos || t.name.find("token_embd") != std::string::npos)
      return t.dtype;
  }
  return summary.tensors.empty() ? DType::kBF16 : summary.tensors.front().dtype;
}

// The GPU estimate: weights in 2-byte elements (4 in fp32), then the KV pool the CUDA
// backend would size from the device's free memory now (it measures again
// after allocating, so the engine's count may differ by the activation
// buffers and allocator slack, roughly).
Status estimate_cuda_memory(const EngineConfig& config, const ModelSummary& summary, int32_t device,
                            MemoryEstimate* out) {
  const ModelConfig& mc = summary.config;
  size_t weight_elems = 0;
  for (const auto& t : summary.tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    weight_elems += n;
  }
  const DType activation = cuda_activation_dtype(config.dtype, checkpoint_dtype(summary));
  const size_t elem = activation == DType::kF32 ? 4 : 2;
  out->weight_bytes = weight_elems > 0 ? weight_elems * elem : summary.weight_bytes;
  // The pool as the CUDA backend allocates it: the same resolution and the
  // same bytes per block (kernels/cuda/kv_pool.cc).
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;
  PVLLM_RETURN_IF_ERROR(cuda_kv_cache_dtype(config.kv_cache_dtype, activation, &kv_dtype));
  out->kv_bytes_per_block = kv_bytes_per_block(mc, config.block_size, kv_dtype);
  double budget = 0.0;
  if (config.num_kv_blocks == 0) {
    const CudaModule* module = nullptr;
    PVLLM_RETURN_IF_ERROR(CudaModule::get(&module));
    size_t free_bytes = 0, total_bytes = 0;
    PVLLM_RETURN_IF_ERROR(module->mem_info(device, &free_bytes, &total_bytes));
    // Activation buffers: a dozen rows of hidden / q / kv / 3 * intermediate
    // per batched token, plus fp32 logits for max_num_seqs rows.
    const size_t t = static_cast<size_t>(std::max(config.max_num_batched_tokens, 256));
    const size_t row = static_cast<size_t>(mc.hidden_size) * 5 +
                       static_cast<size_t>(mc.num_heads + 2 * mc.num_kv_heads) * mc.head_dim * 3 +
                       static_cast<size_t>(mc.intermediate_size) * 3;
    const size_t activations =
        t * row * elem +
        static_cast<size_t>(std::max(config.max_num_seqs, 256)) * mc.vocab_size * 4;
    budget = static_cast<double>(free_bytes) * config.gpu_memory_utilization -
             static_cast<double>(kCudaReservedBytes + out->weight_bytes + activations);
  }
  out->num_blocks =
      kv_pool_blocks(config.num_kv_blocks, budget, out->kv_bytes_per_block, config.block_size);
  out->kv_bytes_total = out->kv_bytes_per_block * static_cast<size_t>(out->num_blocks);
  out->max_tokens_in_cache = int64_t{out->num_blocks} * config.block_size;
  return Status::Ok();
}

}  // namespace

Status EngineConfig::validate() const {
  if (model_path.empty() && random_weights.empty()) {
    return InvalidArgument("model_path is empty (and no random_weights shape is given)");
  }
  DeviceSpec spec;
  PVLLM_RETURN_IF_ERROR(parse_device(device, &spec));
  if (!(gpu_memory_utilization > 0.0f && gpu_memory_utilization <= 1.0f)) {
    return InvalidArgument("gpu_memory_utilization must be in (0, 1], got " +
                           std::to_string(gpu_memory_utilization));
  }
  if (dtype < 0 || dtype > 3) {
    return InvalidArgument("dtype must be 0 (auto), 1 (bf16), 2 (fp16) or 3 (fp32), got " +
                           std::to_string(dtype));
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
  if (speculative != "off" && speculative != "ngram") {
    return InvalidArgument("speculative must be \"off\" or \"ngram\", got \"" + speculative + "\"");
  }
  if (speculative_tokens < 1 || speculative_tokens > kMaxSpeculativeTokens) {
    return InvalidArgument("speculative_tokens must be in [1, " +
                           std::to_string(kMaxSpeculativeTokens) + "], got " +
                           std::to_string(speculative_tokens));
  }
  if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 64) {
    return InvalidArgument("ngram sizes must satisfy 1 <= ngram_min <= ngram_max <= 64, got " +
                           std::to_string(ngram_min) + " and " + std::to_string(ngram_max));
  }
  if (speculative_max_running < 0) {
    return InvalidArgument("speculative_max_running must be >= 0, got " +
                           std::to_string(speculative_max_running));
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
  const auto mode = static_cast<int32_t>(preemption_mode);
  if (mode < 0 || mode > 2) {
    return InvalidArgument("preemption_mode must be recompute (0), swap (1) or auto (2), got " +
                           std::to_string(mode));
  }
  if (swap_space_bytes < 0) {
    return InvalidArgument("swap_space_bytes must be >= 0, got " +
                           std::to_string(swap_space_bytes));
  }
  if (kv_allocator != KvAllocator::kPaged && kv_allocator != KvAllocator::kContiguous) {
    return InvalidArgument("kv_allocator must be paged (0) or contiguous (1), got " +
                           std::to_string(static_cast<int32_t>(kv_allocator)));
  }
  if (num_threads < 0) {
    return InvalidArgument("num_threads must be >= 0, got " + std::to_string(num_threads));
  }
  PVLLM_RETURN_IF_ERROR(check_kv_cache_dtype(static_cast<int32_t>(kv_cache_dtype)));
  return Status::Ok();
}

int32_t num_host_kv_blocks(const EngineConfig& config, const ModelConfig& model) {
  KvCacheDtype dtype = KvCacheDtype::kF32;
  if (!host_kv_cache_dtype(config.kv_cache_dtype, &dtype).ok()) dtype = KvCacheDtype::kF32;
  return kv_pool_blocks(config.num_kv_blocks, static_cast<double>(config.kv_cache_bytes),
                        kv_bytes_per_block(model, config.block_size, dtype), config.block_size);
}

Status device_for_quantize(const EngineConfig& config, DeviceSpec* device) {
  if (config.quantize.empty() || device->kind == DeviceSpec::Kind::kCpu) return Status::Ok();
  if (device->kind == DeviceSpec::Kind::kCuda) {
    return Unsupported("quantize \"" + config.quantize +
                       "\": quantized weights run on the cpu backend, not on " + config.device);
  }
  *device = {DeviceSpec::Kind::kCpu, 0};
  return Status::Ok();
}

Status estimate_memory(const EngineConfig& config, MemoryEstimate* out) {
  PVLLM_RETURN_IF_ERROR(config.validate());
  ModelSummary summary;
  if (!config.random_weights.empty()) {
    PVLLM_RETURN_IF_ERROR(inspect_random_model(config.random_weights, DType::kBF16, &summary));
  } else {
    PVLLM_RETURN_IF_ERROR(inspect_model(config.model_path, &summary));
  }
  if (!config.quantize.empty()) {
    PVLLM_RETURN_IF_ERROR(quantized_weight_bytes(summary, config.quantize, &summary.weight_bytes));
  }
  out->weight_bytes = summary.weight_bytes;
  DeviceSpec spec;
  PVLLM_RETURN_IF_ERROR(parse_device(config.device, &spec));
  bool use_cuda = false;
  PVLLM_RETURN_IF_ERROR(resolve_cuda(spec, &use_cuda));
  if (!use_cuda) spec = {DeviceSpec::Kind::kCpu, 0};
  PVLLM_RETURN_IF_ERROR(device_for_quantize(config, &spec));
  use_cuda = spec.kind != DeviceSpec::Kind::kCpu;
  if (use_cuda) return estimate_cuda_memory(config, summary, spec.index, out);
  // The host engine: the very plan Engine::create checks before loading.
  MemoryPlan plan;
  PVLLM_RETURN_IF_ERROR(plan_host_memory(config, summary.config, summary.weight_bytes, &plan));
  out->kv_bytes_per_block = plan.kv_bytes_per_block;
  out->num_blocks = plan.num_blocks;
  out->kv_bytes_total = plan.kv_bytes_total;
  out->max_tokens_in_cache = plan.max_tokens_in_cache;
  out->activation_bytes = plan.activation_bytes;
  out->swap_bytes = plan.swap_bytes;
  return Status::Ok();
}

}  // namespace pvllm
