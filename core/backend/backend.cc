#include "core/backend/backend.h"

#include "core/model/model_config.h"

namespace pvllm {

size_t kv_bytes_per_block_f32(const ModelConfig& config, int32_t block_size) {
  // K and V, every layer, block_size tokens of num_kv_heads * head_dim floats.
  return size_t{2} * static_cast<size_t>(config.num_layers) * static_cast<size_t>(block_size) *
         static_cast<size_t>(config.num_kv_heads) * static_cast<size_t>(config.head_dim) *
         sizeof(float);
}

size_t kv_bytes_per_block(const ModelConfig& config, int32_t block_size, size_t elem_bytes) {
  return kv_bytes_per_block_f32(config, block_size) / sizeof(float) * elem_bytes;
}

}  // namespace pvllm
