#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common/dispatch.cuh"
#include "kernels/cuda/common/mma.cuh"
#include "kernels/cuda/common/mma_layout.h"
#include "kernels/cuda/common/quant_layout.h"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/quant_repack.h"

namespace pvllm {

namespace {

namespace ql = quant_layout;
using cuda_ops::mma_16816;

// The three weight types as kernel template arguments.
enum class WType { kQ8_0, kQ4_0, kQ4_K };

template <WType W>
constexpr int kBits = W == WType::kQ8_0 ? 8 : 4;

constexpr int kWarpSize = 32;

// ---- shared pieces -------------------------------------------------------------

// Two 16-bit elements of one word as floats (lower half first).
template <typename T>
__device__ __forceinline__ float2 to_float2(uint32_t w);
template <>
__device__ __forceinline__ float2 to_float2<__half>(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}
template <>
__device__ __forceinline__ float2 to_float2<__nv_bfloat16>(uint32_t w) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
}

// One lane's units of a chunk of w blocks (w <= chunk_blocks): words
// [lane_words * t, lane_words * (t + 1)) hold block t's. A whole chunk is
// one 16-byte load; a narrower last chunk is loaded unit by unit.
template <int BITS>
__device__ __forceinline__ void load_chunk(const uint8_t* chunk_base, int w, int lane,
                                           uint32_t (&words)[4]) {
  constexpr int kCB = ql::chunk_blocks(BITS);
  if (w == kCB) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(chunk_base + ql::kChunkBytes * lane));
    words[0] = v.x;
    words[1] = v.y;
    words[2] = v.z;
    words[3] = v.w;
    return;
  }
  words[0] = words[1] = words[2] = words[3] = 0;
#pragma unroll
  for (int t = 0; t < kCB; ++t) {
    if (t >= w) break;
    const uint8_t* unit = chunk_base + (w * lane + t) * ql::lane_bytes(BITS);
    if constexpr (BITS == 8) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(unit));
      words[2 * t] = v.x;
      words[2 * t + 1] = v.y;
    } else {
      words[t] = __ldg(reinterpret_cast<const uint32_t*>(unit));
    }
  }
}

// Q4_K's scale factors of sub-block j of a super-block header (d | dmin,
// then the three words of 6-bit scales): d * sc and dmin * m, each rounded
// to float as core/quant computes them.
struct KScale {
  float d_sc;
  float dmin_m;
};
__device__ __forceinline__ KScale k_scale(const uint4& h, int j) {
  const uint32_t s[3] = {h.y, h.z, h.w};
  const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(h.x & 0xFFFF)));
  const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(h.x >> 16)));
  return {ql::mul_rn(d, static_cast<float>(ql::q4k_scale(s, j))),
          ql::mul_rn(dmin, static_cast<float>(ql::q4k_min(s, j)))};
}

__device__ __forceinline__ uint4 load_k_header(const uint8_t* scales, int64_t row, int64_t nsb,
                                               int64_t sb) {
  return __ldg(reinterpret_cast<const uint4*>(scales + (row * nsb + sb) * 16));
}

__device__ __forceinline__ float load_d(const uint8_t* scales, int64_t row, int64_t nb, int64_t b) {
  return __half2float(__ldg(reinterpret_cast<const __half*>(scales) + row * nb + b));
}

template <typename T>
__device__ __forceinline__ void store1(void* y, int64_t i, float v, bool f32) {
  if (f32) {
    static_cast<float*>(y)[i] = v;
  } else {
    static_cast<T*>(y)[i] = cuda_ops::from_float<T>(v);
  }
}

// ---- GEMV (small m) --------------------------------------------------------------

constexpr int kGemvWarps = 8;

