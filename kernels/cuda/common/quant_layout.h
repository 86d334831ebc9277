// Where the quantized matmul kernels (quant_matmul.cu) find each weight
// element, and how they turn its code into a value, as plain C++ that both
// the kernels and a CPU test (tests/cuda/quant_layout_test.cc) call: the
// test runs these functions against core/quant's dequantization and an
// emulation of mma.sync m16n8k16, so a layout mistake shows without a GPU.
// nvcc's --expt-relaxed-constexpr lets device code call the constexpr ones;
// the few that reinterpret bits are host-device inline functions.
//
// The repacked weight W [n, k] of a Q8_0, Q4_0 or Q4_K tensor (made once at
// load by quant_repack.h; n a multiple of 8, k a multiple of the type's
// block) is two arrays:
//
//   codes: per group of 8 rows g = n / 8 and 32-element block b = k / 32 (a
//     Q4_K sub-block), a "tile" of 32 lanes. Lane l = 4 r + c holds row
//     8 g + r, elements 32 b + 8 c .. 32 b + 8 c + 7: 8 bytes (Q8_0, the
//     int8 codes in order) or 4 bytes (Q4_0, Q4_K: one little-endian word
//     of 8 nibbles, element e in nibble (e % 2) * 4 + e / 2, so the low
//     half-word holds the even elements and the high one the odd: a mask
//     0x000F000F after a shift of 4 i yields elements 2i and 2i + 1 as two
//     16-bit halves). Tiles are grouped in chunks of 16 / lane_bytes
//     consecutive blocks (2 for 8-bit, 4 for 4-bit codes), the last chunk
//     of a row group possibly narrower; inside a chunk of w blocks lane l's
//     w units are contiguous, so one 16-byte load per lane fetches a whole
//     chunk and a warp's load is 512 contiguous bytes. Row groups follow
//     each other, each nb blocks long.
//   scales: Q8_0, Q4_0: the fp16 d of every (row, block), row-major
//     [n, k / 32]. Q4_K: the first 16 bytes of every super-block (fp16 d,
//     fp16 dmin, the 12 bytes of 6-bit scales and mins), row-major
//     [n, k / 256].
//
// Both arrays together hold exactly the file's bytes (34 per 32 elements,
// 18 per 32, 144 per 256): nothing is expanded.
//
// Why a lane holds 8 consecutive elements of a row: the GEMV kernel dots
// them with 8 consecutive activations (one 16-byte load per activation
// row), and the tensor-core kernel makes B fragments from them directly.
// The mma's k order inside a 32-element block is a permutation of the
// physical one (b_pair, a_pair below) that A and B share, so the product is
// unchanged and A's fragments are also one 16-byte load per row.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PVLLM_QL_HD __host__ __device__ __forceinline__
#else
#define PVLLM_QL_HD inline
#endif

