// PrefillVariant::kMma: prefill attention over the paged cache with
// FlashAttention-2's structure. The scores, the probabilities and the output
// accumulator stay in mma.sync registers, whose element-to-row map the PTX
// ISA fixes (common/mma.cuh), so the online softmax runs on them directly;
// K/V tiles are double-buffered, the next one in flight while the current
// one is multiplied.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common/mma.cuh"
#include "kernels/cuda/common/mma_layout.h"
#include "kernels/cuda/common/prefill_tile.cuh"
#include "kernels/cuda/common/vec.cuh"

namespace pvllm::prefill_detail {

namespace {

using cuda_ops::cp_async_commit;
using cuda_ops::cp_async_wait;
using cuda_ops::ldmatrix_x4;
using cuda_ops::ldmatrix_x4_trans;
using cuda_ops::mma_16816;
using cuda_ops::pack2;
namespace layout = mma_layout;

constexpr int kThreads = kPrefillThreads;
constexpr int kWarpRows = 16;
constexpr int kQTile = kPrefillQueryTile;
constexpr int kKTile = kPrefillKeyTile;
constexpr int kElemsPerVector = 8;
constexpr float kLog2e = 1.4426950408889634f;

// Shared memory of one CUDA block: the Q tile, then two stages of K and V
// tiles. Rows are padded by 8 elements (16 bytes), so the 8 rows an
// ldmatrix phase reads start in 8 different groups of 4 banks.
template <int HEAD_DIM>
struct MmaSmem {
  static constexpr int kStride = HEAD_DIM + 8;  // elements per row
  static constexpr int kQElems = kQTile * kStride;
  static constexpr int kKvElems = kKTile * kStride;
  static constexpr int kTotalBytes = (kQElems + 4 * kKvElems) * 2;  // 85 KiB at 128, 45 at 64
  static_assert(kTotalBytes <= 227 * 1024);  // sm_90's opt-in limit per block
};

// grid: (num_work_items, num_heads); kThreads threads; MmaSmem bytes of
// dynamic shared memory.
//
// A CUDA block owns kQTile query rows of one sequence's chunk for one head
// (its kv head is head / group); warp w owns rows [16w, 16w + 16), and each
// lane two of them (common/mma_layout.h's C layout). Per tile
// of kKTile keys, up to the last position any of its rows can see:
//   1. the next tile's K and V rows are gathered through the block table
//      into the other stage (cp.async, 16-byte vectors; keys past the range
//      are zeroed, so a zero probability never meets a stale NaN) before
//      this tile is waited for;
//   2. S = Q K^T: Q's fragments were loaded once, K's come by ldmatrix;
//   3. in registers: scale (in log2 units), the causal / window mask (only
//      on tiles that cross a row's limit), the online softmax in fp32 (row
//      maxima over the 4 lanes that share a row, by shuffles; each lane keeps its
//      part of the row sums), the output rescaled;
//   4. O += P V: the probabilities, rounded to T, are the A fragments as
//      they lie (two adjacent 8-key C tiles make one 16-key A tile); V's B
//      fragments come by transposing ldmatrix.
// Finally the row sums are gathered, each row divided by its sum, staged in
// the warp's own Q rows and written out in 16-byte vectors.
template <typename T, int HEAD_DIM, int BLOCK_SIZE>
__global__ void __launch_bounds__(kThreads) prefill_mma_kernel(const PrefillAttentionParams p) {
  using Smem = MmaSmem<HEAD_DIM>;
  constexpr int kStride = Smem::kStride;
  constexpr int kRowVectors = HEAD_DIM / kElemsPerVector;
  constexpr int kDimSteps = HEAD_DIM / 16;  // k steps of Q K^T; 16-column pairs of P V
  constexpr int kKeyTiles = kKTile / 8;     // 8-key C tiles of S
  constexpr int kDimTiles = HEAD_DIM / 8;   // 8-column C tiles of O

  extern __shared__ __align__(128) unsigned char smem[];
  T* q_smem = reinterpret_cast<T*>(smem);  // [kQTile, kStride]
  T* kv_smem = q_smem + Smem::kQElems;     // [stage][K, V][kKTile, kStride]

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // Rows of this lane's C elements 0, 1 and 2, 3 (the same in every tile).
  const int c_rows[2] = {layout::c_row(lane, 0), layout::c_row(lane, 2)};

  const PrefillTile tile = prefill_tile(p);
  const int first_pos = tile.first_pos;
  const int window = p.sliding_window;
  const int num_key_tiles = (tile.num_keys - tile.key_begin + kKTile - 1) / kKTile;
  auto load_kv = [&](int stage, int key0) {
    load_kv_tile<T, HEAD_DIM, BLOCK_SIZE>(p, tile, key0, kv_smem + (2 * stage) * Smem::kKvElems,
                                          kv_smem + (2 * stage + 1) * Smem::kKvElems, kStride);
  };

  load_q_tile<T, HEAD_DIM>(p, tile, q_smem, kStride);  // one cp.async group
  cp_async_commit();
  if (num_key_tiles > 0) load_kv(0, tile.key_begin);
  cp_async_commit();
  cp_async_wait<1>();  // the Q group has landed (tile 0 may still be in flight)
  __syncthreads();

  // This warp's Q rows as A fragments, one per 16 columns, for the whole
  // loop.
  uint32_t q_frag[kDimSteps][4];
  {
    const T* rows =
        q_smem + (warp * kWarpRows + layout::a_ldsm_row(lane)) * kStride + layout::a_ldsm_col(lane);
#pragma unroll
    for (int kk = 0; kk < kDimSteps; ++kk) ldmatrix_x4(q_frag[kk], rows + kk * 16);
  }

  // Softmax state of this lane's two rows ([0] and [1]), in log2 units.
  const int pos[2] = {first_pos + warp * kWarpRows + c_rows[0],
                      first_pos + warp * kWarpRows + c_rows[1]};
  const float scale_log2 = p.scale * kLog2e;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this lane's columns only, until the end
  float o[kDimTiles][4];
#pragma unroll
  for (int j = 0; j < kDimTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
  }

  for (int kt = 0; kt < num_key_tiles; ++kt) {
    const int stage = kt & 1;
    const int key0 = tile.key_begin + kt * kKTile;
    // 1. The next tile goes into the other stage, which every warp finished
    //    reading before the barrier that ended the previous iteration. The
    //    group is committed even when empty, so "all but the newest" below
    //    always means this tile.
    if (kt + 1 < num_key_tiles) load_kv(stage ^ 1, key0 + kKTile);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* k_tile = kv_smem + (2 * stage) * Smem::kKvElems;
    const T* v_tile = kv_smem + (2 * stage + 1) * Smem::kKvElems;

    // 2. S = Q K^T. One ldmatrix gives the B fragments of two 8-key tiles
    //    (K is stored n-major: a key's row holds its head_dim columns).
    float s[kKeyTiles][4];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
    }
#pragma unroll
    for (int nk = 0; nk < kKTile / 16; ++nk) {
      const T* k_rows =
          k_tile + (nk * 16 + layout::bn_ldsm_row(lane)) * kStride + layout::bn_ldsm_col(lane);
#pragma unroll
      for (int kk = 0; kk < kDimSteps; ++kk) {
        uint32_t b[4];
        ldmatrix_x4(b, k_rows + kk * 16);
        mma_16816<T>(s[2 * nk], q_frag[kk], b[0], b[1]);
        mma_16816<T>(s[2 * nk + 1], q_frag[kk], b[2], b[3]);
      }
    }

    // 3. Online softmax. A tile wholly inside every row's range needs no
    //    mask: its last key is at most row 0's position and, with a window,
    //    its first key is inside the last row's window.
    const bool unmasked =
        key0 + kKTile - 1 <= first_pos && (window == 0 || key0 >= first_pos + kQTile - window);
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        float x = s[j][e] * scale_log2;
        if (!unmasked) {
          const int key = key0 + 8 * j + layout::c_col(lane, e);
          const bool visible = key <= pos[r] && (window == 0 || key > pos[r] - window);
          if (!visible) x = -INFINITY;
        }
        s[j][e] = x;
        tile_max[r] = fmaxf(tile_max[r], x);
      }
    }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_max = fmaxf(row_max[r], tile_max[r]);
      // A row that has seen no visible key yet (new_max = -inf) keeps p = 0.
      base[r] = new_max == -INFINITY ? 0.0f : new_max;
      const float alpha = exp2f(row_max[r] - base[r]);  // 0 while row_max is -inf
      row_max[r] = new_max;
      row_sum[r] *= alpha;
#pragma unroll
      for (int j = 0; j < kDimTiles; ++j) {
        o[j][2 * r] *= alpha;
        o[j][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - base[e / 2]);
        row_sum[e / 2] += s[j][e];
      }
    }

    // 4. O += P V. V is stored k-major (a key's row), so its B fragments
    //    come by the transposing ldmatrix: b[0], b[1] serve the first 8
    //    columns, b[2], b[3] the next 8.
