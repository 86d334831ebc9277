#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_generic.h"
#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/decode_attention.h"

namespace pvllm {

namespace {

using cuda_ops::aligned16;
using cuda_ops::cp_async16;
using cuda_ops::cp_async_commit;
using cuda_ops::cp_async_wait;
using cuda_ops::from_float;
using cuda_ops::to_float;
using cuda_ops::warp_max;
using cuda_ops::warp_sum;

constexpr int kThreads = 128;  // 4 warps per CUDA block
constexpr int kWarps = kThreads / 32;
constexpr int kElemsPerVector = 8;  // one 16-byte load of fp16 / bf16
constexpr int kDotLanes = 8;        // lanes that share one q.k dot product
constexpr int kDotGroups = kThreads / kDotLanes;
constexpr int kMaxUnitsPerThread = 2;  // P.V work units per thread (see below)

// Sizes fixed by the head dim. A tile is the run of tokens staged in shared
// memory at once: 8 KiB of K and 8 KiB of V, double-buffered, so a block
// keeps 16 KiB of loads in flight while it computes on the previous tile.
template <int HEAD_DIM>
struct DecodeShape {
  static constexpr int kRowVectors = HEAD_DIM / kElemsPerVector;   // 16-byte vectors per row
  static constexpr int kTileTokens = 4096 / HEAD_DIM;              // 32 or 64
  static constexpr int kTileVectors = kTileTokens * kRowVectors;   // 512
  static constexpr int kVectorsPerLane = kRowVectors / kDotLanes;  // 2 or 1
};

// ---- fp16 / bf16 <-> fp32, eight elements (16 bytes) at a time ----------

__device__ inline void load_float8(const __half* p, float (&f)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __half22float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

__device__ inline void load_float8(const __nv_bfloat16* p, float (&f)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

__device__ inline void store_float8(__half* p, const float (&f)[8]) {
  uint4 raw;
  __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

__device__ inline void store_float8(__nv_bfloat16* p, const float (&f)[8]) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// grid: (num_splits, num_kv_heads, num_seqs); kThreads threads.
//
// One CUDA block handles the `group` query heads of one kv head over one
// partition of one sequence's context, one tile of tokens at a time:
//   1. stage the tile's K and V rows in shared memory (cp.async, 16-byte
//      vectors, positions mapped through the block table; the next tile's
//      loads are issued before this tile is computed);
//   2. scores: eight lanes per (head, token) dot product, so a K row is read
//      from shared memory by one 128-byte phase and used for every head of
//      the group;
//   3. online softmax per head in fp32 (one warp per head);
//   4. P.V: a work unit is (head, 16-byte column chunk, token parity part);
//      each thread accumulates up to kMaxUnitsPerThread units in registers,
//      rescaled by the softmax correction every tile.
// At the end the token parts are summed through shared memory and the block
// writes either the normalised output (one split) or its unnormalised
// partial output with its max and sum (split path, merged later).
template <typename T, int HEAD_DIM, int BLOCK_SIZE>
__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const DecodeAttentionParams p, int32_t num_splits) {
  using Shape = DecodeShape<HEAD_DIM>;
  constexpr int kTile = Shape::kTileTokens;
  constexpr int kRowVectors = Shape::kRowVectors;

  // [stage][0 = K, 1 = V][token, head_dim]; reused for the final reduction.
  __shared__ __align__(16) T kv_smem[2][2][kTile * HEAD_DIM];
  __shared__ __align__(
      16) float q_smem[kDecodeMaxGroupSize * HEAD_DIM];  // [group, head_dim], scaled
  __shared__ float p_smem[kDecodeMaxGroupSize][kTile];   // scores, then probabilities
  __shared__ float m_smem[kDecodeMaxGroupSize];          // running max per head
  __shared__ float l_smem[kDecodeMaxGroupSize];          // running sum per head
  __shared__ float alpha_smem[kDecodeMaxGroupSize];      // this tile's rescale factor per head

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int seq = blockIdx.z;
  const int tid = threadIdx.x;
  const int group = p.num_heads / p.paged_kv.num_kv_heads;
  const int first_head = kv_head * group;

  const T* __restrict__ q = static_cast<const T*>(p.q);
  const T* __restrict__ k_cache = static_cast<const T*>(p.paged_kv.k_cache);
  const T* __restrict__ v_cache = static_cast<const T*>(p.paged_kv.v_cache);
  const int32_t* __restrict__ table =
      p.paged_kv.block_tables + static_cast<int64_t>(seq) * p.paged_kv.max_blocks_per_seq;

  // This block's partition [begin, end) of the attended positions
  // [start, context_len): the whole context, or its last sliding_window
  // positions. Nothing before `start` is read, block-table entries included.
  const int context_len = p.context_lens[seq];
  const int start = p.sliding_window > 0 ? max(0, context_len - p.sliding_window) : 0;
  int begin = start;
  int end = context_len;
  if (num_splits > 1) {
    const int per_split = (context_len - start + num_splits - 1) / num_splits;
    begin = min(context_len, start + split * per_split);
    end = min(context_len, begin + per_split);
  }
  const int num_tiles = (end - begin + kTile - 1) / kTile;

  for (int i = tid; i < group * HEAD_DIM; i += kThreads) {
    q_smem[i] = to_float(q[static_cast<int64_t>(seq) * p.q_token_stride +
                           static_cast<int64_t>(first_head) * HEAD_DIM + i]) *
                p.scale;
  }
  if (tid < group) {
    m_smem[tid] = -INFINITY;
    l_smem[tid] = 0.0f;
  }

  auto load_tile = [&](int stage, int tile_start) {
    for (int v = tid; v < Shape::kTileVectors; v += kThreads) {
      const int t = v / kRowVectors;
      const int chunk = v % kRowVectors;
      const int pos = tile_start + t;
      if (pos >= end) continue;  // never read: masked in the scores, skipped in P.V
      const int64_t block = table[pos / BLOCK_SIZE];
      const int64_t src =
          ((block * p.paged_kv.num_kv_heads + kv_head) * BLOCK_SIZE + pos % BLOCK_SIZE) * HEAD_DIM +
          chunk * kElemsPerVector;
      const int dst = t * HEAD_DIM + chunk * kElemsPerVector;
      cp_async16(&kv_smem[stage][0][dst], k_cache + src);
      cp_async16(&kv_smem[stage][1][dst], v_cache + src);
    }
  };

  // P.V work units: (head g, column chunk) items, times `parts` interleaved
  // token subsets when there are fewer items than threads.
  const int num_items = group * kRowVectors;
  const int parts = max(1, kThreads / num_items);
  const int num_units = num_items * parts;
  float acc[kMaxUnitsPerThread][kElemsPerVector];
#pragma unroll
  for (int u = 0; u < kMaxUnitsPerThread; ++u) {
#pragma unroll
    for (int e = 0; e < kElemsPerVector; ++e) acc[u][e] = 0.0f;
  }

  if (num_tiles > 0) load_tile(0, begin);
  cp_async_commit();
  __syncthreads();  // q_smem, m_smem, l_smem ready

  const int warp = tid / 32;
  const int lane = tid % 32;
  const int dot_lane = tid % kDotLanes;
  const int dot_group = tid / kDotLanes;

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    const int tile_start = begin + tile * kTile;
    const int tile_len = min(kTile, end - tile_start);
    if (tile + 1 < num_tiles) load_tile(stage ^ 1, tile_start + kTile);
    cp_async_commit();  // possibly empty, so wait_group<1> always means "this tile landed"
    cp_async_wait<1>();
    __syncthreads();
    const T* k_tile = kv_smem[stage][0];
    const T* v_tile = kv_smem[stage][1];

    // 2. Scores. group * kTile is a multiple of kDotGroups, so every lane of
    // a warp runs the same number of iterations (the shuffles need it).
    for (int item = dot_group; item < group * kTile; item += kDotGroups) {
      const int g = item / kTile;
      const int t = item % kTile;
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < Shape::kVectorsPerLane; ++i) {
        const int col = (dot_lane + i * kDotLanes) * kElemsPerVector;
        float kf[8];
        load_float8(k_tile + t * HEAD_DIM + col, kf);
        const float* qf = q_smem + g * HEAD_DIM + col;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(qf[e], kf[e], dot);
      }
#pragma unroll
      for (int o = kDotLanes / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      if (dot_lane == 0) p_smem[g][t] = t < tile_len ? dot : -INFINITY;
    }
    __syncthreads();

    // 3. Online softmax, one warp per head. The tile holds at least one
    // valid token, so the tile max is finite.
    for (int g = warp; g < group; g += kWarps) {
      float s[kTile / 32];
      float tile_max = -INFINITY;
#pragma unroll
      for (int i = 0; i < kTile / 32; ++i) {
        s[i] = p_smem[g][lane + 32 * i];
        tile_max = fmaxf(tile_max, s[i]);
      }
      tile_max = warp_max(tile_max);
      const float m_old = m_smem[g];
      const float m_new = fmaxf(m_old, tile_max);
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kTile / 32; ++i) {
        const float e = expf(s[i] - m_new);  // exp(-inf) = 0 for masked tokens
        p_smem[g][lane + 32 * i] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      __syncwarp();
      if (lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
        alpha_smem[g] = alpha;
        l_smem[g] = l_smem[g] * alpha + sum;
        m_smem[g] = m_new;
      }
    }
    __syncthreads();

    // 4. P.V into the registers.
#pragma unroll
    for (int k = 0; k < kMaxUnitsPerThread; ++k) {
      const int unit = tid + k * kThreads;
      if (unit < num_units) {
        const int item = unit % num_items;
        const int part = unit / num_items;
        const int g = item / kRowVectors;
        const int col = (item % kRowVectors) * kElemsPerVector;
        const float alpha = alpha_smem[g];
#pragma unroll
        for (int e = 0; e < kElemsPerVector; ++e) acc[k][e] *= alpha;
        for (int t = part; t < tile_len; t += parts) {
          const float pr = p_smem[g][t];
          float vf[8];
          load_float8(v_tile + t * HEAD_DIM + col, vf);
#pragma unroll
          for (int e = 0; e < kElemsPerVector; ++e) acc[k][e] = fmaf(pr, vf[e], acc[k][e]);
        }
      }
    }
    __syncthreads();  // the next iteration's loads overwrite the stage read here
  }
  cp_async_wait<0>();
  __syncthreads();

  // Sum the token parts: red[unit] with unit = part * num_items + item.
  float* red = reinterpret_cast<float*>(&kv_smem[0][0][0]);  // [num_units, 8], <= 8 KiB
#pragma unroll
  for (int k = 0; k < kMaxUnitsPerThread; ++k) {
    const int unit = tid + k * kThreads;
    if (unit < num_units) {
#pragma unroll
      for (int e = 0; e < kElemsPerVector; ++e) red[unit * kElemsPerVector + e] = acc[k][e];
    }
  }
  __syncthreads();

  for (int item = tid; item < num_items; item += kThreads) {
    float sum[8];
#pragma unroll
    for (int e = 0; e < kElemsPerVector; ++e) sum[e] = 0.0f;
    for (int part = 0; part < parts; ++part) {
#pragma unroll
      for (int e = 0; e < kElemsPerVector; ++e)
        sum[e] += red[(part * num_items + item) * kElemsPerVector + e];
    }
    const int g = item / kRowVectors;
    const int col = (item % kRowVectors) * kElemsPerVector;
    const int64_t head_row = static_cast<int64_t>(seq) * p.num_heads + first_head + g;
    if (num_splits == 1) {
      const float l = l_smem[g];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // empty context: zeros
#pragma unroll
      for (int e = 0; e < kElemsPerVector; ++e) sum[e] *= inv;
      store_float8(static_cast<T*>(p.out) + head_row * HEAD_DIM + col, sum);
    } else {
      float* partial_out = static_cast<float*>(p.workspace);
      const int64_t slot = head_row * num_splits + split;
      float4* dst = reinterpret_cast<float4*>(partial_out + slot * HEAD_DIM + col);
      dst[0] = make_float4(sum[0], sum[1], sum[2], sum[3]);
      dst[1] = make_float4(sum[4], sum[5], sum[6], sum[7]);
      if (col == 0) {
        const int64_t num_slots = static_cast<int64_t>(p.num_seqs) * p.num_heads * num_splits;
        float* partial_max = partial_out + num_slots * HEAD_DIM;
        float* partial_sum = partial_max + num_slots;
        partial_max[slot] = m_smem[g];
        partial_sum[slot] = l_smem[g];
      }
    }
  }
}

// grid: (num_heads, num_seqs); HEAD_DIM threads, one output element each.
// out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s with M = max_s m_s;
// empty splits carry m = -inf, l = 0 and drop out; all empty gives zeros.
template <typename T, int HEAD_DIM>
__global__ void __launch_bounds__(HEAD_DIM)
    decode_merge_kernel(const DecodeAttentionParams p, int32_t num_splits) {
  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int d = threadIdx.x;
  const int64_t head_row = static_cast<int64_t>(seq) * p.num_heads + head;
  const int64_t num_slots = static_cast<int64_t>(p.num_seqs) * p.num_heads * num_splits;
  const float* partial_out = static_cast<const float*>(p.workspace);
  const float* partial_max = partial_out + num_slots * HEAD_DIM;
  const float* partial_sum = partial_max + num_slots;
  const int64_t first = head_row * num_splits;

  float max_all = -INFINITY;
  for (int s = 0; s < num_splits; ++s) max_all = fmaxf(max_all, partial_max[first + s]);
  float numer = 0.0f;
  float denom = 0.0f;
  if (max_all != -INFINITY) {
    for (int s = 0; s < num_splits; ++s) {
      const float m = partial_max[first + s];
      if (m == -INFINITY) continue;
      const float w = expf(m - max_all);
      denom = fmaf(w, partial_sum[first + s], denom);
      numer = fmaf(w, partial_out[(first + s) * HEAD_DIM + d], numer);
    }
  }
  const float value = denom > 0.0f ? numer / denom : 0.0f;
  static_cast<T*>(p.out)[head_row * HEAD_DIM + d] = from_float<T>(value);
}

template <typename T, int HEAD_DIM, int BLOCK_SIZE>
int launch_decode(const DecodeAttentionParams& p, int32_t num_splits, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(num_splits), static_cast<unsigned>(p.paged_kv.num_kv_heads),
                  static_cast<unsigned>(p.num_seqs));
  decode_attention_kernel<T, HEAD_DIM, BLOCK_SIZE><<<grid, kThreads, 0, stream>>>(p, num_splits);
  if (num_splits > 1) {
    const dim3 merge_grid(static_cast<unsigned>(p.num_heads), static_cast<unsigned>(p.num_seqs));
    decode_merge_kernel<T, HEAD_DIM><<<merge_grid, HEAD_DIM, 0, stream>>>(p, num_splits);
  }
  return cudaGetLastError();
}

using DecodeLaunchFn = int (*)(const DecodeAttentionParams&, int32_t, cudaStream_t);

bool valid_sizes(const DecodeAttentionParams& p) {
  const PagedKv& kv = p.paged_kv;
  return p.num_seqs >= 0 && p.num_seqs <= 65535 && p.num_heads > 0 && kv.num_kv_heads > 0 &&
         kv.num_kv_heads <= 65535 && p.num_heads % kv.num_kv_heads == 0 &&
         p.num_heads / kv.num_kv_heads <= kDecodeMaxGroupSize && kv.max_blocks_per_seq > 0 &&
         p.max_context_len >= 0 && p.num_splits_override >= 0 && p.sliding_window >= 0 &&
         (p.q_token_stride == 0 ||
          (p.q_token_stride >= static_cast<int64_t>(p.num_heads) * kv.head_dim &&
           p.q_token_stride % 8 == 0));
}

bool valid_pointers(const DecodeAttentionParams& p) {
  const PagedKv& kv = p.paged_kv;
  return p.q != nullptr && p.out != nullptr && kv.k_cache != nullptr && kv.v_cache != nullptr &&
         kv.block_tables != nullptr && p.context_lens != nullptr && aligned16(p.q) &&
         aligned16(p.out) && aligned16(kv.k_cache) && aligned16(kv.v_cache);
}

// SM count of each device, queried once (0 = not yet known).
constexpr int kMaxDevices = 64;
constexpr int kAssumedSmCount = 132;  // H100 / H200, when the query fails
std::atomic<int> g_sm_count[kMaxDevices];

int sm_count() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();  // clear it, so a later launch reports its own error
    return kAssumedSmCount;
  }
  int cached = g_sm_count[device].load(std::memory_order_relaxed);
  if (cached > 0) return cached;
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      count <= 0) {
    cudaGetLastError();
    return kAssumedSmCount;
  }
  g_sm_count[device].store(count, std::memory_order_relaxed);
  return count;
}

}  // namespace

