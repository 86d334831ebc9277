// quant_matrix.h's quantize_activations: float activation rows into the
// int8 blocks of core/quant/activation.h, byte for byte what
// quant::quantize_activation_row writes. Compiled once per ISA variant
// (isa.h): the AVX2 and AVX-512 variants run 8 lanes at a time, the others
// the reference itself.
//
// The reference's steps and their vector forms, each exact or rounded the
// same way: amax = max |x| (max is exact, in any order); d = amax / 127 (the
// same scalar division); x / d (IEEE division, lane by lane); nearbyint
// (cvtps2dq under the default MXCSR: to nearest, ties to even); the sums
// of the codes in int32.
#include <cfloat>
#include <cstring>

#include "core/quant/activation.h"
#include "kernels/cpu/quant_matrix.h"
#include "kernels/cpu/simd.h"

namespace pvllm::cpu::PVLLM_CPU_VARIANT {

#if PVLLM_CPU_AVX2
namespace {

inline int32_t hsum(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1))));
}

inline float hmax(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_shuffle_ps(t, t, _MM_SHUFFLE(1, 1, 1, 1))));
}

// The codes of x[0, 32) as int32 (4 vectors of 8, in order), d their scale.
inline void codes32(const float* x, __m256 d, __m256i* q) {
  for (int v = 0; v < 4; ++v)
    q[v] = _mm256_cvtps_epi32(_mm256_div_ps(_mm256_loadu_ps(x + 8 * v), d));
}

// 32 int32 codes (each in [-127, 127]) as 32 bytes in order: the two packs
// interleave 4-element pieces per 128-bit half, the permutation restores them.
inline void store_codes32(const __m256i* q, int8_t* out) {
  const __m256i b =
      _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  const __m256i ordered = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

// amax of x[0, k) over 8-lane vectors, then d as the reference takes it
// (0 when it would be under FLT_MIN).
inline float scale_of(const float* x, int k) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < k; i += 8)
    m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  const float d = hmax(m) / 127.0f;
  return d < FLT_MIN ? 0.0f : d;
}

void block32(const float* x, quant::BlockQ8x32* out) {
  const float d = scale_of(x, 32);
  out->d = d;
  if (d == 0.0f) {
    std::memset(out->qs, 0, sizeof(out->qs));
    out->sum = 0;
    return;
  }
  __m256i q[4];
  codes32(x, _mm256_set1_ps(d), q);
  store_codes32(q, out->qs);
  out->sum = hsum(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

void block256(const float* x, quant::BlockQ8x256* out) {
  const float d = scale_of(x, 256);
  out->d = d;
  if (d == 0.0f) {
    std::memset(out->qs, 0, sizeof(out->qs));
    std::memset(out->bsums, 0, sizeof(out->bsums));
    return;
  }
  const __m256 dv = _mm256_set1_ps(d);
  for (int c = 0; c < 8; ++c) {  // 32 codes: sub-block sums 2c and 2c + 1
    __m256i q[4];
    codes32(x + 32 * c, dv, q);
    store_codes32(q, out->qs + 32 * c);
    out->bsums[2 * c] = static_cast<int16_t>(hsum(_mm256_add_epi32(q[0], q[1])));
    out->bsums[2 * c + 1] = static_cast<int16_t>(hsum(_mm256_add_epi32(q[2], q[3])));
  }
}

}  // namespace
#endif  // PVLLM_CPU_AVX2

void quantize_activations(quant::ActivationKind kind, const float* x, int64_t n, void* dst) {
#if PVLLM_CPU_AVX2
  if (kind == quant::ActivationKind::kQ8x32 && n % 32 == 0) {
    auto* out = static_cast<quant::BlockQ8x32*>(dst);
    for (int64_t b = 0; b < n / 32; ++b) block32(x + 32 * b, &out[b]);
    return;
  }
  if (kind == quant::ActivationKind::kQ8x256 && n % 256 == 0) {
    auto* out = static_cast<quant::BlockQ8x256*>(dst);
    for (int64_t b = 0; b < n / 256; ++b) block256(x + 256 * b, &out[b]);
    return;
  }
#endif
  quant::quantize_activation_row(kind, x, n, dst);  // and its checks
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
