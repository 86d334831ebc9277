// The tiles of the interleaved quantized GEMM (quant_gemm.cc), written once
// over the vectors of quant_vec.h and an integer dot product `Ops`, and
// included by quant_gemm.cc once per Ops: AVX2's pmaddubsw/pmaddwd, VNNI's
// vpdpbusd (in a region compiled for it), or on x86-64-v2 SSSE3's pmaddubsw
// and SSE2's pmaddwd on each half of the vectors. No include guard: every
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
//     bytes u (at most 63 on the pmaddubsw side) with signed bytes a (never
//     -128)
//   Q8, q8_prepare(u), q8_dot(acc, Q8, a), kQ8Offset: the same for signed
//     codes q stored as u = q + 128, any byte (Q8_0's, and the IQ4 types'
//     table values): the sum is of (q + kQ8Offset) * a.
//
// Shapes: grp [blocks][packed block]; act [NT] activation rows act_row
// bytes apart; y [NT] rows ldy floats apart, 8 outputs written per row.

// Tokens per tile: as many accumulators as the registers hold beside the
// weights (AVX-512 variants have 32 vector registers, AVX2 16). On
// x86-64-v2, where a vector takes two of its 16 registers, the AVX2 counts
// measured as fast as any smaller ones: the spills cost less than decoding
// the weights for fewer tokens.
constexpr int kTileTokens = PVLLM_CPU_AVX512 ? 6 : 4;
constexpr int kTileTokensK = PVLLM_CPU_AVX512 ? 6 : 3;
// Q2_K, Q3_K, Q6_K: four sub-block sums per token.
constexpr int kTileTokensQ6 = PVLLM_CPU_AVX512 ? 4 : 2;

// The 4 bytes at p in every lane.
inline I32x8 broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return splat32(v);
}
inline I32x8 nibbles_lo(I32x8 v) { return v & splat8(0x0F); }
inline I32x8 nibbles_hi(I32x8 v) { return shr16(v, 4) & splat8(0x0F); }
// Q5_0's and Q5_1's fifth bits of k-group j's low (lo) and high (hi)
// nibbles at bit 4 of each byte (quant_matrix.h's qh layout). A 16-bit
// shift moves no other byte's bit into bit 4: bits 0-3 move at most 4 up,
// bits 4-7 at most 3 down.
inline I32x8 q5_bits_lo(I32x8 qh, int j) { return shl16(qh, 4 - j) & splat8(0x10); }
inline I32x8 q5_bits_hi(I32x8 qh, int j) { return shr16(qh, j) & splat8(0x10); }
// The IQ4 types' 16 levels as unsigned bytes, kIQ4Values[i] + 128 (for
// Ops::q8_prepare), in both 16-byte halves.
inline I32x8 iq4_table() {
  return load16_twice(reinterpret_cast<const uint8_t*>(quant::kIQ4Values)) ^ splat8(-128);
}
// Byte-wise kIQ4Values[idx] + 128 for indices 0..15.
inline I32x8 iq4_lookup(I32x8 table, I32x8 idx) { return lookup16(table, idx); }
// The 2-bit codes of quarter k (bits 2k, 2k + 1) of Q2_K's and Q3_K's bytes.
inline I32x8 two_bits(I32x8 v, int k) { return shr16(v, 2 * k) & splat8(0x03); }
// Q3_K's high bit of quarter k from hmask bytes already shifted down by 4h:
// bit k moved to bit 2 (a 16-bit shift of at most 2 moves no other byte's
// bit there).
inline I32x8 q3_high_bit(I32x8 hm, int k) {
  const I32x8 b = k < 2 ? shl16(hm, 2 - k) : shr16(hm, k - 2);
  return b & splat8(0x04);
}
// One sub-block's 8 scales (32-bit lanes) from a vector of int16 pairs
// (lane r: the pair's first sub-block in the low half, the second in the
// high): half 0 or 1, sign-extended.
inline I32x8 pair_half(I32x8 pair, int half) {
  return half == 0 ? sra32(shl32(pair, 16), 16) : sra32(pair, 16);
}