int32_t pvllm_cuda_decode_attention_num_splits(const DecodeAttentionParams& p) {
  if (generic_attention::serves(p.dtype, p.paged_kv)) return 1;  // never splits
  if (p.num_splits_override > 0) return std::min(p.num_splits_override, kDecodeMaxSplits);
  // Enough CUDA blocks to keep every SM streaming: a block has 16 KiB of
  // loads in flight and about four fit on an SM, so aim for four per SM.
  const int64_t target_blocks = 4 * static_cast<int64_t>(sm_count());
  const int64_t work = static_cast<int64_t>(p.num_seqs) * std::max(p.paged_kv.num_kv_heads, 1);
  if (work <= 0 || work >= target_blocks) return 1;
  const int64_t wanted = (target_blocks + work - 1) / work;
  // A sliding window bounds the tokens any query reads.
  const int64_t max_tokens = p.sliding_window > 0
                                 ? std::min<int64_t>(p.max_context_len, p.sliding_window)
                                 : p.max_context_len;
  const int64_t by_length =
      std::max<int64_t>(1, (max_tokens + kDecodeMinTokensPerSplit - 1) / kDecodeMinTokensPerSplit);
  return static_cast<int32_t>(std::min<int64_t>({wanted, by_length, kDecodeMaxSplits}));
}

