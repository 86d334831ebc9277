// The K/V cache's element type: what a backend stores in each KV block,
// and the bytes one block costs. One rule for every backend, the memory
// plan and pvllm_estimate_memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/base/tensor.h"

namespace pvllm {

// Values of pvllm_engine_params.kv_cache_dtype (the numbers are the ABI's).
enum class KvCacheDtype : int32_t {
  kAuto = 0,  // the backend's own: fp32 on the CPU, the activation dtype on CUDA
  kF16 = 1,   // IEEE half, rounded to nearest even
  kBF16 = 2,  // bfloat16, rounded to nearest even
  // 8-bit codes with one fp16 scale per (block, kv head, token): the
  // token's head_dim values of one kv head share it (absmax / 127 for
  // int8, absmax / 448 for fp8 e4m3).
  kInt8 = 3,
  kFp8E4M3 = 4,  // CUDA only
  kF32 = 5,
};

// "auto", "f16", "bf16", "int8", "fp8_e4m3", "f32".
const char* kv_cache_dtype_name(KvCacheDtype dtype);

// The names parse_kv_cache_dtype accepts, for messages.
const char* kv_cache_dtype_names();

// A name, case-insensitive: auto, f32 (fp32), f16 (fp16), bf16, int8, fp8_e4m3
// (fp8). Anything else is INVALID_ARGUMENT listing the names.
Status parse_kv_cache_dtype(std::string_view name, KvCacheDtype* out);

// INVALID_ARGUMENT unless `value` is one of the enum's numbers.
Status check_kv_cache_dtype(int32_t value);

// What a host (CPU) backend's KV pool stores for `requested`: kAuto is
// kF32; kFp8E4M3 (CUDA only) is UNSUPPORTED, naming the dtypes the CPU
// serves; a value outside the enum is INVALID_ARGUMENT.
Status host_kv_cache_dtype(KvCacheDtype requested, KvCacheDtype* out);

// What the CUDA backend's KV pool stores for `requested` when it runs in
// `activation` (kBF16, kF16 or kF32): kAuto is the activation dtype, kInt8
// and kFp8E4M3 are 8-bit codes with their scales, and kF16 / kBF16 / kF32
// only when they equal the activation dtype (otherwise UNSUPPORTED, naming
// what it serves); a value outside the enum, or an activation dtype the
// backend does not run in, is INVALID_ARGUMENT. The backend at create, the
// memory estimate for device "cuda" and the pool's size all resolve here.
Status cuda_kv_cache_dtype(KvCacheDtype requested, DType activation, KvCacheDtype* out);

bool kv_cache_dtype_is_8bit(KvCacheDtype dtype);

// Bytes of one (block, kv head) of K (or of V) in one layer: block_size rows
// of head_dim elements; 8-bit types add block_size fp16 scales after the
// codes. `dtype` must be resolved (not kAuto).
size_t kv_head_block_bytes(KvCacheDtype dtype, int32_t block_size, int32_t head_dim);

}  // namespace pvllm