// grid: (n / 8, ceil(m / M)), block: kGemvWarps warps. Lane 4 r + c of each
// warp owns row 8 g + r of W and elements 8 c .. 8 c + 7 of every block;
// warp w takes chunks w, w + kGemvWarps, ... of the row group. Each of the
// lane's weights is dequantized in fp32 (quant_layout's *_value: core/quant's
// numbers) and multiplied with M rows of x; rows of x past m reuse row m - 1
// and are never written.
template <typename T, WType W, int M>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize)
    quant_gemv_kernel(const uint8_t* __restrict__ codes,   // quant_layout codes of W [n, k]
                      const uint8_t* __restrict__ scales,  // quant_layout scales
                      const T* __restrict__ x,             // [m, x_stride]
                      void* __restrict__ y,                // [m, y_stride], T or float
                      int64_t m, int64_t k, int64_t x_stride, int64_t y_stride, bool y_f32) {
  constexpr int kB = kBits<W>;
  constexpr int kCB = ql::chunk_blocks(kB);
  __shared__ float partial[kGemvWarps][ql::kGroupRows][M];

  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int r = lane / 4;
  const int c = lane % 4;
  const int64_t g = blockIdx.x;
  const int64_t row = g * ql::kGroupRows + r;  // the lane's row of W
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * M;
  const int64_t nb = k / ql::kBlockElems;
  const int64_t nsb = k / 256;
  const int64_t num_chunks = (nb + kCB - 1) / kCB;

  const T* x_rows[M];
#pragma unroll
  for (int i = 0; i < M; ++i) x_rows[i] = x + (m0 + i < m ? m0 + i : m - 1) * x_stride + 8 * c;

  float acc[M];
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] = 0.0f;

#pragma unroll 2
  for (int64_t chunk = warp; chunk < num_chunks; chunk += kGemvWarps) {
    const int w = ql::chunk_width(kB, nb, chunk);
    uint32_t words[4];
    load_chunk<kB>(codes + (g * nb + chunk * kCB) * ql::tile_bytes(kB), w, lane, words);
#pragma unroll
    for (int t = 0; t < kCB; ++t) {
      if (t >= w) break;
      const int64_t b = chunk * kCB + t;
      float wv[8];
      if constexpr (W == WType::kQ8_0) {
        const float d = load_d(scales, row, nb, b);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          wv[e] = ql::q8_0_value((words[2 * t + e / 4] >> (8 * (e % 4))) & 0xFF, d);
        }
      } else if constexpr (W == WType::kQ4_0) {
        const float d = load_d(scales, row, nb, b);
#pragma unroll
        for (int e = 0; e < 8; ++e) wv[e] = ql::q4_0_value(ql::code4(words[t], e), d);
      } else {
        const KScale s = k_scale(load_k_header(scales, row, nsb, b / 8), static_cast<int>(b % 8));
#pragma unroll
        for (int e = 0; e < 8; ++e)
          wv[e] = ql::q4_k_value(ql::code4(words[t], e), s.d_sc, s.dmin_m);
      }
#pragma unroll
      for (int i = 0; i < M; ++i) {
        const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x_rows[i] + b * ql::kBlockElems));
        const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const float2 f = to_float2<T>(xw[p]);
          acc[i] = fmaf(f.x, wv[2 * p], acc[i]);
          acc[i] = fmaf(f.y, wv[2 * p + 1], acc[i]);
        }
      }
    }
  }

  // The 4 lanes of a row (lane ^ 1, lane ^ 2) hold its 4 slices of k.
#pragma unroll
  for (int i = 0; i < M; ++i) {
    acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], 1);
    acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], 2);
    if (c == 0) partial[warp][r][i] = acc[i];
  }
  __syncthreads();
  if (threadIdx.x < ql::kGroupRows * M) {
    const int rr = threadIdx.x / M;
    const int i = threadIdx.x % M;
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kGemvWarps; ++v) sum += partial[v][rr][i];
    if (m0 + i < m) store1<T>(y, (m0 + i) * y_stride + g * ql::kGroupRows + rr, sum, y_f32);
  }
}

// ---- tensor cores (any m) ----------------------------------------------------------

constexpr int kMmaWarps = 4;  // 2 x 2: each warp 32 rows of x times 32 rows of W
constexpr int kMmaRows = 64;  // rows of x per CUDA block
constexpr int kMmaCols = 64;  // rows of W (outputs) per CUDA block
constexpr int kWarpTilesM = 2;
constexpr int kWarpTilesN = 4;

