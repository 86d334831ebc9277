// quant_matrix.h's fast kernels: y = W x for a quantized W in its
// interleaved layout, bit-identical to quant::vec_dot per output. Compiled
// once per ISA variant (isa.h), all running the tiles of
// quant_gemm_tiles.h: the AVX2 and AVX-512 variants with VNNI's vpdpbusd
// for the integer sums where the CPU has it (AVX-VNNI, or AVX512-VNNI in
// the AVX-512 variant: checked at run time, the VNNI code compiled for it
// alone), AVX2's pmaddubsw and pmaddwd otherwise; the x86-64-v2 variant
// with SSSE3's pmaddubsw and SSE2's pmaddwd on vectors of two halves
// (quant_vec.h). The generic variant has no kernel (quant_gemm_supports is
// false) and quant_matmul runs the reference.
//
// Work: threads take disjoint runs of row groups; within a group every tile
// of tokens passes over the group's blocks while they are in cache, so a
// weight byte is read from memory once per call.
#include <algorithm>
#include <cstring>
#include <utility>

#include "core/quant/activation.h"
#include "core/quant/block_formats.h"
#include "kernels/cpu/quant_matrix.h"
#include "kernels/cpu/quant_vec.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace pvllm::cpu::PVLLM_CPU_VARIANT {

#if PVLLM_QUANT_VEC_AVX2 || PVLLM_QUANT_VEC_SSE
namespace {

// Enough multiply-adds per thread that handing out the work costs little.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 15;

template <class Tile, int... Ns>
void remainder_tile(int nt, const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row,
                    float* y, int64_t ldy, std::integer_sequence<int, Ns...> /*counts*/) {
  // One tile of nt (1 <= nt < Tile::kTokens) tokens, chosen at compile time.
  ((nt == Ns + 1 ? Tile::template run<Ns + 1>(grp, nb, act, act_row, y, ldy) : void()), ...);
}

// Every group of w times tokens [0, n): tiles of Tile::kTokens tokens, then
// one of the rest.
template <class Tile>
void run_tiles(ThreadPool* pool, const QuantMatrix& w, const uint8_t* act, size_t act_row,
               int64_t n, float* y, int64_t ldy) {
  constexpr int kTokens = Tile::kTokens;
  const int64_t nb = w.blocks_per_row();
  auto groups = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const uint8_t* grp = w.group(g);
      float* yg = y + g * QuantMatrix::kGroupRows;
      int64_t t = 0;
      for (; t + kTokens <= n; t += kTokens) {
        Tile::template run<kTokens>(grp, nb, act + t * act_row, act_row, yg + t * ldy, ldy);
      }
      if constexpr (kTokens > 1) {
        if (t < n) {
          remainder_tile<Tile>(static_cast<int>(n - t), grp, nb, act + t * act_row, act_row,
                               yg + t * ldy, ldy, std::make_integer_sequence<int, kTokens - 1>{});
        }
      }
    }
  };
  const int64_t macs_per_group = std::max<int64_t>(1, n * w.cols() * QuantMatrix::kGroupRows);
  const int64_t min_groups = (kMinMacsPerThread + macs_per_group - 1) / macs_per_group;
  if (pool == nullptr) {
    groups(0, w.num_groups());
  } else {
    pool->parallel_for(w.num_groups(), groups, min_groups);
  }
}

// pmaddubsw (unsigned codes of at most 63, or a signed code's |w| (Q8_0's,
// the IQ4 types' levels) against a with w's sign: pairs of products stay
// under 2^15, so never saturate), then pmaddwd with ones: AVX2's, or
// SSSE3's and SSE2's on each half.
struct MaddubsOps {
  static I32x8 dot(I32x8 acc, I32x8 u, I32x8 a) { return acc + madd16(maddubs(u, a), splat16(1)); }
  struct Q8 {
    I32x8 abs, sign;  // |q| and q
  };
  static constexpr int32_t kQ8Offset = 0;
  static Q8 q8_prepare(I32x8 u) {
    const I32x8 q = u ^ splat8(-128);
    return {abs8(q), q};
  }
  static I32x8 q8_dot(I32x8 acc, Q8 w, I32x8 a) { return dot(acc, w.abs, sign8(a, w.sign)); }
};

}  // namespace

