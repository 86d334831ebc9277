// y [n, rows] = x [n, cols] times W^T, W a PackedMatrix: the CPU backend's
// matrix multiply. Compiled once per ISA variant (isa.h).
//
// Arithmetic: every output is one chain of fused multiply-adds over the
// input index k in order, starting from zero:
//   y[t][r] = fma(x[t][cols-1], W[r][cols-1], ... fma(x[t][0], W[r][0], 0))
// A lane of a vector register holds one output, so neither the tile shape,
// the batch size, the thread count nor the vector width changes a bit of
// it: a row computed alone equals the same row computed in a batch, on
// every variant.
//
// Blocking: a tile is NT tokens x NV vectors of outputs, its accumulators
// held in registers; for each k it loads NV weight vectors (contiguous in a
// panel) and broadcasts NT inputs, so each weight load feeds NT FMAs and
// each input NV. Threads take disjoint groups of panels; within a group all
// token tiles pass over the same panels while they are in cache.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu::PVLLM_CPU_VARIANT {
namespace {

constexpr int64_t kPanel = PackedMatrix::kPanelRows;

// Tile shapes for the vector type V. Accumulator budget: 12 of AVX2's 16
// registers, 24 of AVX-512's 32 (the rest hold weights and a broadcast).
template <class V>
struct Shapes {
  static constexpr int kLanes = V::kLanes;
  static constexpr int kPanelVecs = kPanel / kLanes;     // vectors per panel
  static constexpr int kMainTokens = 6;                  // tokens per tile when n >= 6
  static constexpr int kMainVecs = kLanes == 8 ? 2 : 4;  // 16 or 64 outputs
  // Fewer than kMainTokens tokens: as many whole panels as the budget holds
  // (a single token is bound by how fast weights stream, not by registers).
  static constexpr int small_vecs(int nt) {
    const int budget = kLanes == 8 ? 12 : 24;
    const int v = std::min(8, budget / nt) / kPanelVecs * kPanelVecs;
    return v > 0 ? v : kPanelVecs;
  }
};

// Where the tile's outputs go: y, or a scratch tile when the last panel
// runs past W's rows.
struct Out {
  float* y;
  int64_t stride;
};

// NT tokens (x rows at x_stride) x NV vectors of outputs starting at panel
// p: writes y[t * y_stride + c] for t < NT and c < min(NV * lanes, rows
// left).
template <class V, DType D, int NT, int NV>
void tile(const PackedMatrix& w, int64_t p, const float* x, int64_t x_stride, float* y,
          int64_t y_stride) {
  constexpr int kLanes = V::kLanes;
  constexpr int64_t kElem = D == DType::kF32 ? 4 : 2;
  const int64_t cols = w.cols();
  const uint8_t* wv[NV];  // the panel of vector v
  for (int v = 0; v < NV; ++v) wv[v] = w.panel(p + v * kLanes / kPanel);
  V acc[NT][NV];
  for (int t = 0; t < NT; ++t) {
    for (int v = 0; v < NV; ++v) acc[t][v] = V::zero();
  }
  for (int64_t k = 0; k < cols; ++k) {
    V wk[NV];
    for (int v = 0; v < NV; ++v) {
      wk[v] = load_panel<V, D>(wv[v] + k * kPanel * kElem, v * kLanes % kPanel);
    }
    for (int t = 0; t < NT; ++t) {
      const V xb = V::broadcast(x[t * x_stride + k]);
      for (int v = 0; v < NV; ++v) acc[t][v] = V::fma(wk[v], xb, acc[t][v]);
    }
  }
  const int64_t valid = std::min<int64_t>(NV * kLanes, w.rows() - p * kPanel);
  if (valid == NV * kLanes) {
    for (int t = 0; t < NT; ++t) {
      for (int v = 0; v < NV; ++v) acc[t][v].store(y + t * y_stride + v * kLanes);
    }
    return;
  }
  float scratch[NV * kLanes];
  for (int t = 0; t < NT; ++t) {
    for (int v = 0; v < NV; ++v) acc[t][v].store(scratch + v * kLanes);
    std::memcpy(y + t * y_stride, scratch, static_cast<size_t>(valid) * sizeof(float));
  }
}

template <class V, DType D, int NV, int... Ts>
void remainder_tile(int nt, const PackedMatrix& w, int64_t p, const float* x, float* y,
                    int64_t y_stride, std::integer_sequence<int, Ts...> /*counts*/) {
  // One tile of nt (1 <= nt < kMainTokens) tokens, chosen at compile time.
  ((nt == Ts + 1 ? tile<V, D, Ts + 1, NV>(w, p, x, w.cols(), y, y_stride) : void()), ...);
}

// Tokens [0, n) over the NV vectors of outputs from panel p: tiles of NT
// tokens, then the remaining tokens (fewer than NT) as one tile.
template <class V, DType D, int NT, int NV>
void token_tiles(const PackedMatrix& w, int64_t p, const float* x, int64_t n, float* y,
                 int64_t y_stride) {
  const int64_t in = w.cols();
  int64_t t = 0;
  for (; t + NT <= n; t += NT) tile<V, D, NT, NV>(w, p, x + t * in, in, y + t * y_stride, y_stride);
  // Only the main tiles leave a remainder: a small batch is one tile.
  if constexpr (NT == Shapes<V>::kMainTokens) {
    if (t == n) return;
    remainder_tile<V, D, NV>(static_cast<int>(n - t), w, p, x + t * in, y + t * y_stride, y_stride,
                             std::make_integer_sequence<int, NT - 1>{});
  }
}

// Tokens [0, n) of x over panels [p0, p1): groups of NV vectors, then the
// panels left over one at a time.
template <class V, DType D, int NT, int NV>
void panels(const PackedMatrix& w, int64_t p0, int64_t p1, const float* x, int64_t n, float* y,
            int64_t out_stride) {
  constexpr int64_t kGroup = NV * V::kLanes / kPanel;
  constexpr int kPanelVecs = Shapes<V>::kPanelVecs;
  int64_t p = p0;
  for (; p + kGroup <= p1; p += kGroup) {
    token_tiles<V, D, NT, NV>(w, p, x, n, y + p * kPanel, out_stride);
  }
  for (; p < p1; ++p) token_tiles<V, D, NT, kPanelVecs>(w, p, x, n, y + p * kPanel, out_stride);
}

// Enough multiply-adds per thread that handing out the work costs little.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 15;

// Splits W's panels over the pool in groups of `group` panels and runs
// body(p0, p1) on each share.
template <typename Body>
void split_panels(ThreadPool* pool, const PackedMatrix& w, int64_t n, int64_t group, Body body) {
  const int64_t num_groups = (w.num_panels() + group - 1) / group;
  auto groups = [&](int64_t g0, int64_t g1) {
    body(g0 * group, std::min(w.num_panels(), g1 * group));
  };
  const int64_t macs_per_group = std::max<int64_t>(1, n * w.cols() * group * kPanel);
  const int64_t min_groups = (kMinMacsPerThread + macs_per_group - 1) / macs_per_group;
  if (pool == nullptr) {
    groups(0, num_groups);
  } else {
    pool->parallel_for(num_groups, groups, min_groups);
  }
}

template <class V, DType D, int... Ns>
void small_batch(int nt, ThreadPool* pool, const PackedMatrix& w, const float* x, float* y,
                 std::integer_sequence<int, Ns...>) {
  // n = nt < kMainTokens: one tile of all tokens over as many panels as the
  // registers hold.
  auto one = [&](auto count) {
    constexpr int kT = decltype(count)::value;
    constexpr int kV = Shapes<V>::small_vecs(kT);
    split_panels(pool, w, kT, kV * V::kLanes / kPanel, [&](int64_t p0, int64_t p1) {
      panels<V, D, kT, kV>(w, p0, p1, x, kT, y, w.rows());
    });
  };
  ((nt == Ns + 1 ? one(std::integral_constant<int, Ns + 1>{}) : void()), ...);
}

template <class V, DType D>
void gemm_typed(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y) {
  using S = Shapes<V>;
  if (n < S::kMainTokens) {
    small_batch<V, D>(static_cast<int>(n), pool, w, x, y,
                      std::make_integer_sequence<int, S::kMainTokens - 1>{});
    return;
  }
  split_panels(pool, w, n, S::kMainVecs * S::kLanes / kPanel, [&](int64_t p0, int64_t p1) {
    panels<V, D, S::kMainTokens, S::kMainVecs>(w, p0, p1, x, n, y, w.rows());
  });
}

template <class V>
void gemm(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y) {
  if (n <= 0 || w.empty()) return;
  switch (w.dtype()) {
    case DType::kF32:
      return gemm_typed<V, DType::kF32>(pool, x, n, w, y);
    case DType::kF16:
      return gemm_typed<V, DType::kF16>(pool, x, n, w, y);
    case DType::kBF16:
      return gemm_typed<V, DType::kBF16>(pool, x, n, w, y);
    default:  // quantized matrices are QuantMatrix (quant_gemm.cc), never packed
      return;
  }
}

}  // namespace

// This variant's GEMM: sixteen-lane tiles where it has AVX-512, else eight.
void matmul(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y) {
#if PVLLM_CPU_AVX512
  gemm<V16>(pool, x, n, w, y);
#else
  gemm<V8>(pool, x, n, w, y);
#endif
}

// The sixteen-lane tiles on any variant (two eight-lane halves without
// AVX-512), so that their tiling is tested on every machine.
void matmul_wide(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y) {
  gemm<V16>(pool, x, n, w, y);
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