#pragma unroll
    for (int kk = 0; kk < kKTile / 16; ++kk) {
      uint32_t a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float* c = s[2 * kk + layout::a_tile(r)];
        a[r] = pack2<T>(c[layout::a_elem(r)], c[layout::a_elem(r) + 1]);
      }
      const T* v_rows =
          v_tile + (kk * 16 + layout::bk_ldsm_row(lane)) * kStride + layout::bk_ldsm_col(lane);
#pragma unroll
      for (int np = 0; np < kDimSteps; ++np) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_rows + np * 16);
        mma_16816<T>(o[2 * np], a, b[0], b[1]);
        mma_16816<T>(o[2 * np + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the next iteration refills this stage
  }

  // Row sums over the 4 lanes of each group, then normalise into the warp's
  // own Q rows (only this warp read them, before the loop) and write out.
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
  T* o_rows = q_smem + warp * kWarpRows * kStride;
#pragma unroll
  for (int j = 0; j < kDimTiles; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      *reinterpret_cast<uint32_t*>(o_rows + c_rows[r] * kStride + 8 * j +
                                   layout::c_col(lane, 2 * r)) =
          pack2<T>(o[j][2 * r] * inv[r], o[j][2 * r + 1] * inv[r]);
    }
  }
  __syncwarp();
  T* __restrict__ out = static_cast<T*>(p.out);
  for (int v = lane; v < kWarpRows * kRowVectors; v += 32) {
    const int r = v / kRowVectors;
    const int col = (v % kRowVectors) * kElemsPerVector;
    const int row = warp * kWarpRows + r;
    if (row < tile.num_rows) {
      const int64_t token = tile.first_token + tile.q_row0 + row;
      *reinterpret_cast<int4*>(out + (token * p.num_heads + tile.head) * HEAD_DIM + col) =
          *reinterpret_cast<const int4*>(o_rows + r * kStride + col);
    }
  }
}

template <typename T, int HEAD_DIM, int BLOCK_SIZE>
struct MmaPrefill {
  static constexpr int kSmemBytes = MmaSmem<HEAD_DIM>::kTotalBytes;
  static auto kernel() { return &prefill_mma_kernel<T, HEAD_DIM, BLOCK_SIZE>; }
};

}  // namespace

int mma_prefill_launcher(DType dtype, int32_t head_dim, int32_t block_size,
                         PrefillLaunchFn* launch) {
  return find_prefill_launcher<MmaPrefill>(dtype, head_dim, block_size, launch);
}

}  // namespace pvllm::prefill_detail
