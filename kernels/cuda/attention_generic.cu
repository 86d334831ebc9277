#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_generic.h"
#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/kv_quant.cuh"
#include "kernels/cuda/common/prefill_tile.cuh"
#include "kernels/cuda/common/vec.cuh"

namespace pvllm::generic_attention {

namespace {

using cuda_ops::from_float;
using cuda_ops::KvCode;
using cuda_ops::to_float;
using cuda_ops::warp_max;
using cuda_ops::warp_sum;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kColumnsPerLane = kMaxHeadDim / 32;

// How a cache's rows are read: kPlain rows of T, or 8-bit codes with one
// fp16 scale per row (common/paged_kv.h). `chunk` is block * num_kv_heads +
// kv head, `offset` the token's row in the block.
enum class Rows : int { kPlain, kInt8, kFp8E4M3 };

template <typename T, Rows R>
struct RowReader {
  int32_t block_size;
  int32_t head_dim;

  __device__ const unsigned char* row(const void* cache, int64_t chunk, int offset) const {
    const auto* base = static_cast<const unsigned char*>(cache);
    if constexpr (R == Rows::kPlain) {
      return base + ((chunk * block_size + offset) * head_dim) * static_cast<int64_t>(sizeof(T));
    } else {
      return base + kv8_code_offset(chunk, offset, block_size, head_dim);
    }
  }
  // The row's scale: 1 for plain rows.
  __device__ float scale(const void* cache, int64_t chunk, int offset) const {
    if constexpr (R == Rows::kPlain) {
      return 1.0f;
    } else {
      const auto* base = static_cast<const unsigned char*>(cache);
      return cuda_ops::kv_scale_value(base + kv8_scale_offset(chunk, offset, block_size, head_dim));
    }
  }
  // Element d of a row, before its scale.
  __device__ float value(const unsigned char* row, int d) const {
    if constexpr (R == Rows::kPlain) {
      return to_float(reinterpret_cast<const T*>(row)[d]);
    } else if constexpr (R == Rows::kInt8) {
      return cuda_ops::kv_decode<KvCode::kInt8>(row[d]);
    } else {
      return cuda_ops::kv_decode<KvCode::kFp8E4M3>(row[d]);
    }
  }
};

// One warp: the attention of one query row of one head over the keys
// [first_key, last_key] of its sequence (none when first_key > last_key:
// the row is zeros). q_scaled is the warp's shared scratch of head_dim
// floats. Lane j scores key k0 + j of each run of 32; the output column d
// belongs to lane d % 32. An 8-bit row's scale multiplies K's dot product
// (the score) and V's softmax weight, as the CPU's paged attention does.
template <typename T, Rows R>
__device__ void attend_row(const T* __restrict__ q_row, T* __restrict__ out_row, const PagedKv& kv,
                           const int32_t* __restrict__ table, int kv_head, int first_key,
                           int last_key, float scale, float* q_scaled) {
  const int lane = threadIdx.x % 32;
  const int head_dim = kv.head_dim;
  const RowReader<T, R> rows{kv.block_size, head_dim};
  for (int d = lane; d < head_dim; d += 32) q_scaled[d] = to_float(q_row[d]) * scale;
  __syncwarp();
  auto chunk_of = [&](int key) {  // block * num_kv_heads + kv_head of key's row
    const int64_t block = table[key / kv.block_size];
    return block * kv.num_kv_heads + kv_head;
  };

  float acc[kColumnsPerLane];
#pragma unroll
  for (int i = 0; i < kColumnsPerLane; ++i) acc[i] = 0.0f;
  float row_max = -INFINITY;
  float row_sum = 0.0f;
  for (int k0 = first_key; k0 <= last_key; k0 += 32) {
    const int key = k0 + lane;
    const bool valid = key <= last_key;
    float s = -INFINITY;
    if (valid) {
      const int64_t chunk = chunk_of(key);
      const int offset = key % kv.block_size;
      const unsigned char* k_row = rows.row(kv.k_cache, chunk, offset);
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += q_scaled[d] * rows.value(k_row, d);
      s = dot * rows.scale(kv.k_cache, chunk, offset);
    }
    // Key k0 is valid, so the run's maximum is finite.
    const float new_max = fmaxf(row_max, warp_max(s));
    const float alpha = expf(row_max - new_max);  // 0 on the first run
    const float prob = valid ? expf(s - new_max) : 0.0f;
    row_sum = row_sum * alpha + warp_sum(prob);
    row_max = new_max;
#pragma unroll
    for (int i = 0; i < kColumnsPerLane; ++i) acc[i] *= alpha;
    const int run = min(32, last_key - k0 + 1);
    for (int j = 0; j < run; ++j) {
      const int64_t chunk = chunk_of(k0 + j);
      const int offset = (k0 + j) % kv.block_size;
      const float pj = __shfl_sync(0xffffffffu, prob, j) * rows.scale(kv.v_cache, chunk, offset);
      const unsigned char* v_row = rows.row(kv.v_cache, chunk, offset);
#pragma unroll
      for (int i = 0; i < kColumnsPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < head_dim) acc[i] += pj * rows.value(v_row, d);
      }
    }
  }
  const float inv = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
#pragma unroll
  for (int i = 0; i < kColumnsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < head_dim) out_row[d] = from_float<T>(acc[i] * inv);
  }
  __syncwarp();  // q_scaled is rewritten by the warp's next row
}

