// The tiles of the interleaved quantized GEMM (quant_gemm.cc), written once
// over an integer dot product `Ops` and included twice by quant_gemm.cc:
// into a namespace whose Ops runs AVX2's pmaddubsw/pmaddwd, and into one,
// compiled for VNNI, whose Ops runs vpdpbusd. No include guard: every
// inclusion is a fresh copy in the including namespace.
//
// A tile is one group of 8 weight rows (quant_matrix.h's interleaved
// blocks, row r in 32-bit lane r) times NT tokens' activation rows, over
// all blocks of the rows. Per block it forms each (row, token) integer sum
// exactly in an int32 lane and then runs vec_dot.h's float contract lane
// by lane:
//   acc = fma(ws * ad, (float)isum, acc)  [then fma(wm * ad, (float)imin, acc)]
// with ws (and wm) the 8 rows' scales, ad the token's broadcast. So lane r
// of token t's accumulator is quant::vec_dot(row r, token t), bit for bit.
//
// Ops (defined before inclusion) provides:
//   dot(acc, u, a): acc + the per-lane sum of the 4 products of unsigned
//     bytes u (at most 63 on the AVX2 side) with signed bytes a (never -128)
//   Q8, q8_prepare(u), q8_dot(acc, Q8, a), kQ8Offset: the same for Q8_0's
//     stored q + 128, any byte: the sum is of (q + kQ8Offset) * a.
//
// Shapes: grp [blocks][packed block]; act [NT] activation rows act_row
// bytes apart; y [NT] rows ldy floats apart, 8 outputs written per row.