// Step s's B registers (b0, b1) of a lane's unit of block t of the chunk:
// the codes of its elements 2 b_pair(s, j) and 2 b_pair(s, j) + 1, as
// exact integers.
template <typename T, WType W>
__device__ __forceinline__ void b_fragment(const uint32_t (&words)[4], int t, int s,
                                           uint32_t (&b)[2]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int pair = ql::b_pair(s, j);  // elements 2 pair, 2 pair + 1
    if constexpr (W == WType::kQ8_0) {
      const uint32_t word = words[2 * t + pair / 2];
      if constexpr (std::is_same_v<T, __half>) {
        const uint32_t bits = ql::q8_pair_bits_f16(word, pair % 2);
        const __half2 v =
            __hsub2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(1152.0f));
        b[j] = *reinterpret_cast<const uint32_t*>(&v);
      } else {
        const uint32_t lo = (word >> (16 * (pair % 2))) & 0xFF;
        const uint32_t hi = (word >> (16 * (pair % 2) + 8)) & 0xFF;
        b[j] = cuda_ops::pack2<T>(ql::small_uint_to_float(lo ^ 0x80u) - 128.0f,
                                  ql::small_uint_to_float(hi ^ 0x80u) - 128.0f);
      }
    } else {
      constexpr bool kHalf = std::is_same_v<T, __half>;
      constexpr uint32_t kMagic = kHalf ? ql::kF16Magic : ql::kBF16Magic;
      // The magic's own value, and Q4_0's offset of 8.
      constexpr float kSub = (kHalf ? 1024.0f : 128.0f) + (W == WType::kQ4_0 ? 8.0f : 0.0f);
      const uint32_t bits = ql::q4_pair_bits(words[t], pair, kMagic);
      if constexpr (kHalf) {
        const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(kSub));
        b[j] = *reinterpret_cast<const uint32_t*>(&v);
      } else {
        const __nv_bfloat162 v =
            __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&bits), __float2bfloat162_rn(kSub));
        b[j] = *reinterpret_cast<const uint32_t*>(&v);
      }
    }
  }
}

// grid: (ceil(n / 64), ceil(m / 64)), block: 4 warps. Per chunk of blocks
// (64 or 128 columns of k): each warp loads its 4 n tiles' codes (one
// 16-byte load per lane and tile), the block stages its 64 rows of x in
// shared memory (rows past m as zeros), then for every 32-element block
// each warp runs 2 k16 steps over its 2 x 4 tiles into a block product,
// which the block's scales fold into the accumulators.
template <typename T, WType W>
__global__ void __launch_bounds__(kMmaWarps* kWarpSize)
    quant_mma_kernel(const uint8_t* __restrict__ codes,   // quant_layout codes of W [n, k]
                     const uint8_t* __restrict__ scales,  // quant_layout scales
                     const T* __restrict__ x,             // [m, x_stride]
                     void* __restrict__ y,                // [m, y_stride], T or float
                     int64_t m, int64_t n, int64_t k, int64_t x_stride, int64_t y_stride,
                     bool y_f32) {
  constexpr int kB = kBits<W>;
  constexpr int kCB = ql::chunk_blocks(kB);
  constexpr int kChunkK = kCB * ql::kBlockElems;
  // Rows padded by 64 bytes: the 8 lanes of a 16-byte shared load phase
  // read 64 bytes of two consecutive rows, which then fall in disjoint banks.
  constexpr int kStride = kChunkK + 32;
  __shared__ __align__(16) uint16_t x_tile[kMmaRows * kStride];  // T's bits

  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warp_m = warp / 2;
  const int warp_n = warp % 2;
  const int64_t m_base = static_cast<int64_t>(blockIdx.y) * kMmaRows;
  const int64_t num_groups = n / ql::kGroupRows;
  const int64_t g0 =
      static_cast<int64_t>(blockIdx.x) * (kMmaCols / ql::kGroupRows) + warp_n * kWarpTilesN;
  const int64_t nb = k / ql::kBlockElems;
  const int64_t nsb = k / 256;
  const int64_t num_chunks = (nb + kCB - 1) / kCB;

  float acc[kWarpTilesM][kWarpTilesN][4] = {};

  for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
    const int w = ql::chunk_width(kB, nb, chunk);
    uint32_t words[kWarpTilesN][4];
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
      if (g0 + j < num_groups) {
        load_chunk<kB>(codes + ((g0 + j) * nb + chunk * kCB) * ql::tile_bytes(kB), w, lane,
                       words[j]);
      }
    }

    __syncthreads();  // the previous chunk's x is read
    constexpr int kVecsPerRow = kChunkK / 8;
    for (int v = threadIdx.x; v < kMmaRows * kVecsPerRow; v += kMmaWarps * kWarpSize) {
      const int rr = v / kVecsPerRow;
      const int col = (v % kVecsPerRow) * 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (m_base + rr < m && col < w * ql::kBlockElems) {
        val = __ldg(
            reinterpret_cast<const uint4*>(x + (m_base + rr) * x_stride + chunk * kChunkK + col));
      }
      *reinterpret_cast<uint4*>(&x_tile[rr * kStride + col]) = val;
    }
    __syncthreads();

