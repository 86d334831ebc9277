// The block formats of ggml's quantized types, byte for byte as GGUF files
// store them: a row of n elements is n / kElems blocks, back to back, no
// padding. Scales are IEEE half floats kept as their bits (uint16_t, read
// with fp16_to_float). The element order inside a block is spelled out per
// struct; unpack.h reads the codes in that order (the dequantizers and dot
// products start there) and the quantizers write them the same way.
//
// Conventions of the comments: "element i" is the i-th value of the block
// as the row lists it; "nibble lo/hi of qs[j]" are bits 0-3 / 4-7.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/base/tensor.h"

namespace pvllm::quant {

inline constexpr int kBlock32 = 32;    // the small blocks: Q8_0, Q4_*, Q5_*, IQ4_NL
inline constexpr int kBlock256 = 256;  // the K super-blocks and IQ4_XS

// Q8_0: x = d * qs[i].
struct BlockQ8_0 {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kElems = 32;
  uint16_t d;     // fp16
  int8_t qs[32];  // element i
};

// Q4_0: x = d * (q - 8), q in 0..15. Element j is nibble lo of qs[j],
// element j + 16 nibble hi of qs[j] (j < 16).
struct BlockQ4_0 {
  static constexpr DType kType = DType::kQ4_0;
  static constexpr int kElems = 32;
  uint16_t d;  // fp16
  uint8_t qs[16];
};

// Q4_1: x = d * q + m, q in 0..15, nibbles placed as Q4_0's.
struct BlockQ4_1 {
  static constexpr DType kType = DType::kQ4_1;
  static constexpr int kElems = 32;
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[16];
};

// Q5_0: x = d * (q - 16), q in 0..31: the low 4 bits as Q4_0's nibbles,
// bit 4 of element i is bit i of qh (a little-endian uint32).
struct BlockQ5_0 {
  static constexpr DType kType = DType::kQ5_0;
  static constexpr int kElems = 32;
  uint16_t d;  // fp16
  uint8_t qh[4];
  uint8_t qs[16];
};

// Q5_1: x = d * q + m, q in 0..31, bits placed as Q5_0's.
struct BlockQ5_1 {
  static constexpr DType kType = DType::kQ5_1;
  static constexpr int kElems = 32;
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qh[4];
  uint8_t qs[16];
};

// IQ4_NL: x = d * kIQ4Values[q], q in 0..15, nibbles placed as Q4_0's.
struct BlockIQ4_NL {
  static constexpr DType kType = DType::kIQ4_NL;
  static constexpr int kElems = 32;
  uint16_t d;  // fp16
  uint8_t qs[16];
};

// The 16 levels of IQ4_NL and IQ4_XS (a non-uniform 4-bit grid).
inline constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Q2_K: 16 sub-blocks of 16. Sub-block s (elements 16s..16s+15) has
// scale sc = scales[s] & 15 and min m = scales[s] >> 4; x = d * sc * q -
// dmin * m, q in 0..3. Element i: half h = i / 128, r = i % 128, shift =
// 2 * (r / 32), l = r % 32; q = (qs[32h + l] >> shift) & 3.
struct BlockQ2_K {
  static constexpr DType kType = DType::kQ2_K;
  static constexpr int kElems = 256;
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
};

// Q3_K: 16 sub-blocks of 16, x = d * (sc - 32) * q, sc the 6-bit scale of
// the element's sub-block (q3k_scale), q in -4..3: the low 2 bits as Q2_K's
// q, and 4 subtracted when bit (i / 32) of hmask[i % 32] is clear.
struct BlockQ3_K {
  static constexpr DType kType = DType::kQ3_K;
  static constexpr int kElems = 256;
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];  // 16 6-bit scales: low 4 bits in [0, 8), high 2 bits in [8, 12)
  uint16_t d;          // fp16
};

// Q4_K: 8 sub-blocks of 32, x = d * sc * q - dmin * m, (sc, m) the 6-bit
// scale and min of the element's sub-block (k_scale_min), q in 0..15.
// Element i: pair p = i / 64, r = i % 64; q is nibble lo (r < 32) or hi
// (r >= 32) of qs[32p + r % 32].
struct BlockQ4_K {
  static constexpr DType kType = DType::kQ4_K;
  static constexpr int kElems = 256;
  uint16_t d;          // fp16
  uint16_t dmin;       // fp16
  uint8_t scales[12];  // 8 scales and 8 mins of 6 bits (k_scale_min)
  uint8_t qs[128];
};