// grid: (num_seqs, ceil(num_heads / kWarps)); warp w takes head
// blockIdx.y * kWarps + w of sequence blockIdx.x, whose query sits at
// position context_len - 1.
template <typename T, Rows R>
__global__ void __launch_bounds__(kThreads) decode_kernel(const DecodeAttentionParams p) {
  __shared__ float q_scaled[kWarps][kMaxHeadDim];
  const int warp = threadIdx.x / 32;
  const int seq = blockIdx.x;
  const int head = blockIdx.y * kWarps + warp;
  if (head >= p.num_heads) return;
  const int group = p.num_heads / p.paged_kv.num_kv_heads;
  const int context_len = p.context_lens[seq];
  const int first_key = p.sliding_window > 0 ? max(0, context_len - p.sliding_window) : 0;
  const int64_t d = p.paged_kv.head_dim;
  const T* q_row = static_cast<const T*>(p.q) + seq * p.q_token_stride + head * d;
  T* out_row = static_cast<T*>(p.out) + (static_cast<int64_t>(seq) * p.num_heads + head) * d;
  const int32_t* table =
      p.paged_kv.block_tables + static_cast<int64_t>(seq) * p.paged_kv.max_blocks_per_seq;
  attend_row<T, R>(q_row, out_row, p.paged_kv, table, head / group, first_key, context_len - 1,
                   p.scale, q_scaled[warp]);
}

// grid: (num_work_items, num_heads): one query tile of the plan (see
// prefill_tile.cuh) for one head; warp w takes its rows w, w + kWarps, ...
template <typename T, Rows R>
__global__ void __launch_bounds__(kThreads) prefill_kernel(const PrefillAttentionParams p) {
  __shared__ float q_scaled[kWarps][kMaxHeadDim];
  const int warp = threadIdx.x / 32;
  const prefill_detail::PrefillTile tile = prefill_detail::prefill_tile(p);
  const int64_t d = p.paged_kv.head_dim;
  for (int r = warp; r < tile.num_rows; r += kWarps) {
    const int64_t token = tile.first_token + tile.q_row0 + r;
    const int pos = tile.first_pos + r;
    const int first_key = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
    const T* q_row = static_cast<const T*>(p.q) + token * p.q_token_stride + tile.head * d;
    T* out_row = static_cast<T*>(p.out) + (token * p.num_heads + tile.head) * d;
    attend_row<T, R>(q_row, out_row, p.paged_kv, tile.table, tile.kv_head, first_key, pos, p.scale,
                     q_scaled[warp]);
  }
}

// Launches kernel<T, R> for the params' dtype and the cache's rows.
template <Rows R>
int launch_decode(const DecodeAttentionParams& kp, dim3 grid, cudaStream_t s) {
  PVLLM_DISPATCH_DTYPE(kp.dtype, T, { decode_kernel<T, R><<<grid, kThreads, 0, s>>>(kp); });
  return cudaGetLastError();
}

template <Rows R>
int launch_prefill(const PrefillAttentionParams& kp, dim3 grid, cudaStream_t s) {
  PVLLM_DISPATCH_DTYPE(kp.dtype, T, { prefill_kernel<T, R><<<grid, kThreads, 0, s>>>(kp); });
  return cudaGetLastError();
}