namespace pvllm::quant_layout {

constexpr int kGroupRows = 8;    // rows per tile (one mma n tile)
constexpr int kBlockElems = 32;  // elements per block (Q4_K: per sub-block)
constexpr int kLanes = 32;
constexpr int kChunkBytes = 16;  // one lane's load per chunk

// ---- where the codes are ---------------------------------------------------

// bits: 8 (Q8_0) or 4 (Q4_0, Q4_K).
constexpr int lane_bytes(int bits) { return bits == 8 ? 8 : 4; }
constexpr int tile_bytes(int bits) { return kLanes * lane_bytes(bits); }
constexpr int chunk_blocks(int bits) { return kChunkBytes / lane_bytes(bits); }

// The lane of a tile holding row r (0..7) of the group, element kk (0..31)
// of the block, and its position e (0..7) among the lane's elements.
constexpr int lane_of(int r, int kk) { return 4 * r + kk / 8; }
constexpr int elem_of(int kk) { return kk % 8; }

// Blocks in chunk `chunk` of a row group of nb blocks.
constexpr int chunk_width(int bits, int64_t nb, int64_t chunk) {
  const int64_t left = nb - chunk * chunk_blocks(bits);
  return left < chunk_blocks(bits) ? static_cast<int>(left) : chunk_blocks(bits);
}

// Byte offset, from the start of the codes, of lane `lane`'s unit of block
// b in row group g (nb blocks per row).
constexpr int64_t unit_offset(int bits, int64_t nb, int64_t g, int64_t b, int lane) {
  const int64_t chunk = b / chunk_blocks(bits);
  const int t = static_cast<int>(b % chunk_blocks(bits));
  const int w = chunk_width(bits, nb, chunk);
  return (g * nb + chunk * chunk_blocks(bits)) * tile_bytes(bits) +
         static_cast<int64_t>(w * lane + t) * lane_bytes(bits);
}

// The bit position of element e (0..7) in a 4-bit lane word.
constexpr int nibble_shift(int e) { return 4 * ((e % 2) * 4 + e / 2); }

// Element e's code from a lane unit given as 32-bit words (8-bit: two
// words, e / 4 then byte e % 4, as int8; 4-bit: one word, 0..15).
constexpr int code8(const uint32_t* unit, int e) {
  const int byte = static_cast<int>((unit[e / 4] >> (8 * (e % 4))) & 0xFF);
  return byte >= 128 ? byte - 256 : byte;
}
constexpr int code4(uint32_t word, int e) {
  return static_cast<int>((word >> nibble_shift(e)) & 0xF);
}

// ---- the mma (m16n8k16) k order ----------------------------------------------
//
// A 32-element block is two k16 steps s. In step s, B register j (b0, b1)
// holds the lane's elements 2 b_pair(s, j) and 2 b_pair(s, j) + 1 (lower
// half first); PTX puts them at logical k rows 2 (lane % 4) + 8 j + {0, 1}
// of the step. A's register r must hold the same physical k: for each of
// its rows, a lane loads the block's elements a_col(lane) .. + 7 (one
// 16-byte load), and register r of step s is pair a_pair(s, r) of those of
// row a_row(lane, r) of the m tile.
constexpr int b_pair(int s, int j) { return 2 * s + j; }
constexpr int a_row(int lane, int r) { return lane / 4 + 8 * (r % 2); }
constexpr int a_col(int lane) { return 8 * (lane % 4); }
constexpr int a_pair(int s, int r) { return 2 * s + r / 2; }

// ---- Q4_K's scales and mins --------------------------------------------------

// Byte j (0..11) of a super-block's 6-bit scale bytes, given as the three
// little-endian words after d and dmin.
constexpr uint32_t scale_byte(const uint32_t* s, int j) {
  return (s[j / 4] >> (8 * (j % 4))) & 0xFF;
}
// Sub-block j's (0..7) scale and min, as core/quant's k_scale_min.
constexpr int q4k_scale(const uint32_t* s, int j) {
  return j < 4
             ? static_cast<int>(scale_byte(s, j) & 63)
             : static_cast<int>((scale_byte(s, j + 4) & 0xF) | ((scale_byte(s, j - 4) >> 6) << 4));
}
constexpr int q4k_min(const uint32_t* s, int j) {
  return j < 4 ? static_cast<int>(scale_byte(s, j + 4) & 63)
               : static_cast<int>((scale_byte(s, j + 4) >> 4) | ((scale_byte(s, j) >> 6) << 4));
}

// ---- codes to values -----------------------------------------------------------

PVLLM_QL_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// An integer 0..255 as float without a conversion instruction: 2^23 + v
// has v in its mantissa.
PVLLM_QL_HD float small_uint_to_float(uint32_t v) {
  return bits_to_float(0x4B000000u | v) - 8388608.0f;
}

// a * b and a - b rounded to float, never contracted into an FMA, so the
// GEMV's weights are core/quant's bit for bit.
PVLLM_QL_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PVLLM_QL_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// The fp32 weight, formula and rounding as core/quant's dequantizers:
//   Q8_0: q * d; Q4_0: (q - 8) * d; Q4_K: (d * sc) * q - dmin * m.
PVLLM_QL_HD float q8_0_value(uint32_t byte, float d) {  // byte: the int8 code's bits
  return mul_rn(small_uint_to_float(byte ^ 0x80u) - 128.0f, d);
}
PVLLM_QL_HD float q4_0_value(uint32_t nibble, float d) {
  return mul_rn(small_uint_to_float(nibble) - 8.0f, d);
}
PVLLM_QL_HD float q4_k_value(uint32_t nibble, float d_sc, float dmin_m) {
  return sub_rn(mul_rn(d_sc, small_uint_to_float(nibble)), dmin_m);
}

// B fragment registers from codes, for the tensor-core kernel: two 16-bit
// values in one word (lower half = the lower element), each an integer
// code exactly (|code| <= 128 fits fp16's and bf16's mantissas), made with
// "magic" exponents instead of conversions. A 16-bit float whose exponent
// puts the unit in the last mantissa bit (fp16 0x6400 = 1024, bf16 0x4300 =
// 128) plus a small integer v in the mantissa is that float + v; subtracting
// the float (and the code's offset) leaves the code.
constexpr uint32_t kF16Magic = 0x64006400u;   // 1024 in each half
constexpr uint32_t kBF16Magic = 0x43004300u;  // 128 in each half
// Elements 2i and 2i + 1 of a 4-bit lane word over `magic`: magic + q.
constexpr uint32_t q4_pair_bits(uint32_t word, int i, uint32_t magic) {
  return ((word >> (4 * i)) & 0x000F000Fu) | magic;
}
// Elements 2p and 2p + 1 (p = 0, 1) of an 8-bit word (4 int8 codes) over
// fp16's magic: 1024 + (q + 128). bf16's 7-bit mantissa cannot hold 0..255:
// its kernel converts through float (small_uint_to_float) instead.
constexpr uint32_t q8_pair_bits_f16(uint32_t word, int p) {
  const uint32_t lo = ((word >> (16 * p)) & 0xFF) ^ 0x80;
  const uint32_t hi = ((word >> (16 * p + 8)) & 0xFF) ^ 0x80;
  return (0x6400u | lo) | ((0x6400u | hi) << 16);
}

}  // namespace pvllm::quant_layout