// Q5_K: Q4_K with a fifth bit: q in 0..31, bit 4 of element i is bit
// (i / 32) of qh[i % 32].
struct BlockQ5_K {
  static constexpr DType kType = DType::kQ5_K;
  static constexpr int kElems = 256;
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};

// Q6_K: 16 sub-blocks of 16, x = d * scales[i / 16] * (q - 32), q in 0..63.
// Element i: half h = i / 128, r = i % 128, quarter k = r / 32, l = r % 32;
// low 4 bits: nibble (k < 2 ? lo : hi) of ql[64h + 32 * (k % 2) + l];
// high 2 bits: bits 2k, 2k+1 of qh[32h + l].
struct BlockQ6_K {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kElems = 256;
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // fp16
};

// IQ4_XS: 8 sub-blocks of 32, x = d * (ls - 32) * kIQ4Values[q], ls the
// 6-bit scale of the sub-block (iq4xs_scale); within sub-block s, element j
// is nibble lo of qs[16s + j], element j + 16 nibble hi (j < 16).
struct BlockIQ4_XS {
  static constexpr DType kType = DType::kIQ4_XS;
  static constexpr int kElems = 256;
  uint16_t d;           // fp16
  uint16_t scales_h;    // bits 2s, 2s+1: the high 2 bits of sub-block s's scale
  uint8_t scales_l[4];  // nibble s % 2 of scales_l[s / 2]: its low 4 bits
  uint8_t qs[128];
};

// ggml's block sizes. tensor.h's table is not constexpr, so these are
// literals here; quant_formats_test checks them (and kElems) against
// dtype_block_bytes / dtype_block_elems.
static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 2);
static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 2);
static_assert(sizeof(BlockQ4_1) == 20 && alignof(BlockQ4_1) == 2);
static_assert(sizeof(BlockQ5_0) == 22 && alignof(BlockQ5_0) == 2);
static_assert(sizeof(BlockQ5_1) == 24 && alignof(BlockQ5_1) == 2);
static_assert(sizeof(BlockIQ4_NL) == 18 && alignof(BlockIQ4_NL) == 2);
static_assert(sizeof(BlockQ2_K) == 84 && alignof(BlockQ2_K) == 2);
static_assert(sizeof(BlockQ3_K) == 110 && alignof(BlockQ3_K) == 2);
static_assert(sizeof(BlockQ4_K) == 144 && alignof(BlockQ4_K) == 2);
static_assert(sizeof(BlockQ5_K) == 176 && alignof(BlockQ5_K) == 2);
static_assert(sizeof(BlockQ6_K) == 210 && alignof(BlockQ6_K) == 2);
static_assert(sizeof(BlockIQ4_XS) == 136 && alignof(BlockIQ4_XS) == 2);

// A block of `Block` read from `blocks` (any alignment: tensors in a mapped
// file promise none): the i-th block of the row.
template <typename Block>
inline Block load_block(const void* blocks, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(blocks) + i * sizeof(Block), sizeof(Block));
  return b;
}

// Sub-block j's (j < 8) 6-bit scale and min in Q4_K's and Q5_K's 12 bytes:
// j < 4: the low 6 bits of bytes j and j + 4; j >= 4: the nibbles of byte
// j + 4 for the low 4 bits, bits 6-7 of bytes j - 4 and j for the high 2.
inline void k_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Sub-block s's (s < 16) 6-bit scale in Q3_K's 12 bytes, 0..63 (the
// weight's factor is this minus 32): low 4 bits nibble s / 8 of byte s % 8,
// high 2 bits bits 2 * (s / 4) of byte 8 + s % 4.
inline int q3k_scale(int s, const uint8_t* scales) {
  const int lo = (scales[s % 8] >> (4 * (s / 8))) & 0xF;
  const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return lo | (hi << 4);
}

// Sub-block s's (s < 8) 6-bit scale of an IQ4_XS block, 0..63.
inline int iq4xs_scale(int s, const BlockIQ4_XS& b) {
  return ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
}

}  // namespace pvllm::quant