Rows rows_of(const PagedKv& kv) {
  if (kv.cache_dtype == KvCacheDtype::kInt8) return Rows::kInt8;
  if (kv.cache_dtype == KvCacheDtype::kFp8E4M3) return Rows::kFp8E4M3;
  return Rows::kPlain;
}

bool valid_kv(const PagedKv& kv, int32_t num_heads) {
  return kv.num_kv_heads > 0 && kv.head_dim > 0 && kv.head_dim <= kMaxHeadDim &&
         kv.block_size > 0 && kv.max_blocks_per_seq > 0 && num_heads > 0 &&
         num_heads % kv.num_kv_heads == 0;
}

bool valid_stride(int64_t stride, int32_t num_heads, int32_t head_dim) {
  return stride == 0 || stride >= static_cast<int64_t>(num_heads) * head_dim;
}

}  // namespace

int decode(const DecodeAttentionParams& p, void* stream) {
  const PagedKv& kv = p.paged_kv;
  const bool sizes_ok = cuda_ops::is_kernel_dtype(p.dtype) && paged_kv_dtype_ok(kv, p.dtype) &&
                        valid_kv(kv, p.num_heads) && p.num_seqs >= 0 && p.max_context_len >= 0 &&
                        p.sliding_window >= 0 && p.num_splits_override >= 0 &&
                        p.num_heads <= 65535 * kWarps &&
                        valid_stride(p.q_token_stride, p.num_heads, kv.head_dim);
  if (!sizes_ok) return cudaErrorInvalidValue;
  if (p.num_seqs == 0) return cudaSuccess;
  if (p.q == nullptr || p.out == nullptr || kv.k_cache == nullptr || kv.v_cache == nullptr ||
      kv.block_tables == nullptr || p.context_lens == nullptr) {
    return cudaErrorInvalidValue;
  }
  DecodeAttentionParams kp = p;
  if (kp.q_token_stride == 0) kp.q_token_stride = static_cast<int64_t>(p.num_heads) * kv.head_dim;
  const dim3 grid(static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>((p.num_heads + kWarps - 1) / kWarps));
  const auto s = static_cast<cudaStream_t>(stream);
  switch (rows_of(kv)) {
    case Rows::kInt8:
      return launch_decode<Rows::kInt8>(kp, grid, s);
    case Rows::kFp8E4M3:
      return launch_decode<Rows::kFp8E4M3>(kp, grid, s);
    case Rows::kPlain:
      break;
  }
  return launch_decode<Rows::kPlain>(kp, grid, s);
}

int prefill(const PrefillAttentionParams& p, void* stream) {
  const PagedKv& kv = p.paged_kv;
  const bool sizes_ok = cuda_ops::is_kernel_dtype(p.dtype) && paged_kv_dtype_ok(kv, p.dtype) &&
                        valid_kv(kv, p.num_heads) && p.num_work_items >= 0 && p.num_seqs >= 0 &&
                        p.num_heads <= 65535 && p.sliding_window >= 0 &&
                        valid_stride(p.q_token_stride, p.num_heads, kv.head_dim);
  if (!sizes_ok) return cudaErrorInvalidValue;
  if (p.num_work_items == 0) return cudaSuccess;
  if (p.q == nullptr || p.out == nullptr || kv.k_cache == nullptr || kv.v_cache == nullptr ||
      kv.block_tables == nullptr || p.query_start == nullptr || p.context_lens == nullptr ||
      p.work_items == nullptr) {
    return cudaErrorInvalidValue;
  }
  PrefillAttentionParams kp = p;
  if (kp.q_token_stride == 0) kp.q_token_stride = static_cast<int64_t>(p.num_heads) * kv.head_dim;
  const dim3 grid(static_cast<unsigned>(p.num_work_items), static_cast<unsigned>(p.num_heads));
  const auto s = static_cast<cudaStream_t>(stream);
  switch (rows_of(kv)) {
    case Rows::kInt8:
      return launch_prefill<Rows::kInt8>(kp, grid, s);
    case Rows::kFp8E4M3:
      return launch_prefill<Rows::kFp8E4M3>(kp, grid, s);
    case Rows::kPlain:
      break;
  }
  return launch_prefill<Rows::kPlain>(kp, grid, s);
}

}  // namespace pvllm::generic_attention
