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
  static V8 load_bf16(const void* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16))};
  }
  static V8 broadcast(float x) { return {_mm256_set1_ps(x)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static V8 fma(V8 a, V8 b, V8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static V8 add(V8 a, V8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  // ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
  float hsum() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
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
  static V8 load_bf16(const void* p) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = load_as_float(DType::kBF16, p, i);
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
  static V8 add(V8 a, V8 b) {
    V8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = a.v[i] + b.v[i];
    return r;
  }
  float hsum() const {
    float s[4];
    for (int i = 0; i < 4; ++i) s[i] = v[i] + v[i + 4];
    return (s[0] + s[2]) + (s[1] + s[3]);
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
  static V16 load_bf16(const void* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16))};
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
  static V16 load_bf16(const void* p) {
    return {V8::load_bf16(p), V8::load_bf16(static_cast<const char*>(p) + 16)};
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

// V::kLanes weights of dtype D starting at element i of `p`, as fp32.
template <class V, DType D>
inline V load_weights(const void* p, int64_t i) {
  const char* at = static_cast<const char*>(p) + i * (D == DType::kF32 ? 4 : 2);
  if constexpr (D == DType::kF32) {
    return V::load_unaligned(at);
  } else if constexpr (D == DType::kF16) {
    return V::load_f16(at);
  } else {
    return V::load_bf16(at);
  }
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
