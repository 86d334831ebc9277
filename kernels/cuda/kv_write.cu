#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/kv_quant.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/kv_write.h"

namespace pvllm {

namespace {

using cuda_ops::aligned16;
using cuda_ops::KvCode;

constexpr int kThreadsPerBlock = 128;

// grid: (num_tokens). Each CUDA block writes one token's row of every kv
// head; thread i moves 16-byte vector i of the row (kv head i / vectors per
// head), looping when the row is longer than the block. The dtype does not
// matter: elements are copied bit for bit, 16 bytes at a time.
__global__ void write_kv_kernel(
    const int4* __restrict__ k,  // [num_tokens, k_stride] of which row_vectors are read
    const int4* __restrict__ v,  // [num_tokens, v_stride] of which row_vectors are read
    int4* __restrict__ k_cache,  // [num_blocks, num_kv_heads, block_size, head_vectors]
    int4* __restrict__ v_cache,  // same as k_cache
    const int64_t* __restrict__ slot_mapping,  // [num_tokens]
    int32_t num_kv_heads, int32_t head_vectors, int32_t block_size, int64_t k_stride,
    int64_t v_stride) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) return;  // padding row
  const int64_t block = slot / block_size;
  const int64_t offset = slot % block_size;
  const int32_t row_vectors = num_kv_heads * head_vectors;
  for (int32_t i = threadIdx.x; i < row_vectors; i += blockDim.x) {
    const int32_t kv_head = i / head_vectors;
    const int32_t chunk = i % head_vectors;
    const int64_t dst =
        ((block * num_kv_heads + kv_head) * block_size + offset) * head_vectors + chunk;
    k_cache[dst] = k[token * k_stride + i];
    v_cache[dst] = v[token * v_stride + i];
  }
}

// grid: (num_tokens). 8-bit caches: warp w of the CUDA block encodes the
// rows (K of kv head r, then V of kv head r - num_kv_heads) r = w, w + 4,
// ... of its token: the row's absmax over the warp, its fp16 scale, then one
// code per value (common/kv_quant.cuh).
template <typename T, KvCode C>
__global__ void write_kv8_kernel(
    const T* __restrict__ k,                   // [num_tokens, k_stride] of which kvh * d are read
    const T* __restrict__ v,                   // [num_tokens, v_stride] of which kvh * d are read
    unsigned char* __restrict__ k_cache,       // [num_blocks, num_kv_heads, kv8_head_bytes]
    unsigned char* __restrict__ v_cache,       // same as k_cache
    const int64_t* __restrict__ slot_mapping,  // [num_tokens]
    int32_t num_kv_heads, int32_t head_dim, int32_t block_size, int64_t k_stride,
    int64_t v_stride) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) return;  // padding row
  const int64_t block = slot / block_size;
  const int64_t offset = slot % block_size;
  const int lane = threadIdx.x % 32;
  for (int32_t r = threadIdx.x / 32; r < 2 * num_kv_heads; r += blockDim.x / 32) {
    const bool is_v = r >= num_kv_heads;
    const int32_t kv_head = is_v ? r - num_kv_heads : r;
    const T* src = (is_v ? v + token * v_stride : k + token * k_stride) +
                   static_cast<int64_t>(kv_head) * head_dim;
    unsigned char* cache = is_v ? v_cache : k_cache;
    const int64_t chunk = block * num_kv_heads + kv_head;
    float absmax = 0.0f;  // fmaxf ignores NaN, as the CPU's comparison does
    for (int32_t d = lane; d < head_dim; d += 32)
      absmax = fmaxf(absmax, fabsf(cuda_ops::to_float(src[d])));
    absmax = cuda_ops::warp_max(absmax);
    uint16_t scale = 0;
    const float inverse = cuda_ops::kv_row_scale<C>(absmax, &scale);
    unsigned char* codes = cache + kv8_code_offset(chunk, offset, block_size, head_dim);
    for (int32_t d = lane; d < head_dim; d += 32) {
      codes[d] = cuda_ops::kv_encode<C>(cuda_ops::to_float(src[d]), inverse);
    }
    if (lane == 0) {
      *reinterpret_cast<uint16_t*>(cache + kv8_scale_offset(chunk, offset, block_size, head_dim)) =
          scale;
    }
  }
}