// Tokens per tile: as many accumulators as the registers hold beside the
// weights (AVX-512 variants have 32 vector registers, AVX2 16).
constexpr int kTileTokens = PVLLM_CPU_AVX512 ? 6 : 4;
constexpr int kTileTokensK = PVLLM_CPU_AVX512 ? 6 : 3;
constexpr int kTileTokensQ6 = PVLLM_CPU_AVX512 ? 4 : 2;  // four sub-block sums per token

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
// 8 fp16 scales as floats (F16C converts exactly).
inline __m256 load_scales(const uint8_t* p) { return _mm256_cvtph_ps(load128(p)); }
// The 4 bytes at p in every lane.
inline __m256i broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i nibbles_lo(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
inline __m256i nibbles_hi(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}
// acc + scale * isum, lane by lane, vec_dot.h's step (scale * ad rounded first).
inline __m256 contract_step(__m256 acc, __m256 scale, float ad, __m256i isum) {
  return _mm256_fmadd_ps(_mm256_mul_ps(scale, _mm256_set1_ps(ad)), _mm256_cvtepi32_ps(isum), acc);
}

template <int NT>
inline void store_tile(const __m256* acc, float* y, int64_t ldy) {
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

struct Q8_0Tile {
  static constexpr int kTokens = kTileTokens;
  static constexpr size_t kBlock = 272;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x32* a[NT];
    for (int t = 0; t < NT; ++t)
      a[t] = reinterpret_cast<const quant::BlockQ8x32*>(act + t * act_row);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      __m256i isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const typename Ops::Q8 w = Ops::q8_prepare(load256(blk + 16 + 32 * j));
        for (int t = 0; t < NT; ++t)
          isum[t] = Ops::q8_dot(isum[t], w, broadcast4(a[t][b].qs + 4 * j));
      }
      const __m256 ws = load_scales(blk);
      for (int t = 0; t < NT; ++t) {
        // sum (q + offset) a - offset sum a = sum q a, exactly.
        const __m256i s =
            _mm256_sub_epi32(isum[t], _mm256_set1_epi32(Ops::kQ8Offset * a[t][b].sum));
        acc[t] = contract_step(acc[t], ws, a[t][b].d, s);
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};

struct Q4_0Tile {
  static constexpr int kTokens = kTileTokens;
  static constexpr size_t kBlock = 144;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x32* a[NT];
    for (int t = 0; t < NT; ++t)
      a[t] = reinterpret_cast<const quant::BlockQ8x32*>(act + t * act_row);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      __m256i isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {
        const __m256i v = load256(blk + 16 + 32 * j);
        const __m256i lo = nibbles_lo(v), hi = nibbles_hi(v);
        for (int t = 0; t < NT; ++t) {
          isum[t] = Ops::dot(isum[t], lo, broadcast4(a[t][b].qs + 4 * j));
          isum[t] = Ops::dot(isum[t], hi, broadcast4(a[t][b].qs + 16 + 4 * j));
        }
      }
      const __m256 ws = load_scales(blk);
      for (int t = 0; t < NT; ++t) {
        // The codes are q - 8: sum (q - 8) a = sum q a - 8 sum a.
        const __m256i s = _mm256_sub_epi32(isum[t], _mm256_set1_epi32(8 * a[t][b].sum));
        acc[t] = contract_step(acc[t], ws, a[t][b].d, s);
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};

struct Q4_KTile {
  static constexpr int kTokens = kTileTokensK;
  static constexpr size_t kBlock = 1184;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x256* a[NT];
    for (int t = 0; t < NT; ++t)
      a[t] = reinterpret_cast<const quant::BlockQ8x256*>(act + t * act_row);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      const uint8_t* sc = blk + 32;
      const uint8_t* mins = blk + 96;
      const uint8_t* qs = blk + 160;
      __m256i isum[NT], imin[NT];
      for (int t = 0; t < NT; ++t) isum[t] = imin[t] = _mm256_setzero_si256();
      // Sub-blocks 2p (low nibbles) and 2p + 1 (high), 32 codes each.
      for (int p = 0; p < 4; ++p) {
        __m256i lo[NT], hi[NT];
        for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
          const __m256i v = load256(qs + 256 * p + 32 * j);
          const __m256i ql = nibbles_lo(v), qh = nibbles_hi(v);
          for (int t = 0; t < NT; ++t) {
            lo[t] = Ops::dot(lo[t], ql, broadcast4(a[t][b].qs + 64 * p + 4 * j));
            hi[t] = Ops::dot(hi[t], qh, broadcast4(a[t][b].qs + 64 * p + 32 + 4 * j));
          }
        }
        const __m256i sc_lo =
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 16 * p)));
        const __m256i sc_hi = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 16 * p + 8)));
        for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(lo[t], sc_lo));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(hi[t], sc_hi));
        }
      }
      // imin = sum_s m[s] (bsums[2s] + bsums[2s + 1]): int16 pairs (m[2i],
      // m[2i + 1]) per lane times the two sub-blocks' activation sums.
      for (int i = 0; i < 4; ++i) {
        const __m256i m = _mm256_cvtepu8_epi16(load128(mins + 16 * i));
        for (int t = 0; t < NT; ++t) {
          const int16_t* bs = a[t][b].bsums + 4 * i;
          const uint32_t lo = static_cast<uint16_t>(bs[0] + bs[1]);
          const uint32_t hi = static_cast<uint16_t>(bs[2] + bs[3]);
          const __m256i sums = _mm256_set1_epi32(static_cast<int32_t>(lo | (hi << 16)));
          imin[t] = _mm256_add_epi32(imin[t], _mm256_madd_epi16(m, sums));
        }
      }
      const __m256 ws = load_scales(blk);
      // wm = -dmin: the sign flipped exactly.
      const __m256 wm = _mm256_xor_ps(load_scales(blk + 16), _mm256_set1_ps(-0.0f));
      for (int t = 0; t < NT; ++t) {
        acc[t] = contract_step(acc[t], ws, a[t][b].d, isum[t]);
        acc[t] = contract_step(acc[t], wm, a[t][b].d, imin[t]);
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};

