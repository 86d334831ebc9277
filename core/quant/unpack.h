// A block's integer codes in element order: the one place that reads where
// each element's bits sit (block_formats.h describes the layouts). The
// dequantizers and the reference dot products both start here. Each code
// is the integer the element's sub-block scale multiplies:
//   Q8_0 qs; Q4_0 q - 8; Q5_0 q - 16; Q4_1, Q5_1 q (the min is added
//   apart); IQ4_NL, IQ4_XS kIQ4Values[q]; Q2_K q in 0..3, Q4_K 0..15,
//   Q5_K 0..31 (the min subtracted apart); Q3_K -4..3; Q6_K q - 32.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/quant/block_formats.h"

namespace pvllm::quant {

// The nibbles of a 16-byte run holding 32 4-bit codes: element j is the low
// nibble of qs[j], element j + 16 the high one (Q4_0, Q4_1, Q5_*, IQ4_*).
inline void unpack_nibbles32(const uint8_t* qs, int offset, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<int8_t>((qs[j] & 0xF) + offset);
    out[j + 16] = static_cast<int8_t>((qs[j] >> 4) + offset);
  }
}

// Q5's codes: the nibbles plus bit i of the little-endian qh as bit 4.
inline void unpack_q5(const uint8_t* qs, const uint8_t* qh_bytes, int offset, int8_t* out) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  unpack_nibbles32(qs, 0, out);
  for (int i = 0; i < 32; ++i) {
    out[i] = static_cast<int8_t>((out[i] | static_cast<int>(((qh >> i) & 1) << 4)) + offset);
  }
}

inline void unpack(const BlockQ8_0& b, int8_t* out) { std::memcpy(out, b.qs, 32); }
inline void unpack(const BlockQ4_0& b, int8_t* out) { unpack_nibbles32(b.qs, -8, out); }
inline void unpack(const BlockQ4_1& b, int8_t* out) { unpack_nibbles32(b.qs, 0, out); }
inline void unpack(const BlockQ5_0& b, int8_t* out) { unpack_q5(b.qs, b.qh, -16, out); }
inline void unpack(const BlockQ5_1& b, int8_t* out) { unpack_q5(b.qs, b.qh, 0, out); }

inline void unpack(const BlockIQ4_NL& b, int8_t* out) {
  unpack_nibbles32(b.qs, 0, out);
  for (int i = 0; i < 32; ++i) out[i] = kIQ4Values[out[i]];
}

// Q2_K's and Q3_K's 2-bit field of element e: byte 32 * (e / 128) + e % 32,
// bits 2 * ((e % 128) / 32).
inline int two_bits(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

inline void unpack(const BlockQ2_K& b, int8_t* out) {
  for (int e = 0; e < 256; ++e) out[e] = static_cast<int8_t>(two_bits(b.qs, e));
}

inline void unpack(const BlockQ3_K& b, int8_t* out) {
  for (int e = 0; e < 256; ++e) {
    const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
    out[e] = static_cast<int8_t>(two_bits(b.qs, e) - (high ? 0 : 4));
  }
}

// Q4_K's and Q5_K's low 4 bits of element e: nibble lo (e % 64 < 32) or hi
// of byte 32 * (e / 64) + e % 32.
inline int k_nibble(const uint8_t* qs, int e) {
  const uint8_t byte = qs[32 * (e / 64) + e % 32];
  return e % 64 < 32 ? (byte & 0xF) : (byte >> 4);
}

inline void unpack(const BlockQ4_K& b, int8_t* out) {
  for (int e = 0; e < 256; ++e) out[e] = static_cast<int8_t>(k_nibble(b.qs, e));
}

inline void unpack(const BlockQ5_K& b, int8_t* out) {
  for (int e = 0; e < 256; ++e) {
    out[e] = static_cast<int8_t>(k_nibble(b.qs, e) | (((b.qh[e % 32] >> (e / 32)) & 1) << 4));
  }
}

inline void unpack(const BlockQ6_K& b, int8_t* out) {
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t low_byte = b.ql[64 * h + 32 * (k % 2) + l];
    const int low = k < 2 ? (low_byte & 0xF) : (low_byte >> 4);
    const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
    out[e] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

inline void unpack(const BlockIQ4_XS& b, int8_t* out) {
  for (int s = 0; s < 8; ++s) unpack_nibbles32(b.qs + 16 * s, 0, out + 32 * s);
  for (int e = 0; e < 256; ++e) out[e] = kIQ4Values[out[e]];
}

}  // namespace pvllm::quant
