// PrefillVariant::kWmma: the first prefill attention kernel. wmma 16x16x16
// fragments hide their element-to-row map, so the scores and the output
// accumulator round-trip through shared memory for the online softmax, and
// each K/V tile is loaded and waited for before it is used. Kept beside
// prefill_attention_mma.cu until a GPU has measured both.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common/prefill_tile.cuh"
#include "kernels/cuda/common/vec.cuh"

namespace pvllm::prefill_detail {

namespace {

namespace wmma = nvcuda::wmma;

using cuda_ops::cp_async_wait_all;
using cuda_ops::from_float;

constexpr int kThreads = kPrefillThreads;
constexpr int kQTile = kPrefillQueryTile;
constexpr int kKTile = kPrefillKeyTile;
constexpr int kFrag = 16;  // wmma 16x16x16

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
  const PrefillTile tile = prefill_tile(p);
  const int num_rows = tile.num_rows;
  const int first_pos = tile.first_pos;
  const int num_keys = tile.num_keys;
  const int key_begin = tile.key_begin;

  // Q tile (rows past the chunk are zero) and a zero accumulator.
  load_q_tile<T, HEAD_DIM>(p, tile, q_smem, kStride);
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
    load_kv_tile<T, HEAD_DIM, BLOCK_SIZE>(p, tile, key0, k_smem, v_smem, kStride);
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
    const int64_t token = tile.first_token + tile.q_row0 + row;
    T* out = static_cast<T*>(p.out) + (token * p.num_heads + tile.head) * HEAD_DIM +
             half * (HEAD_DIM / 2);
#pragma unroll
    for (int d = 0; d < HEAD_DIM / 2; d += 2) {
      T pair[2] = {from_float<T>(o_row[d] * inv), from_float<T>(o_row[d + 1] * inv)};
      *reinterpret_cast<uint32_t*>(out + d) = *reinterpret_cast<const uint32_t*>(pair);
    }
  }
}

template <typename T, int HEAD_DIM, int BLOCK_SIZE>
struct WmmaPrefill {
  static constexpr int kSmemBytes = PrefillSmem<HEAD_DIM>::kTotalBytes;
  static auto kernel() { return &prefill_attention_kernel<T, HEAD_DIM, BLOCK_SIZE>; }
};

}  // namespace

int wmma_prefill_launcher(DType dtype, int32_t head_dim, int32_t block_size,
                          PrefillLaunchFn* launch) {
  return find_prefill_launcher<WmmaPrefill>(dtype, head_dim, block_size, launch);
}

}  // namespace pvllm::prefill_detail