#if PVLLM_QUANT_VEC_AVX2
namespace avx2_dot {
using Ops = MaddubsOps;
#include "kernels/cpu/quant_gemm_tiles.h"
}  // namespace avx2_dot

// VNNI: vpdpbusd sums four unsigned-by-signed byte products into each int32
// lane, without saturation. Everything in this region is compiled for it
// and runs only where has_vnni() said so.
#if defined(__clang__)
#if PVLLM_CPU_AVX512
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#else
#pragma clang attribute push(__attribute__((target("avxvnni"))), apply_to = function)
#endif
#else
#pragma GCC push_options
#if PVLLM_CPU_AVX512
#pragma GCC target("avx512vnni")
#else
#pragma GCC target("avxvnni")
#endif
#endif
namespace vnni_dot {
struct Ops {
  static I32x8 dot(I32x8 acc, I32x8 u, I32x8 a) {
#if PVLLM_CPU_AVX512
    return {_mm256_dpbusd_epi32(acc.v, u.v, a.v)};
#else
    return {_mm256_dpbusd_avx_epi32(acc.v, u.v, a.v)};
#endif
  }
  using Q8 = I32x8;  // q + 128
  static constexpr int32_t kQ8Offset = 128;
  static Q8 q8_prepare(I32x8 u) { return u; }
  static I32x8 q8_dot(I32x8 acc, Q8 w, I32x8 a) { return dot(acc, w, a); }
};
#include "kernels/cpu/quant_gemm_tiles.h"
}  // namespace vnni_dot
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace {

// CPUID leaf 7: AVX512-VNNI is sub-leaf 0's ECX bit 11, AVX-VNNI sub-leaf
// 1's EAX bit 4 (read directly: not every compiler's
// __builtin_cpu_supports knows "avxvnni"). The OS's support for the
// registers is the variant's own precondition (dispatch.cc).
bool has_vnni() {
  static const bool vnni = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
#if PVLLM_CPU_AVX512
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 11) & 1) != 0;
#else
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && ((eax >> 4) & 1) != 0;
#endif
  }();
  return vnni;
}

}  // namespace
#else  // PVLLM_QUANT_VEC_SSE
namespace sse_dot {
using Ops = MaddubsOps;
#include "kernels/cpu/quant_gemm_tiles.h"
}  // namespace sse_dot
#endif  // PVLLM_QUANT_VEC_AVX2
#endif  // PVLLM_QUANT_VEC_AVX2 || PVLLM_QUANT_VEC_SSE

bool quant_gemm_supports(DType t) {
#if PVLLM_QUANT_VEC_AVX2 || PVLLM_QUANT_VEC_SSE
  return dtype_is_quantized(t);  // every quantized type has a tile
#else
  (void)t;
  return false;
#endif
}

void quant_gemm(ThreadPool* pool, const QuantMatrix& w, const void* act, size_t act_row, int64_t n,
                float* y, int64_t ldy, QuantIntDot dot) {
  if (n <= 0 || !w.packed() || !quant_gemm_supports(w.dtype())) return;
#if PVLLM_QUANT_VEC_AVX2
  const auto* a = static_cast<const uint8_t*>(act);
  if (dot == QuantIntDot::kBest && has_vnni()) {
    vnni_dot::gemm(pool, w, a, act_row, n, y, ldy);
  } else {
    avx2_dot::gemm(pool, w, a, act_row, n, y, ldy);
  }
#elif PVLLM_QUANT_VEC_SSE
  (void)dot;  // no VNNI without AVX
  sse_dot::gemm(pool, w, static_cast<const uint8_t*>(act), act_row, n, y, ldy);
#else
  (void)pool, (void)act, (void)act_row, (void)y, (void)ldy, (void)dot;
#endif
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
