// The vector types the CPU kernels are written in, for the ISA variant being
// compiled (isa.h): only the files built once per variant include this, and
// each gets its own copy in its variant's namespace.
//
// V8 holds eight fp32 lanes: an AVX2 register, or a plain array with the same
// per-lane arithmetic (one correctly rounded fused multiply-add per lane,
// the same horizontal-sum tree) where AVX2/FMA/F16C are not enabled. V16
// holds sixteen: an AVX-512 register, or two V8. Whichever a variant uses,
// a lane computes the same bits, which is what keeps the variants
// bit-identical.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/base/tensor.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define PVLLM_CPU_AVX2 1
#else
#define PVLLM_CPU_AVX2 0
#endif
#if PVLLM_CPU_AVX2 && defined(__AVX512F__)
#define PVLLM_CPU_AVX512 1
#else
#define PVLLM_CPU_AVX512 0
#endif

#ifndef PVLLM_CPU_VARIANT
#error "PVLLM_CPU_VARIANT must name the variant's namespace"
#endif

namespace pvllm::cpu::PVLLM_CPU_VARIANT {

struct V8 {
  static constexpr int kLanes = 8;
#if PVLLM_CPU_AVX2
  __m256 v;
  static V8 zero() { return {_mm256_setzero_ps()}; }
  static V8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  // Eight floats at any byte address.
  static V8 load_unaligned(const void* p) {
    return {_mm256_castsi256_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p)))};
  }
  static V8 load_f16(const void* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)))};
  }
  // Eight of the sixteen bf16 weights at p, stored as pairs (row i, row
  // 8 + i) (packed_matrix.h): rows 0-7 (high = false) or rows 8-15.
  static V8 load_bf16_pairs(const void* p, bool high) {
    const __m256i w = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(high ? _mm256_and_si256(w, _mm256_set1_epi32(-65536))
                                     : _mm256_slli_epi32(w, 16))};
  }
  // Eight consecutive bf16 values at p, widened (exactly).
  static V8 load_bf16(const void* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  }
  // Eight int8 values at p as floats (exactly).
  static V8 load_i8(const void* p) {
    return {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))))};
  }
  static V8 broadcast(float x) { return {_mm256_set1_ps(x)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static V8 fma(V8 a, V8 b, V8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static V8 add(V8 a, V8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  static V8 sub(V8 a, V8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  static V8 mul(V8 a, V8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
  static V8 div(V8 a, V8 b) { return {_mm256_div_ps(a.v, b.v)}; }
  // a > b ? a : b, lane by lane (so b where either is NaN), as MAXPS.
  static V8 max(V8 a, V8 b) { return {_mm256_max_ps(a.v, b.v)}; }
  // a < b ? a : b, as MINPS.
  static V8 min(V8 a, V8 b) { return {_mm256_min_ps(a.v, b.v)}; }
  static V8 floor(V8 a) { return {_mm256_floor_ps(a.v)}; }
  // 2^n for lanes holding whole numbers n in [-126, 127].
  static V8 pow2i(V8 n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(n.v), _mm256_set1_epi32(127));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(e, 23))};
  }
  // ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
  float hsum() const {
    const __m256 t = _mm256_hadd_ps(v, v);  // l0+l1, l2+l3 | l4+l5, l6+l7
    const __m256 u = _mm256_hadd_ps(t, t);  // (l0+l1)+(l2+l3) | (l4+l5)+(l6+l7)
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
  }
  // Lane j of the result is a[j].hsum(), the same tree, for eight vectors
  // at once (a transposing reduction).
  static V8 hsum8(const V8* a) {
    const __m256 s01 = _mm256_hadd_ps(a[0].v, a[1].v);
    const __m256 s23 = _mm256_hadd_ps(a[2].v, a[3].v);
    const __m256 s45 = _mm256_hadd_ps(a[4].v, a[5].v);
    const __m256 s67 = _mm256_hadd_ps(a[6].v, a[7].v);
    const __m256 s0123 = _mm256_hadd_ps(s01, s23);  // per vector: low half | high half
    const __m256 s4567 = _mm256_hadd_ps(s45, s67);
    return {_mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20),
                          _mm256_permute2f128_ps(s0123, s4567, 0x31))};
  }
#else
  float v[8];
  static V8 zero() { return V8{}; }
  static V8 load(const float* p) {
    V8 r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static V8 load_unaligned(const void* p) {
    V8 r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static V8 load_f16(const void* p) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = load_as_float(DType::kF16, p, i);
    return r;
  }
  static V8 load_bf16_pairs(const void* p, bool high) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = load_as_float(DType::kBF16, p, 2 * i + (high ? 1 : 0));
    return r;
  }
  static V8 load_bf16(const void* p) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = load_as_float(DType::kBF16, p, i);
    return r;
  }
  static V8 load_i8(const void* p) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = static_cast<const int8_t*>(p)[i];
    return r;
  }
  static V8 broadcast(float x) {
    V8 r;
    for (float& l : r.v) l = x;
    return r;
  }
  void store(float* p) const { std::memcpy(p, v, sizeof(v)); }
  static V8 fma(V8 a, V8 b, V8 c) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return r;
  }
  template <typename Op>
  static V8 lanes(V8 a, V8 b, Op op) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = op(a.v[i], b.v[i]);
    return r;
  }
  static V8 add(V8 a, V8 b) {
    return lanes(a, b, [](float x, float y) { return x + y; });
  }
  static V8 sub(V8 a, V8 b) {
    return lanes(a, b, [](float x, float y) { return x - y; });
  }
  static V8 mul(V8 a, V8 b) {
    return lanes(a, b, [](float x, float y) { return x * y; });
  }
  static V8 div(V8 a, V8 b) {
    return lanes(a, b, [](float x, float y) { return x / y; });
  }
  static V8 max(V8 a, V8 b) {
    return lanes(a, b, [](float x, float y) { return x > y ? x : y; });
  }
  static V8 min(V8 a, V8 b) {
    return lanes(a, b, [](float x, float y) { return x < y ? x : y; });
  }
  static V8 floor(V8 a) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = std::floor(a.v[i]);
    return r;
  }
  static V8 pow2i(V8 n) {
    V8 r;
    for (int i = 0; i < 8; ++i) {
      const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n.v[i]) + 127) << 23;
      std::memcpy(&r.v[i], &bits, 4);
    }
    return r;
  }
  float hsum() const { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }
  static V8 hsum8(const V8* a) {
    V8 r;
    for (int j = 0; j < 8; ++j) r.v[j] = a[j].hsum();
    return r;
  }
