// The vectors the quantized GEMM's tiles (quant_gemm_tiles.h) are written
// in, for the ISA variant being compiled (isa.h): 32 bytes seen as 8 int32
// lanes (lane r: row r of a group of 8), as 16 int16 or as 32 bytes, and 8
// fp32 lanes. One AVX2 register each where the variant has AVX2; a pair of
// SSE registers (lanes 0-3, lanes 4-7) on x86-64-v2, with SSSE3's and
// SSE4.1's forms of the same operations, so the tiles are written once.
// Every operation computes the same bits in both forms: the integer ones
// lane by lane (the byte shuffle within each 16 bytes, as AVX2's does), the
// float ones as single IEEE operations, and fmadd, a fused multiply-add
// with one rounding on x86-64-v2 too, which has no FMA (for the tiles'
// operands: see quant_vec_detail).
//
// Only quant_gemm.cc includes this, inside its variant's namespace.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define PVLLM_QUANT_VEC_AVX2 1
#define PVLLM_QUANT_VEC_SSE 0
#elif defined(__SSE4_2__) && defined(__SSSE3__)
#include <immintrin.h>
#define PVLLM_QUANT_VEC_AVX2 0
#define PVLLM_QUANT_VEC_SSE 1
#else
#define PVLLM_QUANT_VEC_AVX2 0
#define PVLLM_QUANT_VEC_SSE 0
#endif

#ifndef PVLLM_CPU_VARIANT
#error "PVLLM_CPU_VARIANT must name the variant's namespace"
#endif