// acc + scale * isum, lane by lane, vec_dot.h's step (scale * ad rounded first).
inline F32x8 contract_step(F32x8 acc, F32x8 scale, float ad, I32x8 isum) {
  return fmadd(scale * splat(ad), to_float(isum), acc);
}

// The tile's NT activation rows, act_row bytes apart, as blocks of Block,
// and its accumulators zeroed.
template <int NT, class Block>
inline void start_tile(const uint8_t* act, size_t act_row, const Block** a, F32x8* acc) {
  for (int t = 0; t < NT; ++t) {
    a[t] = reinterpret_cast<const Block*>(act + t * act_row);
    acc[t] = zero_f32x8();
  }
}

template <int NT>
inline void store_tile(const F32x8* acc, float* y, int64_t ldy) {
  for (int t = 0; t < NT; ++t) store(y + t * ldy, acc[t]);
}

struct Q8_0Tile {
  static constexpr int kTokens = kTileTokens;
  static constexpr size_t kBlock = 272;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x32* a[NT];
    F32x8 acc[NT];
    start_tile<NT>(act, act_row, a, acc);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      I32x8 isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = zero_i32x8();
      for (int j = 0; j < 8; ++j) {
        const typename Ops::Q8 w = Ops::q8_prepare(load32(blk + 16 + 32 * j));
        for (int t = 0; t < NT; ++t)
          isum[t] = Ops::q8_dot(isum[t], w, broadcast4(a[t][b].qs + 4 * j));
      }
      const F32x8 ws = load_fp16x8(blk);
      for (int t = 0; t < NT; ++t) {
        // sum (q + offset) a - offset sum a = sum q a, exactly.
        const I32x8 s = isum[t] - splat32(Ops::kQ8Offset * a[t][b].sum);
        acc[t] = contract_step(acc[t], ws, a[t][b].d, s);
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};

// The small blocks of 4- and 5-bit codes (Q4_0, Q4_1, Q5_0, Q5_1): u =
// the nibble, | the fifth bit << 4 when kHigh, so u in 0..31. Without a
// min the code is u - kOffset (8 or 16): sum (u - kOffset) a = sum u a -
// kOffset sum a; with one it is u itself and the min term's imin = sum a.
template <bool kMin, bool kHigh>
struct SmallTile {
  static constexpr int kTokens = kTileTokens;
  static constexpr size_t kQs = kMin ? 32 : 16;  // after d (and m)
  static constexpr size_t kQh = kQs + 128;
  static constexpr size_t kBlock = kQh + (kHigh ? 32 : 0);
  static constexpr int32_t kOffset = kMin ? 0 : kHigh ? 16 : 8;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x32* a[NT];
    F32x8 acc[NT];
    start_tile<NT>(act, act_row, a, acc);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      I32x8 isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = zero_i32x8();
      const I32x8 qh = kHigh ? load32(blk + kQh) : zero_i32x8();
      for (int j = 0; j < 4; ++j) {
        const I32x8 v = load32(blk + kQs + 32 * j);
        I32x8 lo = nibbles_lo(v), hi = nibbles_hi(v);
        if constexpr (kHigh) {
          lo = lo | q5_bits_lo(qh, j);
          hi = hi | q5_bits_hi(qh, j);
        }
        for (int t = 0; t < NT; ++t) {
          isum[t] = Ops::dot(isum[t], lo, broadcast4(a[t][b].qs + 4 * j));
          isum[t] = Ops::dot(isum[t], hi, broadcast4(a[t][b].qs + 16 + 4 * j));
        }
      }
      const F32x8 ws = load_fp16x8(blk);
      for (int t = 0; t < NT; ++t) {
        if constexpr (kOffset != 0) {
          isum[t] = isum[t] - splat32(kOffset * a[t][b].sum);
        }
        acc[t] = contract_step(acc[t], ws, a[t][b].d, isum[t]);
      }
      if constexpr (kMin) {
        const F32x8 wm = load_fp16x8(blk + 16);
        for (int t = 0; t < NT; ++t) {
          acc[t] = contract_step(acc[t], wm, a[t][b].d, splat32(a[t][b].sum));
        }
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};
using Q4_0Tile = SmallTile<false, false>;
using Q4_1Tile = SmallTile<true, false>;
using Q5_0Tile = SmallTile<false, true>;
using Q5_1Tile = SmallTile<true, true>;

// IQ4_NL: Q4_0's nibbles index kIQ4Values; the values, signed, go through
// Ops' signed-code path (stored + 128, the offset taken off with sum a).
struct IQ4_NLTile {
  static constexpr int kTokens = kTileTokens;
  static constexpr size_t kBlock = 144;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x32* a[NT];
    F32x8 acc[NT];
    start_tile<NT>(act, act_row, a, acc);
    const I32x8 table = iq4_table();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      I32x8 isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = zero_i32x8();
      for (int j = 0; j < 4; ++j) {
        const I32x8 v = load32(blk + 16 + 32 * j);
        const typename Ops::Q8 lo = Ops::q8_prepare(iq4_lookup(table, nibbles_lo(v)));
        const typename Ops::Q8 hi = Ops::q8_prepare(iq4_lookup(table, nibbles_hi(v)));
        for (int t = 0; t < NT; ++t) {
          isum[t] = Ops::q8_dot(isum[t], lo, broadcast4(a[t][b].qs + 4 * j));
          isum[t] = Ops::q8_dot(isum[t], hi, broadcast4(a[t][b].qs + 16 + 4 * j));
        }
      }
      const F32x8 ws = load_fp16x8(blk);
      for (int t = 0; t < NT; ++t) {
        const I32x8 s = isum[t] - splat32(Ops::kQ8Offset * a[t][b].sum);
        acc[t] = contract_step(acc[t], ws, a[t][b].d, s);
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};

// Q4_K and Q5_K (kHigh): the nibble, | the fifth bit << 4 for Q5_K.
template <bool kHigh>
struct KMinTile {
  static constexpr int kTokens = kTileTokensK;
  static constexpr size_t kBlock = kHigh ? 1440 : 1184;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x256* a[NT];
    F32x8 acc[NT];
    start_tile<NT>(act, act_row, a, acc);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      const uint8_t* sc = blk + 32;
      const uint8_t* mins = blk + 96;
      const uint8_t* qs = blk + 160;
      I32x8 isum[NT], imin[NT];
      for (int t = 0; t < NT; ++t) isum[t] = imin[t] = zero_i32x8();
      // Sub-blocks 2p (low nibbles) and 2p + 1 (high), 32 codes each.
      for (int p = 0; p < 4; ++p) {
        I32x8 lo[NT], hi[NT];
        for (int t = 0; t < NT; ++t) lo[t] = hi[t] = zero_i32x8();
        // Q5_K: the fifth bits of pair p, bits 2p and 2p + 1 of qh, at bits
        // 0 and 1 (then shifted to 4), of each byte after one 16-bit shift.
        const ShiftCount to_pair = shift_count(2 * p);
        for (int j = 0; j < 8; ++j) {
          const I32x8 v = load32(qs + 256 * p + 32 * j);
          I32x8 ql = nibbles_lo(v), qh = nibbles_hi(v);
          if constexpr (kHigh) {
            const I32x8 bits = shr16(load32(blk + 1184 + 32 * j), to_pair);
            const I32x8 bit4 = splat8(0x10);
            ql = ql | (shl16(bits, 4) & bit4);
            qh = qh | (shl16(bits, 3) & bit4);
          }
          for (int t = 0; t < NT; ++t) {
            lo[t] = Ops::dot(lo[t], ql, broadcast4(a[t][b].qs + 64 * p + 4 * j));
            hi[t] = Ops::dot(hi[t], qh, broadcast4(a[t][b].qs + 64 * p + 32 + 4 * j));
          }
        }
        const I32x8 sc_lo = widen_u8_to_32(sc + 16 * p);
        const I32x8 sc_hi = widen_u8_to_32(sc + 16 * p + 8);
        for (int t = 0; t < NT; ++t) {
          isum[t] = isum[t] + lo[t] * sc_lo;
          isum[t] = isum[t] + hi[t] * sc_hi;
        }
      }
      // imin = sum_s m[s] (bsums[2s] + bsums[2s + 1]): int16 pairs (m[2i],
      // m[2i + 1]) per lane times the two sub-blocks' activation sums.
      for (int i = 0; i < 4; ++i) {
        const I32x8 m = widen_u8_to_16(mins + 16 * i);
        for (int t = 0; t < NT; ++t) {
          const int16_t* bs = a[t][b].bsums + 4 * i;
          const uint32_t lo = static_cast<uint16_t>(bs[0] + bs[1]);
          const uint32_t hi = static_cast<uint16_t>(bs[2] + bs[3]);
          const I32x8 sums = splat32(static_cast<int32_t>(lo | (hi << 16)));
          imin[t] = imin[t] + madd16(m, sums);
        }
      }
      const F32x8 ws = load_fp16x8(blk);
      // wm = -dmin: the sign flipped exactly.
      const F32x8 wm = negate(load_fp16x8(blk + 16));
      for (int t = 0; t < NT; ++t) {
        acc[t] = contract_step(acc[t], ws, a[t][b].d, isum[t]);
        acc[t] = contract_step(acc[t], wm, a[t][b].d, imin[t]);
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};
using Q4_KTile = KMinTile<false>;
using Q5_KTile = KMinTile<true>;

// Q2_K and Q3_K (kQ3): 16 sub-blocks of 16, the 2-bit codes walked as
// Q6_K's (half h, quarter k, k-group j: elements 128h + 32k + 4j + e of
// sub-block 8h + 2k + j / 4). Q2_K: u = the 2 bits, isum = sum_s sc[s]
// dot_s, imin = sum_s m[s] bsums[s]. Q3_K: u = the 2 bits | the hmask bit
// << 2 in 0..7, the code u - 4, so isum = sum_s sc[s] dot_s - 4 sum_s
// sc[s] bsums[s].
template <bool kQ3>
struct TwoBitTile {
  static constexpr int kTokens = kTileTokensQ6;
  static constexpr size_t kBlock = kQ3 ? 912 : 672;
  static constexpr size_t kScales = kQ3 ? 16 : 32;
  static constexpr size_t kQs = kScales + 128;
  // Sub-blocks 2i and 2i + 1's scales as int16 pairs, per lane.
  static I32x8 scale_pair(const uint8_t* sc, int i) {
    if constexpr (kQ3) return widen_i8_to_16(sc + 16 * i);
    return widen_u8_to_16(sc + 16 * i) & splat16(0x0F);
  }
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x256* a[NT];
    F32x8 acc[NT];
    start_tile<NT>(act, act_row, a, acc);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      const uint8_t* sc = blk + kScales;
      I32x8 isum[NT], corr[NT];
      for (int t = 0; t < NT; ++t) isum[t] = corr[t] = zero_i32x8();
      for (int h = 0; h < 2; ++h) {
        for (int half = 0; half < 2; ++half) {
          I32x8 dot[4][NT];
          for (int k = 0; k < 4; ++k) {
            for (int t = 0; t < NT; ++t) dot[k][t] = zero_i32x8();
          }
          for (int j = 4 * half; j < 4 * half + 4; ++j) {
            const I32x8 v = load32(blk + kQs + 256 * h + 32 * j);
            I32x8 q[4] = {two_bits(v, 0), two_bits(v, 1), two_bits(v, 2), two_bits(v, 3)};
            if constexpr (kQ3) {
              I32x8 hm = load32(blk + kQs + 512 + 32 * j);
              if (h == 1) hm = shr16(hm, 4);
              for (int k = 0; k < 4; ++k) q[k] = q[k] | q3_high_bit(hm, k);
            }
            for (int k = 0; k < 4; ++k) {
              for (int t = 0; t < NT; ++t) {
                dot[k][t] =
                    Ops::dot(dot[k][t], q[k], broadcast4(a[t][b].qs + 128 * h + 32 * k + 4 * j));
              }
            }
          }
          for (int k = 0; k < 4; ++k) {
            const I32x8 scale = pair_half(scale_pair(sc, 4 * h + k), half);
            for (int t = 0; t < NT; ++t) {
              isum[t] = isum[t] + dot[k][t] * scale;
            }
          }
        }
      }
      // Q3_K: corr = sum_s sc[s] bsums[s]; Q2_K: imin = sum_s m[s] bsums[s].
      for (int i = 0; i < 8; ++i) {
        const I32x8 pair = kQ3 ? scale_pair(sc, i) : shr16(widen_u8_to_16(sc + 16 * i), 4);
        for (int t = 0; t < NT; ++t) {
          corr[t] = corr[t] + madd16(pair, broadcast4(a[t][b].bsums + 2 * i));
        }
      }
      const F32x8 ws = load_fp16x8(blk);
      if constexpr (kQ3) {
        for (int t = 0; t < NT; ++t) {
          const I32x8 s = isum[t] - shl32(corr[t], 2);
          acc[t] = contract_step(acc[t], ws, a[t][b].d, s);
        }
      } else {
        // wm = -dmin: the sign flipped exactly.
        const F32x8 wm = negate(load_fp16x8(blk + 16));
        for (int t = 0; t < NT; ++t) {
          acc[t] = contract_step(acc[t], ws, a[t][b].d, isum[t]);
          acc[t] = contract_step(acc[t], wm, a[t][b].d, corr[t]);
        }
      }
    }
    store_tile<NT>(acc, y, ldy);
  }
};
using Q2_KTile = TwoBitTile<false>;
using Q3_KTile = TwoBitTile<true>;

// IQ4_XS: 8 sub-blocks of 32 with IQ4_NL's codes, each sub-block's sum
// through Ops' signed-code path (its offset taken off with the sub-block's
// activation sum) and then times its scale.
struct IQ4_XSTile {
  static constexpr int kTokens = kTileTokensK;
  static constexpr size_t kBlock = 1104;
  template <int NT>
  static void run(const uint8_t* grp, int64_t nb, const uint8_t* act, size_t act_row, float* y,
                  int64_t ldy) {
    const quant::BlockQ8x256* a[NT];
    F32x8 acc[NT];
    start_tile<NT>(act, act_row, a, acc);
    const I32x8 table = iq4_table();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      I32x8 isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = zero_i32x8();
      for (int s = 0; s < 8; ++s) {
        I32x8 dot[NT];
        for (int t = 0; t < NT; ++t) dot[t] = zero_i32x8();
        for (int j = 0; j < 4; ++j) {
          const I32x8 v = load32(blk + 80 + 128 * s + 32 * j);
          const typename Ops::Q8 lo = Ops::q8_prepare(iq4_lookup(table, nibbles_lo(v)));
          const typename Ops::Q8 hi = Ops::q8_prepare(iq4_lookup(table, nibbles_hi(v)));
          for (int t = 0; t < NT; ++t) {
            dot[t] = Ops::q8_dot(dot[t], lo, broadcast4(a[t][b].qs + 32 * s + 4 * j));
            dot[t] = Ops::q8_dot(dot[t], hi, broadcast4(a[t][b].qs + 32 * s + 16 + 4 * j));
          }
        }
        const I32x8 scale = widen_i8_to_32(blk + 16 + 8 * s);
        for (int t = 0; t < NT; ++t) {
          const int32_t sum_a = int32_t{a[t][b].bsums[2 * s]} + a[t][b].bsums[2 * s + 1];
          const I32x8 d = dot[t] - splat32(Ops::kQ8Offset * sum_a);
          isum[t] = isum[t] + d * scale;
        }
      }
      const F32x8 ws = load_fp16x8(blk);
      for (int t = 0; t < NT; ++t) acc[t] = contract_step(acc[t], ws, a[t][b].d, isum[t]);
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
    F32x8 acc[NT];
    start_tile<NT>(act, act_row, a, acc);
    const I32x8 bits45 = splat8(0x30);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + b * kBlock;
      const uint8_t* sc = blk + 16;
      I32x8 isum[NT], corr[NT];
      for (int t = 0; t < NT; ++t) isum[t] = corr[t] = zero_i32x8();
      // Half h, k-groups j of one half of the quarters: the codes of
      // elements 128h + 32k + 4j + e for the four quarters k, sub-blocks
      // 8h + 2k + half, scale pair 4h + k.
      for (int h = 0; h < 2; ++h) {
        for (int half = 0; half < 2; ++half) {
          I32x8 dot[4][NT];
          for (int k = 0; k < 4; ++k) {
            for (int t = 0; t < NT; ++t) dot[k][t] = zero_i32x8();
          }
          for (int j = 4 * half; j < 4 * half + 4; ++j) {
            const uint8_t* codes = blk + 144 + 96 * (8 * h + j);
            const I32x8 lo01 = load32(codes);       // quarters 0 | 2
            const I32x8 lo23 = load32(codes + 32);  // quarters 1 | 3
            const I32x8 hi = load32(codes + 64);
            const I32x8 q[4] = {nibbles_lo(lo01) | (shl16(hi, 4) & bits45),
                                nibbles_lo(lo23) | (shl16(hi, 2) & bits45),
                                nibbles_hi(lo01) | (hi & bits45),
                                nibbles_hi(lo23) | (shr16(hi, 2) & bits45)};
            for (int k = 0; k < 4; ++k) {
              for (int t = 0; t < NT; ++t) {
                dot[k][t] =
                    Ops::dot(dot[k][t], q[k], broadcast4(a[t][b].qs + 128 * h + 32 * k + 4 * j));
              }
            }
          }
          for (int k = 0; k < 4; ++k) {
            const I32x8 scale = pair_half(widen_i8_to_16(sc + 16 * (4 * h + k)), half);
            for (int t = 0; t < NT; ++t) {
              isum[t] = isum[t] + dot[k][t] * scale;
            }
          }
        }
      }
      // The codes are q - 32: isum -= 32 sum_s scales[s] bsums[s].
      for (int i = 0; i < 8; ++i) {
        const I32x8 pair = widen_i8_to_16(sc + 16 * i);
        for (int t = 0; t < NT; ++t) {
          corr[t] = corr[t] + madd16(pair, broadcast4(a[t][b].bsums + 2 * i));
        }
      }
      const F32x8 ws = load_fp16x8(blk);
      for (int t = 0; t < NT; ++t) {
        const I32x8 s = isum[t] - shl32(corr[t], 5);
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
    case DType::kQ4_1:
      return run_tiles<Q4_1Tile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ5_0:
      return run_tiles<Q5_0Tile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ5_1:
      return run_tiles<Q5_1Tile>(pool, w, act, act_row, n, y, ldy);
    case DType::kIQ4_NL:
      return run_tiles<IQ4_NLTile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ2_K:
      return run_tiles<Q2_KTile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ3_K:
      return run_tiles<Q3_KTile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ4_K:
      return run_tiles<Q4_KTile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ5_K:
      return run_tiles<Q5_KTile>(pool, w, act, act_row, n, y, ldy);
    case DType::kIQ4_XS:
      return run_tiles<IQ4_XSTile>(pool, w, act, act_row, n, y, ldy);
    case DType::kQ6_K:
      return run_tiles<Q6_KTile>(pool, w, act, act_row, n, y, ldy);
    default:
      return;
  }
}