#endif
};

// Sixteen lanes: one AVX-512 register where the variant has AVX-512, else
// two V8 (so the sixteen-lane kernels also run, and are tested, elsewhere).
struct V16 {
  static constexpr int kLanes = 16;
#if PVLLM_CPU_AVX512
  __m512 v;
  static V16 zero() { return {_mm512_setzero_ps()}; }
  static V16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static V16 load_unaligned(const void* p) { return {_mm512_loadu_ps(p)}; }
  static V16 load_f16(const void* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p)))};
  }
  // The sixteen bf16 weights at p, stored as pairs (row i, row 8 + i): the
  // 32 bytes in both halves, the low halves of the pairs shifted up in
  // lanes 0-7 and the high halves masked in lanes 8-15.
  static V16 load_bf16_pairs(const void* p, bool /*high*/) {
    const __m512i w = _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    const __m512i high = _mm512_and_si512(w, _mm512_set1_epi32(-65536));
    return {_mm512_castsi512_ps(_mm512_mask_slli_epi32(high, __mmask16{0x00FF}, w, 16))};
  }
  static V16 broadcast(float x) { return {_mm512_set1_ps(x)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  static V16 fma(V16 a, V16 b, V16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
#else
  V8 lo, hi;
  static V16 zero() { return {V8::zero(), V8::zero()}; }
  static V16 load(const float* p) { return {V8::load(p), V8::load(p + 8)}; }
  static V16 load_unaligned(const void* p) {
    return {V8::load_unaligned(p), V8::load_unaligned(static_cast<const char*>(p) + 32)};
  }
  static V16 load_f16(const void* p) {
    return {V8::load_f16(p), V8::load_f16(static_cast<const char*>(p) + 16)};
  }
  static V16 load_bf16_pairs(const void* p, bool /*high*/) {
    return {V8::load_bf16_pairs(p, false), V8::load_bf16_pairs(p, true)};
  }
  static V16 broadcast(float x) { return {V8::broadcast(x), V8::broadcast(x)}; }
  void store(float* p) const {
    lo.store(p);
    hi.store(p + 8);
  }
  static V16 fma(V16 a, V16 b, V16 c) {
    return {V8::fma(a.lo, b.lo, c.lo), V8::fma(a.hi, b.hi, c.hi)};
  }
#endif
};

// e^x lane by lane, for any x (clamped to [-87.34, 88.38], so never inf,
// NaN or a denormal): x = n ln2 + r with |r| <= ln2 / 2, e^r by a degree-7
// polynomial (the Cephes coefficients), times 2^n. Within 2 ulp of the true
// value; one fixed sequence of IEEE operations, so every variant gives the
// same bits.
inline V8 exp(V8 x) {
  x = V8::min(V8::max(x, V8::broadcast(-87.3365447504f)), V8::broadcast(88.3762626647949f));
  const V8 n = V8::floor(V8::fma(x, V8::broadcast(1.44269504088896341f), V8::broadcast(0.5f)));
  V8 r = V8::fma(n, V8::broadcast(-0.693359375f), x);
  r = V8::fma(n, V8::broadcast(2.12194440e-4f), r);
  V8 y = V8::broadcast(1.9875691500e-4f);
  for (const float c :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f}) {
    y = V8::fma(y, r, V8::broadcast(c));
  }
  y = V8::fma(y, V8::mul(r, r), V8::add(r, V8::broadcast(1.0f)));
  return V8::mul(y, V8::pow2i(n));
}

// V::kLanes weights, as fp32, of the panel rows [row, row + kLanes) from
// one k step of a packed panel (packed_matrix.h: sixteen weights of dtype
// D; bf16 ones stored as pairs). row is 0, or 8 for the upper half of an
// eight-lane vector.
template <class V, DType D>
inline V load_panel(const uint8_t* k_step, int row) {
  if constexpr (D == DType::kF32) {
    return V::load_unaligned(k_step + row * 4);
  } else if constexpr (D == DType::kF16) {
    return V::load_f16(k_step + row * 2);
  } else {
    return V::load_bf16_pairs(k_step, row != 0);
  }
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