template <KvCode C>
int launch_write_kv8(const KvWriteParams& p, int64_t k_stride, int64_t v_stride,
                     cudaStream_t stream) {
  const PagedKv& kv = p.paged_kv;
  PVLLM_DISPATCH_DTYPE(p.dtype, T, {
    write_kv8_kernel<T, C><<<static_cast<unsigned>(p.num_tokens), kThreadsPerBlock, 0, stream>>>(
        static_cast<const T*>(p.k), static_cast<const T*>(p.v),
        static_cast<unsigned char*>(kv.k_cache), static_cast<unsigned char*>(kv.v_cache),
        p.slot_mapping, kv.num_kv_heads, kv.head_dim, kv.block_size, k_stride, v_stride);
  });
  return cudaGetLastError();
}

// The 8-bit write: rows are read an element at a time, so only the
// elements' own alignment is asked.
int write_kv8(const KvWriteParams& p, void* stream) {
  const PagedKv& kv = p.paged_kv;
  const int64_t row = static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim;
  auto stride_ok = [&](int64_t s) { return s == 0 || s >= row; };
  const bool valid = cuda_ops::is_kernel_dtype(p.dtype) && p.num_tokens >= 0 &&
                     kv.num_kv_heads > 0 && kv.head_dim > 0 && kv.block_size > 0 &&
                     stride_ok(p.k_token_stride) && stride_ok(p.v_token_stride);
  if (!valid) return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;
  const bool pointers_ok = p.k != nullptr && p.v != nullptr && kv.k_cache != nullptr &&
                           kv.v_cache != nullptr && p.slot_mapping != nullptr &&
                           aligned16(kv.k_cache) && aligned16(kv.v_cache);
  if (!pointers_ok) return cudaErrorInvalidValue;
  const int64_t k_stride = p.k_token_stride == 0 ? row : p.k_token_stride;
  const int64_t v_stride = p.v_token_stride == 0 ? row : p.v_token_stride;
  const auto s = static_cast<cudaStream_t>(stream);
  return kv.cache_dtype == KvCacheDtype::kInt8
             ? launch_write_kv8<KvCode::kInt8>(p, k_stride, v_stride, s)
             : launch_write_kv8<KvCode::kFp8E4M3>(p, k_stride, v_stride, s);
}

}  // namespace

int pvllm_cuda_write_kv(const KvWriteParams& p, void* stream) {
  const PagedKv& kv = p.paged_kv;
  if (!paged_kv_dtype_ok(kv, p.dtype)) return cudaErrorInvalidValue;
  if (paged_kv_is_8bit(kv)) return write_kv8(p, stream);
  // Shape checks first, before any CUDA call, so bad input is reported the
  // same way with or without a device.
  const int64_t row = static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim;
  const int kElemsPerVector = cuda_ops::elems_per_vector(p.dtype);  // 16 bytes
  auto stride_ok = [&](int64_t s) { return s == 0 || (s >= row && s % kElemsPerVector == 0); };
  const bool valid = cuda_ops::is_kernel_dtype(p.dtype) && p.num_tokens >= 0 &&
                     kv.num_kv_heads > 0 && kv.head_dim > 0 && kv.head_dim % kElemsPerVector == 0 &&
                     kv.block_size > 0 && stride_ok(p.k_token_stride) &&
                     stride_ok(p.v_token_stride);
  if (!valid) return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;
  const bool pointers_ok = p.k != nullptr && p.v != nullptr && kv.k_cache != nullptr &&
                           kv.v_cache != nullptr && p.slot_mapping != nullptr && aligned16(p.k) &&
                           aligned16(p.v) && aligned16(kv.k_cache) && aligned16(kv.v_cache);
  if (!pointers_ok) return cudaErrorInvalidValue;

  const int32_t head_vectors = kv.head_dim / kElemsPerVector;
  const int64_t k_stride = (p.k_token_stride == 0 ? row : p.k_token_stride) / kElemsPerVector;
  const int64_t v_stride = (p.v_token_stride == 0 ? row : p.v_token_stride) / kElemsPerVector;
  write_kv_kernel<<<static_cast<unsigned>(p.num_tokens), kThreadsPerBlock, 0,
                    static_cast<cudaStream_t>(stream)>>>(
      static_cast<const int4*>(p.k), static_cast<const int4*>(p.v), static_cast<int4*>(kv.k_cache),
      static_cast<int4*>(kv.v_cache), p.slot_mapping, kv.num_kv_heads, head_vectors, kv.block_size,
      k_stride, v_stride);
  return cudaGetLastError();
}

}  // namespace pvllm
