#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/prefill_attention.h"

namespace pvllm {

namespace {

namespace wmma = nvcuda::wmma;

using cuda_ops::aligned16;
using cuda_ops::cp_async16;
using cuda_ops::cp_async_wait_all;
using cuda_ops::from_float;

constexpr int kThreads = 128;  // 4 warps, 16 query rows each
constexpr int kQTile = kPrefillQueryTile;
constexpr int kKTile = 64;  // keys per iteration
constexpr int kFrag = 16;   // wmma 16x16x16
constexpr int kElemsPerVector = 8;

// Shared-memory layout of one CUDA block, in bytes. Rows are padded (8 halves
// or 4 floats) so neighbouring rows fall in different banks; every region
// and every 16-row fragment start stays 32-byte aligned as wmma requires.
template <int HEAD_DIM>
struct PrefillSmem {
  static constexpr int kQkvStride = HEAD_DIM + 8;  // halves per Q / K / V row
  static constexpr int kSStride = kKTile + 4;      // floats per score row
  static constexpr int kPStride = kKTile + 8;      // halves per probability row
  static constexpr int kOStride = HEAD_DIM + 4;    // floats per output row
  static constexpr int kQBytes = kQTile * kQkvStride * 2;
  static constexpr int kKvBytes = kKTile * kQkvStride * 2;
  static constexpr int kSBytes = kQTile * kSStride * 4;
  static constexpr int kPBytes = kQTile * kPStride * 2;
  static constexpr int kOBytes = kQTile * kOStride * 4;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kKvBytes;
  static constexpr int kSOffset = kVOffset + kKvBytes;
  static constexpr int kPOffset = kSOffset + kSBytes;
  static constexpr int kOOffset = kPOffset + kPBytes;
  static constexpr int kTotalBytes = kOOffset + kOBytes;  // 110 KiB at 128, 70 KiB at 64
  static_assert(kKOffset % 128 == 0 && kVOffset % 128 == 0 && kSOffset % 128 == 0 &&
                kPOffset % 128 == 0 && kOOffset % 128 == 0);
  // The per-block opt-in limit of sm_90 (227 KiB); launch_prefill opts in.
  static_assert(kTotalBytes <= 227 * 1024);
};

// grid: (num_work_items, num_heads); kThreads threads; PrefillSmem bytes of
// dynamic shared memory.
//
// FlashAttention-2 over the paged cache. A CUDA block owns kQTile query rows
// of one sequence's chunk for one head (its kv head is head / group); warp w
// owns rows [16w, 16w + 16). Per tile of kKTile keys, up to the last
// position any of its rows can see:
//   1. K and V rows are gathered through the block table into shared memory
//      (cp.async, 16-byte vectors; keys past the tile's range are zeroed so
//      a zero probability never meets a stale NaN);
//   2. S = Q K^T on tensor cores (bf16/fp16 in, fp32 out) into shared memory;
//   3. per row (two lanes per row): scale, causal (and window) mask, online softmax in
//      fp32; P is rounded to the input type for the next product, and the
//      row of the fp32 output accumulator is rescaled;
//   4. O += P V on tensor cores, the accumulator round-tripping through
//      shared memory (wmma fragments hide their element-to-row map, and the
//      rescale in step 3 needs it).
// Finally each row is divided by its sum and written out.
template <typename T, int HEAD_DIM, int BLOCK_SIZE>
__global__ void __launch_bounds__(kThreads)
    prefill_attention_kernel(const PrefillAttentionParams p) {
  using Smem = PrefillSmem<HEAD_DIM>;
  constexpr int kRowVectors = HEAD_DIM / kElemsPerVector;
  constexpr int kStride = Smem::kQkvStride;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_smem = reinterpret_cast<T*>(smem + Smem::kQOffset);          // [kQTile, kStride]
  T* k_smem = reinterpret_cast<T*>(smem + Smem::kKOffset);          // [kKTile, kStride]
  T* v_smem = reinterpret_cast<T*>(smem + Smem::kVOffset);          // [kKTile, kStride]
  float* s_smem = reinterpret_cast<float*>(smem + Smem::kSOffset);  // [kQTile, kSStride]
  T* p_smem = reinterpret_cast<T*>(smem + Smem::kPOffset);          // [kQTile, kPStride]
  float* o_smem = reinterpret_cast<float*>(smem + Smem::kOOffset);  // [kQTile, kOStride]

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int seq = p.work_items[2 * blockIdx.x];
  const int q_row0 = p.work_items[2 * blockIdx.x + 1];
  const int head = blockIdx.y;
  const int kv_head = head / (p.num_heads / p.paged_kv.num_kv_heads);

  const int first_token = p.query_start[seq];
  const int q_len = p.query_start[seq + 1] - first_token;
  const int context_len = p.context_lens[seq];
  const int num_rows = min(kQTile, q_len - q_row0);
  const int first_pos = context_len - q_len + q_row0;  // position of row 0 of the tile
  const int num_keys = first_pos + num_rows;           // keys up to the last row's position
  // The first key any row of the tile sees: 0, or the window start of row 0.
  // Keys (and block-table entries) before it are never read.
  const int key_begin = p.sliding_window > 0 ? max(0, first_pos - p.sliding_window + 1) : 0;
  const int32_t* __restrict__ table =
      p.paged_kv.block_tables + static_cast<int64_t>(seq) * p.paged_kv.max_blocks_per_seq;
  const T* __restrict__ q = static_cast<const T*>(p.q);
  const T* __restrict__ k_cache = static_cast<const T*>(p.paged_kv.k_cache);
  const T* __restrict__ v_cache = static_cast<const T*>(p.paged_kv.v_cache);

  // Q tile (rows past the chunk are zero) and a zero accumulator.
  for (int v = tid; v < kQTile * kRowVectors; v += kThreads) {
    const int r = v / kRowVectors;
    const int col = (v % kRowVectors) * kElemsPerVector;
    T* dst = q_smem + r * kStride + col;
    if (r < num_rows) {
      const int64_t token = first_token + q_row0 + r;
      cp_async16(dst, q + token * p.q_token_stride + static_cast<int64_t>(head) * HEAD_DIM + col);
    } else {
      *reinterpret_cast<int4*>(dst) = make_int4(0, 0, 0, 0);
    }
  }
  for (int i = tid; i < kQTile * Smem::kOStride; i += kThreads) o_smem[i] = 0.0f;

  // Softmax state of this lane's row: lanes 2r and 2r + 1 of warp w share
  // row 16w + r, each holding half of the key columns (and of the output
  // columns for the rescale), and keep identical copies of max and sum.
  const int row = warp * kFrag + lane / 2;
  const int half = lane % 2;
  const int row_pos = first_pos + row;
  const int row_first_key = p.sliding_window > 0 ? row_pos - p.sliding_window + 1 : 0;
  const bool row_valid = row < num_rows;
  float row_max = -INFINITY;
  float row_sum = 0.0f;

  const int num_key_tiles = (num_keys - key_begin + kKTile - 1) / kKTile;
  for (int kt = 0; kt < num_key_tiles; ++kt) {
    const int key0 = key_begin + kt * kKTile;
    // 1. Gather K and V rows of keys [key0, key0 + kKTile).
    for (int v = tid; v < kKTile * kRowVectors; v += kThreads) {
      const int r = v / kRowVectors;
      const int col = (v % kRowVectors) * kElemsPerVector;
      const int key = key0 + r;
      T* k_dst = k_smem + r * kStride + col;
      T* v_dst = v_smem + r * kStride + col;
      if (key < num_keys) {
        const int64_t block = table[key / BLOCK_SIZE];
        const int64_t src =
            ((block * p.paged_kv.num_kv_heads + kv_head) * BLOCK_SIZE + key % BLOCK_SIZE) *
                HEAD_DIM +
            col;
        cp_async16(k_dst, k_cache + src);
        cp_async16(v_dst, v_cache + src);
      } else {
        *reinterpret_cast<int4*>(k_dst) = make_int4(0, 0, 0, 0);
        *reinterpret_cast<int4*>(v_dst) = make_int4(0, 0, 0, 0);
      }
    }
    cp_async_wait_all();
    __syncthreads();

    // 2. S = Q K^T for this warp's 16 rows.
    const T* q_rows = q_smem + warp * kFrag * kStride;
#pragma unroll
    for (int n = 0; n < kKTile / kFrag; ++n) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> s_frag;
      wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
      for (int kk = 0; kk < HEAD_DIM / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major> a;
        // K^T as a column-major matrix is K row-major: element (d, key) at key * stride + d.
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::col_major> b;
        wmma::load_matrix_sync(a, q_rows + kk * kFrag, kStride);
        wmma::load_matrix_sync(b, k_smem + n * kFrag * kStride + kk * kFrag, kStride);
        wmma::mma_sync(s_frag, a, b, s_frag);
      }
      wmma::store_matrix_sync(s_smem + warp * kFrag * Smem::kSStride + n * kFrag, s_frag,
                              Smem::kSStride, wmma::mem_row_major);
    }
    __syncwarp();

    // 3. Online softmax of this lane's half row.
    constexpr int kHalfKeys = kKTile / 2;
    const float* s_row = s_smem + row * Smem::kSStride + half * kHalfKeys;
    float s[kHalfKeys];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kHalfKeys; ++c) {
      const int key = key0 + half * kHalfKeys + c;
      const bool visible = row_valid && key <= row_pos && key >= row_first_key;
      s[c] = visible ? s_row[c] * p.scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float new_max = fmaxf(row_max, tile_max);
    // A row that has seen no visible key yet (new_max = -inf) keeps p = 0.
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    const float alpha = row_max == -INFINITY ? 0.0f : expf(row_max - new_max);
    float tile_sum = 0.0f;
    T* p_row = p_smem + row * Smem::kPStride + half * kHalfKeys;
#pragma unroll
    for (int c = 0; c < kHalfKeys; ++c) {
      const float e = expf(s[c] - base);
      tile_sum += e;
      p_row[c] = from_float<T>(e);
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    row_sum = row_sum * alpha + tile_sum;
    row_max = new_max;
    float* o_row = o_smem + row * Smem::kOStride + half * (HEAD_DIM / 2);
#pragma unroll
    for (int d = 0; d < HEAD_DIM / 2; ++d) o_row[d] *= alpha;
    __syncwarp();

    // 4. O += P V for this warp's 16 rows.
    const T* p_rows = p_smem + warp * kFrag * Smem::kPStride;
    float* o_rows = o_smem + warp * kFrag * Smem::kOStride;
#pragma unroll
    for (int n = 0; n < HEAD_DIM / kFrag; ++n) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> o_frag;
      wmma::load_matrix_sync(o_frag, o_rows + n * kFrag, Smem::kOStride, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kKTile / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, p_rows + kk * kFrag, Smem::kPStride);
        wmma::load_matrix_sync(b, v_smem + kk * kFrag * kStride + n * kFrag, kStride);
        wmma::mma_sync(o_frag, a, b, o_frag);
      }
      wmma::store_matrix_sync(o_rows + n * kFrag, o_frag, Smem::kOStride, wmma::mem_row_major);
    }
    __syncthreads();  // K / V are overwritten by the next tile
  }