#if PVLLM_QUANT_VEC_AVX2 || PVLLM_QUANT_VEC_SSE
namespace pvllm::cpu::PVLLM_CPU_VARIANT {

// A shift count held in a register, for shifts by a count computed at run time.
using ShiftCount = __m128i;
inline ShiftCount shift_count(int n) { return _mm_cvtsi32_si128(n); }

#if PVLLM_QUANT_VEC_AVX2

// 32 bytes of integers; the operations name the lane width they use.
struct I32x8 {
  __m256i v;
};
// 8 fp32 lanes.
struct F32x8 {
  __m256 v;
};

inline I32x8 zero_i32x8() { return {_mm256_setzero_si256()}; }
inline I32x8 splat32(int32_t x) { return {_mm256_set1_epi32(x)}; }
inline I32x8 splat16(int16_t x) { return {_mm256_set1_epi16(x)}; }
inline I32x8 splat8(int8_t x) { return {_mm256_set1_epi8(x)}; }
// The 32 bytes at p, any alignment.
inline I32x8 load32(const uint8_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))};
}
// The 16 bytes at p (the same 16 in both halves), any alignment.
inline I32x8 load16_twice(const uint8_t* p) {
  return {_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
// 8 bytes at p widened to 8 int32 lanes: zero- or sign-extended.
inline I32x8 widen_u8_to_32(const uint8_t* p) {
  return {_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))};
}
inline I32x8 widen_i8_to_32(const uint8_t* p) {
  return {_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))};
}
// 16 bytes at p widened to 16 int16 lanes: zero- or sign-extended.
inline I32x8 widen_u8_to_16(const uint8_t* p) {
  return {_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
inline I32x8 widen_i8_to_16(const uint8_t* p) {
  return {_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}

inline I32x8 operator&(I32x8 a, I32x8 b) { return {_mm256_and_si256(a.v, b.v)}; }
inline I32x8 operator|(I32x8 a, I32x8 b) { return {_mm256_or_si256(a.v, b.v)}; }
inline I32x8 operator^(I32x8 a, I32x8 b) { return {_mm256_xor_si256(a.v, b.v)}; }
// int32 lanes, wrapping (the tiles' sums never do).
inline I32x8 operator+(I32x8 a, I32x8 b) { return {_mm256_add_epi32(a.v, b.v)}; }
inline I32x8 operator-(I32x8 a, I32x8 b) { return {_mm256_sub_epi32(a.v, b.v)}; }
// The low 32 bits of the int32 lanes' products.
inline I32x8 operator*(I32x8 a, I32x8 b) { return {_mm256_mullo_epi32(a.v, b.v)}; }

// int16 lanes shifted by n bits (logical): by a number, or by the count in
// the low 64 bits of `count` (one register set up outside a loop).
inline I32x8 shl16(I32x8 a, int n) { return {_mm256_slli_epi16(a.v, n)}; }
inline I32x8 shr16(I32x8 a, int n) { return {_mm256_srli_epi16(a.v, n)}; }
inline I32x8 shr16(I32x8 a, ShiftCount count) { return {_mm256_srl_epi16(a.v, count)}; }
// int32 lanes shifted left, or right arithmetically.
inline I32x8 shl32(I32x8 a, int n) { return {_mm256_slli_epi32(a.v, n)}; }
inline I32x8 sra32(I32x8 a, int n) { return {_mm256_srai_epi32(a.v, n)}; }

// Per int32 lane: the two int16 products of its halves, summed.
inline I32x8 madd16(I32x8 a, I32x8 b) { return {_mm256_madd_epi16(a.v, b.v)}; }
// Per int16 lane: unsigned bytes of u times signed bytes of s, the pair
// summed with signed saturation.
inline I32x8 maddubs(I32x8 u, I32x8 s) { return {_mm256_maddubs_epi16(u.v, s.v)}; }
// Per byte: |a|; a negated where s < 0, zeroed where s == 0.
inline I32x8 abs8(I32x8 a) { return {_mm256_abs_epi8(a.v)}; }
inline I32x8 sign8(I32x8 a, I32x8 s) { return {_mm256_sign_epi8(a.v, s.v)}; }
// Per byte: table byte idx & 15 of the same 16 bytes (idx < 128).
inline I32x8 lookup16(I32x8 table, I32x8 idx) { return {_mm256_shuffle_epi8(table.v, idx.v)}; }

inline F32x8 zero_f32x8() { return {_mm256_setzero_ps()}; }
inline F32x8 splat(float x) { return {_mm256_set1_ps(x)}; }
inline void store(float* p, F32x8 a) { _mm256_storeu_ps(p, a.v); }
// The 8 fp16 values at p, exactly (F16C).
inline F32x8 load_fp16x8(const uint8_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
// The int32 lanes rounded to float (to nearest even).
inline F32x8 to_float(I32x8 a) { return {_mm256_cvtepi32_ps(a.v)}; }
inline F32x8 operator*(F32x8 a, F32x8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
// -a, exactly (the sign bit flipped).
inline F32x8 negate(F32x8 a) { return {_mm256_xor_ps(a.v, _mm256_set1_ps(-0.0f))}; }
// a * b + c with one rounding.
inline F32x8 fmadd(F32x8 a, F32x8 b, F32x8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }

#else  // PVLLM_QUANT_VEC_SSE

struct I32x8 {
  __m128i lo, hi;  // lanes 0-3 (bytes 0-15), lanes 4-7 (bytes 16-31)
};
struct F32x8 {
  __m128 lo, hi;
};

namespace quant_vec_detail {
template <class Op>
inline I32x8 each(I32x8 a, I32x8 b, Op op) {
  return {op(a.lo, b.lo), op(a.hi, b.hi)};
}
template <class Op>
inline I32x8 each(I32x8 a, Op op) {
  return {op(a.lo), op(a.hi)};
}
inline __m128i load8(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}
inline __m128i load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_cvtsi32_si128(v);
}
// 4 fp16 values (the low 4 int32 lanes' low halves hold the bits) as
// floats, exactly as fp16_to_float (core/base/tensor.h) gives them: a
// normal half's exponent rebased and mantissa moved up, a subnormal's
// mantissa times 2^-24, an infinity's or NaN's exponent all ones.
inline __m128 fp16x4_to_float(__m128i h) {
  const __m128i em = _mm_and_si128(h, _mm_set1_epi32(0x7FFF));
  const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
  // Exponent 1..30: (em << 13) + (127 - 15) << 23; 31: 112 more, to 255.
  __m128i normal = _mm_add_epi32(_mm_slli_epi32(em, 13), _mm_set1_epi32(112 << 23));
  const __m128i inf_nan = _mm_cmpgt_epi32(em, _mm_set1_epi32(0x7BFF));
  normal = _mm_add_epi32(normal, _mm_and_si128(inf_nan, _mm_set1_epi32(112 << 23)));
  const __m128 subnormal = _mm_mul_ps(_mm_cvtepi32_ps(em), _mm_set1_ps(0x1p-24f));
  const __m128 small = _mm_castsi128_ps(_mm_cmplt_epi32(em, _mm_set1_epi32(0x0400)));
  const __m128 magnitude = _mm_blendv_ps(_mm_castsi128_ps(normal), subnormal, small);
  return _mm_or_ps(magnitude, _mm_castsi128_ps(sign));
}
// fmaf without FMA, through doubles: a * b is exact in a double (24 + 24
// significant bits), so s = a * b + c rounded to double has one rounding,
// and rounding s to float gives fmaf's float unless s is a float tie (25
// significant bits, the last set) that the exact sum was not: every tie
// is a double, so rounding to double never carries the sum across one,
// only onto it. Results under 2^-126 are exact (the tiles' b holds whole
// numbers, so a * b + c is a multiple of 2^-149 and fits a double).

// Whether each double is a float tie: bits 0-27 of its mantissa clear, bit 28 set.
inline __m128i float_ties(__m128d s) {
  const __m128i low = _mm_and_si128(_mm_castpd_si128(s), _mm_set1_epi64x(0x1FFFFFFF));
  return _mm_cmpeq_epi64(low, _mm_set1_epi64x(0x10000000));
}
inline __m128d low_pair(__m128 x) { return _mm_cvtps_pd(x); }
inline __m128d high_pair(__m128 x) { return _mm_cvtps_pd(_mm_movehl_ps(x, x)); }
inline __m128d mul_add(__m128d a, __m128d b, __m128d c) { return _mm_add_pd(_mm_mul_pd(a, b), c); }
inline __m128 to_floats(__m128d lo, __m128d hi) {
  return _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
}
// The slow path, for any inputs: the sum rounded to double "to odd" (an
// inexact result gets its last bit set, by a step towards the exact value
// when the nearest double's last bit is clear) and then to float, which
// rounds correctly since 53 bits are at least 24 + 2. TwoSum gives the
// sum's error exactly: e = (a * b + c) - s.
inline __m128 fma2_to_float(__m128d a, __m128d b, __m128d c) {
  const __m128d p = _mm_mul_pd(a, b);
  const __m128d s = _mm_add_pd(p, c);
  const __m128d bv = _mm_sub_pd(s, p);
  const __m128d e = _mm_add_pd(_mm_sub_pd(p, _mm_sub_pd(s, bv)), _mm_sub_pd(c, bv));
  // e != 0 and not NaN (s infinite: no step to take).
  const __m128i inexact = _mm_castpd_si128(
      _mm_or_pd(_mm_cmplt_pd(e, _mm_setzero_pd()), _mm_cmpgt_pd(e, _mm_setzero_pd())));
  const __m128i sb = _mm_castpd_si128(s);
  const __m128i one = _mm_set1_epi64x(1);
  const __m128i even = _mm_cmpeq_epi64(_mm_and_si128(sb, one), _mm_setzero_si128());
  // Towards e: the magnitude's bits + 1 when s and e share a sign, else - 1.
  const __m128i differ =
      _mm_cmpgt_epi64(_mm_setzero_si128(), _mm_xor_si128(sb, _mm_castpd_si128(e)));
  const __m128i step = _mm_and_si128(_mm_or_si128(differ, one), _mm_and_si128(inexact, even));
  return _mm_cvtpd_ps(_mm_castsi128_pd(_mm_add_epi64(sb, step)));
}
inline __m128 fma4_rounded_to_odd(__m128 a, __m128 b, __m128 c) {
  const __m128 lo = fma2_to_float(low_pair(a), low_pair(b), low_pair(c));
  const __m128 hi = fma2_to_float(high_pair(a), high_pair(b), high_pair(c));
  return _mm_movelh_ps(lo, hi);
}
}  // namespace quant_vec_detail

inline I32x8 zero_i32x8() { return {_mm_setzero_si128(), _mm_setzero_si128()}; }
inline I32x8 splat32(int32_t x) { return {_mm_set1_epi32(x), _mm_set1_epi32(x)}; }
inline I32x8 splat16(int16_t x) { return {_mm_set1_epi16(x), _mm_set1_epi16(x)}; }
inline I32x8 splat8(int8_t x) { return {_mm_set1_epi8(x), _mm_set1_epi8(x)}; }
inline I32x8 load32(const uint8_t* p) {
  return {_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))};
}
inline I32x8 load16_twice(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {v, v};
}
inline I32x8 widen_u8_to_32(const uint8_t* p) {
  using quant_vec_detail::load4;
  return {_mm_cvtepu8_epi32(load4(p)), _mm_cvtepu8_epi32(load4(p + 4))};
}
inline I32x8 widen_i8_to_32(const uint8_t* p) {
  using quant_vec_detail::load4;
  return {_mm_cvtepi8_epi32(load4(p)), _mm_cvtepi8_epi32(load4(p + 4))};
}
inline I32x8 widen_u8_to_16(const uint8_t* p) {
  using quant_vec_detail::load8;
  return {_mm_cvtepu8_epi16(load8(p)), _mm_cvtepu8_epi16(load8(p + 8))};
}
inline I32x8 widen_i8_to_16(const uint8_t* p) {
  using quant_vec_detail::load8;
  return {_mm_cvtepi8_epi16(load8(p)), _mm_cvtepi8_epi16(load8(p + 8))};
}

inline I32x8 operator&(I32x8 a, I32x8 b) {
  return quant_vec_detail::each(a, b, [](__m128i x, __m128i y) { return _mm_and_si128(x, y); });
}
inline I32x8 operator|(I32x8 a, I32x8 b) {
  return quant_vec_detail::each(a, b, [](__m128i x, __m128i y) { return _mm_or_si128(x, y); });
}
inline I32x8 operator^(I32x8 a, I32x8 b) {
  return quant_vec_detail::each(a, b, [](__m128i x, __m128i y) { return _mm_xor_si128(x, y); });
}
inline I32x8 operator+(I32x8 a, I32x8 b) {
  return quant_vec_detail::each(a, b, [](__m128i x, __m128i y) { return _mm_add_epi32(x, y); });
}
inline I32x8 operator-(I32x8 a, I32x8 b) {
  return quant_vec_detail::each(a, b, [](__m128i x, __m128i y) { return _mm_sub_epi32(x, y); });
}
inline I32x8 operator*(I32x8 a, I32x8 b) {
  return quant_vec_detail::each(a, b, [](__m128i x, __m128i y) { return _mm_mullo_epi32(x, y); });
}

inline I32x8 shl16(I32x8 a, int n) {
  return quant_vec_detail::each(a, [n](__m128i x) { return _mm_slli_epi16(x, n); });
}
inline I32x8 shr16(I32x8 a, int n) {
  return quant_vec_detail::each(a, [n](__m128i x) { return _mm_srli_epi16(x, n); });
}
inline I32x8 shr16(I32x8 a, ShiftCount count) {
  return quant_vec_detail::each(a, [count](__m128i x) { return _mm_srl_epi16(x, count); });
}
inline I32x8 shl32(I32x8 a, int n) {
  return quant_vec_detail::each(a, [n](__m128i x) { return _mm_slli_epi32(x, n); });
}
inline I32x8 sra32(I32x8 a, int n) {
  return quant_vec_detail::each(a, [n](__m128i x) { return _mm_srai_epi32(x, n); });
}

inline I32x8 madd16(I32x8 a, I32x8 b) {
  return quant_vec_detail::each(a, b, [](__m128i x, __m128i y) { return _mm_madd_epi16(x, y); });
}
inline I32x8 maddubs(I32x8 u, I32x8 s) {
  return quant_vec_detail::each(u, s, [](__m128i x, __m128i y) { return _mm_maddubs_epi16(x, y); });
}
inline I32x8 abs8(I32x8 a) {
  return quant_vec_detail::each(a, [](__m128i x) { return _mm_abs_epi8(x); });
}
inline I32x8 sign8(I32x8 a, I32x8 s) {
  return quant_vec_detail::each(a, s, [](__m128i x, __m128i y) { return _mm_sign_epi8(x, y); });
}
inline I32x8 lookup16(I32x8 table, I32x8 idx) {
  return quant_vec_detail::each(table, idx,
                                [](__m128i t, __m128i i) { return _mm_shuffle_epi8(t, i); });
}

inline F32x8 zero_f32x8() { return {_mm_setzero_ps(), _mm_setzero_ps()}; }
inline F32x8 splat(float x) { return {_mm_set1_ps(x), _mm_set1_ps(x)}; }
inline void store(float* p, F32x8 a) {
  _mm_storeu_ps(p, a.lo);
  _mm_storeu_ps(p + 4, a.hi);
}
// Without F16C: the bits converted exactly in integer lanes.
inline F32x8 load_fp16x8(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {quant_vec_detail::fp16x4_to_float(_mm_cvtepu16_epi32(h)),
          quant_vec_detail::fp16x4_to_float(_mm_unpackhi_epi16(h, _mm_setzero_si128()))};
}
inline F32x8 to_float(I32x8 a) { return {_mm_cvtepi32_ps(a.lo), _mm_cvtepi32_ps(a.hi)}; }
inline F32x8 operator*(F32x8 a, F32x8 b) {
  return {_mm_mul_ps(a.lo, b.lo), _mm_mul_ps(a.hi, b.hi)};
}
inline F32x8 negate(F32x8 a) {
  const __m128 sign = _mm_set1_ps(-0.0f);
  return {_mm_xor_ps(a.lo, sign), _mm_xor_ps(a.hi, sign)};
}
// Without FMA: a * b + c with one rounding, through doubles, b holding
// whole numbers (quant_vec_detail above).
inline F32x8 fmadd(F32x8 a, F32x8 b, F32x8 c) {
  using namespace quant_vec_detail;
  const __m128d s0 = mul_add(low_pair(a.lo), low_pair(b.lo), low_pair(c.lo));
  const __m128d s1 = mul_add(high_pair(a.lo), high_pair(b.lo), high_pair(c.lo));
  const __m128d s2 = mul_add(low_pair(a.hi), low_pair(b.hi), low_pair(c.hi));
  const __m128d s3 = mul_add(high_pair(a.hi), high_pair(b.hi), high_pair(c.hi));
  const __m128i ties = _mm_or_si128(_mm_or_si128(float_ties(s0), float_ties(s1)),
                                    _mm_or_si128(float_ties(s2), float_ties(s3)));
  if (!_mm_testz_si128(ties, ties)) [[unlikely]] {
    return {fma4_rounded_to_odd(a.lo, b.lo, c.lo), fma4_rounded_to_odd(a.hi, b.hi, c.hi)};
  }
  return {to_floats(s0, s1), to_floats(s2, s3)};
}

#endif

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
#endif