struct Q6_KTile {
  static constexpr int kTokens = kTileTokensQ6;
  static constexpr size_t kBlock = 1680;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x256* a[NT];
    for (int t = 0; t < NT; ++t) {
      a[t] = reinterpret_cast<const quant::BlockQ8x256*>(act + t * act_row);
    }
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      const uint8_t* sc = blk + 16;
      __m256i isum[NT], corr[NT];
      for (int t = 0; t < NT; ++t) isum[t] = corr[t] = _mm256_setzero_si256();
      // Half h, k-groups j of one half of the quarters: the codes of
      // elements 128h + 32k + 4j + e for the four quarters k, sub-blocks
      // 8h + 2k + half, scale pair 4h + k.
      for (int h = 0; h < 2; ++h) {
        for (int half = 0; half < 2; ++half) {
          __m256i dot[4][NT];
          for (int k = 0; k < 4; ++k) {
            for (int t = 0; t < NT; ++t) dot[k][t] = _mm256_setzero_si256();
          }
          for (int j = 4 * half; j < 4 * half + 4; ++j) {
            const uint8_t* codes = blk + 144 + 96 * (8 * h + j);
            const __m256i lo01 = load256(codes);       // quarters 0 | 2
            const __m256i lo23 = load256(codes + 32);  // quarters 1 | 3
            const __m256i hi = load256(codes + 64);
            const __m256i q[4] = {
                _mm256_or_si256(nibbles_lo(lo01),
                                _mm256_and_si256(_mm256_slli_epi16(hi, 4), bits45)),
                _mm256_or_si256(nibbles_lo(lo23),
                                _mm256_and_si256(_mm256_slli_epi16(hi, 2), bits45)),
                _mm256_or_si256(nibbles_hi(lo01), _mm256_and_si256(hi, bits45)),
                _mm256_or_si256(nibbles_hi(lo23),
                                _mm256_and_si256(_mm256_srli_epi16(hi, 2), bits45))};
            for (int k = 0; k < 4; ++k) {
              for (int t = 0; t < NT; ++t) {
                dot[k][t] =
                    Ops::dot(dot[k][t], q[k], broadcast4(a[t][b].qs + 128 * h + 32 * k + 4 * j));
              }
            }
          }
          for (int k = 0; k < 4; ++k) {
            const __m256i pair = _mm256_cvtepi8_epi16(load128(sc + 16 * (4 * h + k)));
            const __m256i scale = half == 0 ? _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16)
                                            : _mm256_srai_epi32(pair, 16);
            for (int t = 0; t < NT; ++t) {
              isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(dot[k][t], scale));
            }
          }
        }
      }
      // The codes are q - 32: isum -= 32 sum_s scales[s] bsums[s].
      for (int i = 0; i < 8; ++i) {
        const __m256i pair = _mm256_cvtepi8_epi16(load128(sc + 16 * i));
        for (int t = 0; t < NT; ++t) {
          corr[t] =
              _mm256_add_epi32(corr[t], _mm256_madd_epi16(pair, broadcast4(a[t][b].bsums + 2 * i)));
        }
      }
      const __m256 ws = load_scales(blk);
      for (int t = 0; t < NT; ++t) {
        const __m256i s = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr[t], 5));
        acc[t] = contract_step(acc[t], ws, a[t][b].d, s);
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};

// The product of every interleaved group of w with act's n rows.
inline void gemm(ThreadPool* pool, const QuantMatrix& w, const uint8_t* act, size_t act_row,
                 int64_t n, float* y, int64_t ldy) {
  switch (w.dtype()) {
    case DType::kQ8_0:
      return run_tiles<Q8_0Tile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ4_0:
      return run_tiles<Q4_0Tile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ4_K:
      return run_tiles<Q4_KTile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ6_K:
      return run_tiles<Q6_KTile>(pool, w, act, act_row, n, y, ldy);
    default:
      return;
  }
}