  // Normalise and write this lane's half row.
  if (row_valid) {
    const float inv = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
    const float* o_row = o_smem + row * Smem::kOStride + half * (HEAD_DIM / 2);
    const int64_t token = first_token + q_row0 + row;
    T* out =
        static_cast<T*>(p.out) + (token * p.num_heads + head) * HEAD_DIM + half * (HEAD_DIM / 2);
#pragma unroll
    for (int d = 0; d < HEAD_DIM / 2; d += 2) {
      T pair[2] = {from_float<T>(o_row[d] * inv), from_float<T>(o_row[d + 1] * inv)};
      *reinterpret_cast<uint32_t*>(out + d) = *reinterpret_cast<const uint32_t*>(pair);
    }
  }
}

template <typename T, int HEAD_DIM, int BLOCK_SIZE>
int launch_prefill(const PrefillAttentionParams& p, cudaStream_t stream) {
  constexpr int kSmemBytes = PrefillSmem<HEAD_DIM>::kTotalBytes;
  auto* kernel = &prefill_attention_kernel<T, HEAD_DIM, BLOCK_SIZE>;
  // Above 48 KiB dynamic shared memory needs an opt-in per kernel.
  const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(p.num_work_items), static_cast<unsigned>(p.num_heads));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

using PrefillLaunchFn = int (*)(const PrefillAttentionParams&, cudaStream_t);

}  // namespace