#pragma unroll
    for (int t = 0; t < kCB; ++t) {
      if (t >= w) break;
      const int64_t b = chunk * kCB + t;
      // A: rows a_row(lane, 0) and a_row(lane, 1) of each m tile, elements
      // a_col(lane) .. + 7 of block t.
      uint4 a_lo[kWarpTilesM], a_hi[kWarpTilesM];
#pragma unroll
      for (int mt = 0; mt < kWarpTilesM; ++mt) {
        const int row = warp_m * 32 + mt * 16 + ql::a_row(lane, 0);
        const int row_hi = warp_m * 32 + mt * 16 + ql::a_row(lane, 1);
        const int col = t * ql::kBlockElems + ql::a_col(lane);
        a_lo[mt] = *reinterpret_cast<const uint4*>(&x_tile[row * kStride + col]);
        a_hi[mt] = *reinterpret_cast<const uint4*>(&x_tile[row_hi * kStride + col]);
      }
      // Q4_K: sum(x) over the block for the lane's two accumulator rows.
      float row_sum[kWarpTilesM][2] = {};
      if constexpr (W == WType::kQ4_K) {
#pragma unroll
        for (int mt = 0; mt < kWarpTilesM; ++mt) {
          const uint32_t lo[4] = {a_lo[mt].x, a_lo[mt].y, a_lo[mt].z, a_lo[mt].w};
          const uint32_t hi[4] = {a_hi[mt].x, a_hi[mt].y, a_hi[mt].z, a_hi[mt].w};
#pragma unroll
          for (int p = 0; p < 4; ++p) {
            const float2 fl = to_float2<T>(lo[p]);
            const float2 fh = to_float2<T>(hi[p]);
            row_sum[mt][0] += fl.x + fl.y;
            row_sum[mt][1] += fh.x + fh.y;
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            row_sum[mt][h] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[mt][h], 1);
            row_sum[mt][h] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[mt][h], 2);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kWarpTilesN; ++j) {
        const int64_t g = g0 + j;
        if (g >= num_groups) continue;  // the same for the whole warp
        float prod[kWarpTilesM][4] = {};
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          uint32_t bf[2];
          b_fragment<T, W>(words[j], t, s, bf);
#pragma unroll
          for (int mt = 0; mt < kWarpTilesM; ++mt) {
            // Register r: pair a_pair(s, r) of row a_row(lane, r) (lo: r even).
            const uint32_t lo[4] = {a_lo[mt].x, a_lo[mt].y, a_lo[mt].z, a_lo[mt].w};
            const uint32_t hi[4] = {a_hi[mt].x, a_hi[mt].y, a_hi[mt].z, a_hi[mt].w};
            uint32_t a[4];
#pragma unroll
            for (int r = 0; r < 4; ++r) a[r] = (r % 2 ? hi : lo)[ql::a_pair(s, r)];
            mma_16816<T>(prod[mt], a, bf[0], bf[1]);
          }
        }
        // The block's scales of the lane's two output columns, c_col(lane, 0..1).
        const int64_t col0 = g * ql::kGroupRows + mma_layout::c_col(lane, 0);
        if constexpr (W == WType::kQ4_K) {
          const KScale s0 =
              k_scale(load_k_header(scales, col0, nsb, b / 8), static_cast<int>(b % 8));
          const KScale s1 =
              k_scale(load_k_header(scales, col0 + 1, nsb, b / 8), static_cast<int>(b % 8));
#pragma unroll
          for (int mt = 0; mt < kWarpTilesM; ++mt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const KScale& s = (e & 1) ? s1 : s0;
              acc[mt][j][e] += s.d_sc * prod[mt][e] - s.dmin_m * row_sum[mt][e / 2];
            }
          }
        } else {
          const float d0 = load_d(scales, col0, nb, b);
          const float d1 = load_d(scales, col0 + 1, nb, b);
#pragma unroll
          for (int mt = 0; mt < kWarpTilesM; ++mt) {
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[mt][j][e] = fmaf((e & 1) ? d1 : d0, prod[mt][e], acc[mt][j][e]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int mt = 0; mt < kWarpTilesM; ++mt) {
#pragma unroll
    for (int j = 0; j < kWarpTilesN; ++j) {
      const int64_t g = g0 + j;
      if (g >= num_groups) continue;
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int64_t row = m_base + warp_m * 32 + mt * 16 + mma_layout::c_row(lane, e);
        if (row >= m) continue;
        const int64_t i = row * y_stride + g * ql::kGroupRows + mma_layout::c_col(lane, e);
        if (y_f32) {
          *reinterpret_cast<float2*>(static_cast<float*>(y) + i) =
              make_float2(acc[mt][j][e], acc[mt][j][e + 1]);
        } else {
          *reinterpret_cast<uint32_t*>(static_cast<T*>(y) + i) =
              cuda_ops::pack2<T>(acc[mt][j][e], acc[mt][j][e + 1]);
        }
      }
    }
  }
}