size_t pvllm_cuda_decode_attention_workspace_bytes(const DecodeAttentionParams& p) {
  const int32_t num_splits = pvllm_cuda_decode_attention_num_splits(p);
  if (num_splits <= 1) return 0;
  const size_t num_slots = static_cast<size_t>(std::max(p.num_seqs, 0)) *
                           static_cast<size_t>(std::max(p.num_heads, 0)) * num_splits;
  return num_slots * (static_cast<size_t>(std::max(p.paged_kv.head_dim, 0)) + 2) * sizeof(float);
}

int pvllm_cuda_decode_attention(const DecodeAttentionParams& p, void* stream) {
  if (generic_attention::serves(p.dtype, p.paged_kv)) {
    return generic_attention::decode(p, stream);
  }
  if (!paged_kv_dtype_ok(p.paged_kv, p.dtype)) return cudaErrorInvalidValue;
  // Every shape check precedes the first CUDA call. The one dispatch: the
  // supported dtypes, head dims and block sizes become compile-time
  // constants of the kernel; anything else returns cudaErrorInvalidValue.
  DecodeLaunchFn launch = nullptr;
  PVLLM_DISPATCH_HALF_DTYPE(p.dtype, T, PVLLM_DISPATCH_HEAD_DIM(p.paged_kv.head_dim, HEAD_DIM, {
                              PVLLM_DISPATCH_BLOCK_SIZE(p.paged_kv.block_size, BLOCK_SIZE, {
                                launch = &launch_decode<T, HEAD_DIM, BLOCK_SIZE>;
                              });
                            }));
  if (!valid_sizes(p)) return cudaErrorInvalidValue;
  if (p.num_seqs == 0) return cudaSuccess;
  if (!valid_pointers(p)) return cudaErrorInvalidValue;
  const int32_t num_splits = pvllm_cuda_decode_attention_num_splits(p);
  if (num_splits > 1 && (p.workspace == nullptr || !aligned16(p.workspace))) {
    return cudaErrorInvalidValue;
  }
  DecodeAttentionParams kp = p;  // the kernels read an explicit stride
  if (kp.q_token_stride == 0) {
    kp.q_token_stride = static_cast<int64_t>(p.num_heads) * p.paged_kv.head_dim;
  }
  return launch(kp, num_splits, static_cast<cudaStream_t>(stream));
}

}  // namespace pvllm