std::vector<int32_t> plan_prefill_attention(const int32_t* query_start, const int32_t* context_lens,
                                            int32_t num_seqs, int32_t sliding_window) {
  struct Tile {
    int32_t seq;
    int32_t q_row0;
    int64_t num_keys;
  };
  std::vector<Tile> tiles;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t q_len = query_start[s + 1] - query_start[s];
    for (int32_t r = 0; r < q_len; r += kPrefillQueryTile) {
      const int32_t last_row = std::min(q_len, r + kPrefillQueryTile) - 1;
      const int64_t first_pos = static_cast<int64_t>(context_lens[s]) - q_len + r;
      const int64_t key_begin =
          sliding_window > 0 ? std::max<int64_t>(0, first_pos - sliding_window + 1) : 0;
      tiles.push_back({s, r, first_pos + (last_row - r) + 1 - key_begin});
    }
  }
  // Longest first: the heaviest tiles start in the first wave.
  std::stable_sort(tiles.begin(), tiles.end(),
                   [](const Tile& a, const Tile& b) { return a.num_keys > b.num_keys; });
  std::vector<int32_t> items;
  items.reserve(tiles.size() * 2);
  for (const Tile& t : tiles) {
    items.push_back(t.seq);
    items.push_back(t.q_row0);
  }
  return items;
}

