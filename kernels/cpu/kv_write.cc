// The K/V write of one ISA variant: each row encoded as the pool stores it
// (kv_encode.h's values, byte for byte), eight lanes at a time where the
// variant has AVX2 and F16C, through the scalar encoders elsewhere and for
// the tails.
#include <cstdint>
#include <cstring>

#include "core/base/tensor.h"
#include "kernels/cpu/kv_encode.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/simd.h"

namespace pvllm::cpu::PVLLM_CPU_VARIANT {

namespace {

void encode_row(KvCacheDtype dtype, const float* x, int32_t n, uint8_t* dst, uint16_t* scale) {
#if PVLLM_CPU_AVX2
  int32_t i = 0;
  switch (dtype) {
    case KvCacheDtype::kF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (; i + 8 <= n; i += 8) {
        const __m128i h =
            _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
      }
      for (; i < n; ++i) out[i] = float_to_fp16(x[i]);
      return;
    }
    case KvCacheDtype::kBF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      const __m256i exponent = _mm256_set1_epi32(0x7f800000);
      const __m256i mantissa = _mm256_set1_epi32(0x7fffff);
      for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        // Round to nearest even; a NaN keeps its top bits and is made quiet.
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        const __m256i rounded = _mm256_srli_epi32(
            _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
        const __m256i nan = _mm256_andnot_si256(
            _mm256_cmpeq_epi32(_mm256_and_si256(u, mantissa), _mm256_setzero_si256()),
            _mm256_cmpeq_epi32(_mm256_and_si256(u, exponent), exponent));
        const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
        // Eight 32-bit lanes to eight 16-bit values (each fits: no saturation).
        const __m128i packed =
            _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
      }
      for (; i < n; ++i) out[i] = float_to_bf16(x[i]);
      return;
    }
    case KvCacheDtype::kInt8: {
      auto* codes = reinterpret_cast<int8_t*>(dst);
      const __m256 sign = _mm256_set1_ps(-0.0f);
      __m256 acc = _mm256_setzero_ps();
      for (; i + 8 <= n; i += 8) {
        // max(|x|, acc) keeps acc where |x| is NaN, as the scalar loop does.
        acc = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), acc);
      }
      float lanes[8];
      _mm256_storeu_ps(lanes, acc);
      float amax = 0.0f;
      for (float l : lanes) amax = l > amax ? l : amax;
      for (int32_t t = i; t < n; ++t) {
        const float a = x[t] < 0.0f ? -x[t] : x[t];
        if (a > amax) amax = a;
      }
      const float inverse = int8_row_scale(amax, scale);
      const __m256 inv = _mm256_set1_ps(inverse);
      const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
      for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), inv);
        v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));  // NaN -> 0
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        const __m256i q = _mm256_cvtps_epi32(v);
        const __m128i words =
            _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), _mm_packs_epi16(words, words));
      }
      for (; i < n; ++i) codes[i] = int8_code(x[i], inverse);
      return;
    }
    default:
      break;
  }
#endif
  encode_kv_row(dtype, x, n, dst, scale);
}

}  // namespace

void write_kv(const WriteKvParams& p) {
  const int64_t row_floats = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  const auto head_bytes =
      static_cast<int64_t>(kv_head_block_bytes(p.kv_dtype, p.block_size, p.head_dim));
  const int64_t elem_bytes =
      p.kv_dtype == KvCacheDtype::kInt8 ? 1 : (p.kv_dtype == KvCacheDtype::kF32 ? 4 : 2);
  const int64_t row_bytes = elem_bytes * p.head_dim;
  const int64_t scales_at = static_cast<int64_t>(p.block_size) * p.head_dim;  // int8 only
  auto* k_cache = static_cast<uint8_t*>(p.k_cache);
  auto* v_cache = static_cast<uint8_t*>(p.v_cache);
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    const int64_t block = p.slot_mapping[t] / p.block_size;
    const int64_t offset = p.slot_mapping[t] % p.block_size;
    for (int32_t kvh = 0; kvh < p.num_kv_heads; ++kvh) {
      const int64_t head = (block * p.num_kv_heads + kvh) * head_bytes;
      const int64_t dst = head + offset * row_bytes;
      const int64_t scale = head + scales_at + offset * 2;
      const int64_t src = t * row_floats + static_cast<int64_t>(kvh) * p.head_dim;
      encode_row(p.kv_dtype, p.k + src, p.head_dim, k_cache + dst,
                 reinterpret_cast<uint16_t*>(k_cache + scale));
      encode_row(p.kv_dtype, p.v + src, p.head_dim, v_cache + dst,
                 reinterpret_cast<uint16_t*>(v_cache + scale));
    }
  }
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