// ---- launch ------------------------------------------------------------------------

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

bool valid(const QuantMatmulParams& p) {
  if (!quant_matmul_check_weight(p.weight_dtype, p.n, p.k).ok()) return false;
  if (p.m < 0 || p.m > kQuantMatmulMaxRows) return false;
  if (p.x_dtype != DType::kBF16 && p.x_dtype != DType::kF16) return false;
  if (p.y_dtype != DType::kF32 && p.y_dtype != p.x_dtype) return false;
  if (p.path != QuantMatmulPath::kAuto && p.path != QuantMatmulPath::kGemv &&
      p.path != QuantMatmulPath::kMma) {
    return false;
  }
  if (p.m == 0) return true;
  if (!p.codes || !p.scales || !p.x || !p.y) return false;
  if (p.x_stride < p.k || p.x_stride % 8 != 0 || p.y_stride < p.n || p.y_stride % 2 != 0)
    return false;
  const size_t y_elem = p.y_dtype == DType::kF32 ? 4 : 2;
  return aligned(p.codes, 16) && aligned(p.x, 16) && aligned(p.y, 2 * y_elem) &&
         aligned(p.scales, p.weight_dtype == DType::kQ4_K ? 16 : 2);
}

template <typename T, WType W>
int launch(const QuantMatmulParams& p, cudaStream_t stream) {
  const auto* codes = static_cast<const uint8_t*>(p.codes);
  const auto* scales = static_cast<const uint8_t*>(p.scales);
  const auto* x = static_cast<const T*>(p.x);
  const bool y_f32 = p.y_dtype == DType::kF32;
  const bool gemv = p.path == QuantMatmulPath::kGemv ||
                    (p.path == QuantMatmulPath::kAuto && p.m <= kQuantGemvMaxRows);
  if (gemv) {
    const dim3 block(kGemvWarps * kWarpSize);
    const auto go = [&](auto rows) {
      constexpr int kM = decltype(rows)::value;
      const dim3 grid(static_cast<unsigned>(p.n / ql::kGroupRows),
                      static_cast<unsigned>((p.m + kM - 1) / kM));
      quant_gemv_kernel<T, W, kM><<<grid, block, 0, stream>>>(codes, scales, x, p.y, p.m, p.k,
                                                              p.x_stride, p.y_stride, y_f32);
    };
    if (p.m <= 1) {
      go(std::integral_constant<int, 1>());
    } else if (p.m <= 2) {
      go(std::integral_constant<int, 2>());
    } else if (p.m <= 4) {
      go(std::integral_constant<int, 4>());
    } else {
      go(std::integral_constant<int, 8>());
    }
  } else {
    const dim3 grid(static_cast<unsigned>((p.n + kMmaCols - 1) / kMmaCols),
                    static_cast<unsigned>((p.m + kMmaRows - 1) / kMmaRows));
    quant_mma_kernel<T, W><<<grid, kMmaWarps * kWarpSize, 0, stream>>>(
        codes, scales, x, p.y, p.m, p.n, p.k, p.x_stride, p.y_stride, y_f32);
  }
  return cudaGetLastError();
}

}  // namespace

int pvllm_cuda_quant_matmul(const QuantMatmulParams& p, void* stream_ptr) {
  if (!valid(p)) return cudaErrorInvalidValue;
  if (p.m == 0) return cudaSuccess;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  PVLLM_DISPATCH_HALF_DTYPE(p.x_dtype, T, {
    switch (p.weight_dtype) {
      case DType::kQ8_0:
        return launch<T, WType::kQ8_0>(p, stream);
      case DType::kQ4_0:
        return launch<T, WType::kQ4_0>(p, stream);
      case DType::kQ4_K:
        return launch<T, WType::kQ4_K>(p, stream);
      default:
        return cudaErrorInvalidValue;
    }
  });
  return cudaErrorInvalidValue;
}

}  // namespace pvllm