int pvllm_cuda_prefill_attention(const PrefillAttentionParams& p, void* stream) {
  const PagedKv& kv = p.paged_kv;
  // Every shape check precedes the first CUDA call. The one dispatch:
  // supported dtypes, head dims and block sizes become compile-time
  // constants; anything else returns cudaErrorInvalidValue.
  PrefillLaunchFn launch = nullptr;
  PVLLM_DISPATCH_HALF_DTYPE(p.dtype, T, PVLLM_DISPATCH_HEAD_DIM(kv.head_dim, HEAD_DIM, {
                              PVLLM_DISPATCH_BLOCK_SIZE(kv.block_size, BLOCK_SIZE, {
                                launch = &launch_prefill<T, HEAD_DIM, BLOCK_SIZE>;
                              });
                            }));
  const bool sizes_ok = p.num_work_items >= 0 && p.num_seqs >= 0 && p.num_heads > 0 &&
                        p.num_heads <= 65535 && kv.num_kv_heads > 0 &&
                        p.num_heads % kv.num_kv_heads == 0 && kv.max_blocks_per_seq > 0 &&
                        p.sliding_window >= 0 &&
                        (p.q_token_stride == 0 ||
                         (p.q_token_stride >= static_cast<int64_t>(p.num_heads) * kv.head_dim &&
                          p.q_token_stride % 8 == 0));
  if (!sizes_ok) return cudaErrorInvalidValue;
  if (p.num_work_items == 0) return cudaSuccess;
  const bool pointers_ok = p.q != nullptr && p.out != nullptr && kv.k_cache != nullptr &&
                           kv.v_cache != nullptr && p.query_start != nullptr &&
                           p.context_lens != nullptr && kv.block_tables != nullptr &&
                           p.work_items != nullptr && aligned16(p.q) && aligned16(p.out) &&
                           aligned16(kv.k_cache) && aligned16(kv.v_cache);
  if (!pointers_ok) return cudaErrorInvalidValue;
  PrefillAttentionParams kp = p;  // the kernel reads an explicit stride
  if (kp.q_token_stride == 0) kp.q_token_stride = static_cast<int64_t>(p.num_heads) * kv.head_dim;
  return launch(kp, static_cast<cudaStream_t>(stream));
}

}  // namespace pvllm
