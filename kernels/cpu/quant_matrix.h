// A weight matrix in a block-quantized type (Q8_0, Q4_K, ...; DType), as
// the CPU backend serves it, and its product with float activations.
//
// Two forms of the same rows. The view: the rows exactly as the file stores
// them (ggml's blocks, row after row), read in place from the mapping. The
// interleaved copy, made once at load for the types the fast kernels know
// (quant_gemm.cc): rows in groups of 8, each group block by block, every
// block of the 8 rows laid out so that one 32-byte load holds 4
// consecutive codes of each of the 8 rows (row r in bytes [4r, 4r + 4)), a
// row per 32-bit lane. Its size is within 4% of the file's (Q3_K: 3.6%
// more, Q4_K 2.8%, Q5_K 2.3%, IQ4_XS 1.5%, the rest equal); the rows past
// the last multiple of 8 are only in the view.
//
// The interleaved block of 8 rows, per type (offsets in bytes; fp16 scales
// kept as the file's bits; "[j][r][4]" is k-group j, row r, 4 bytes):
//   Q8_0 (272): d[8] fp16 | qs [8 j][8 r][4] as unsigned q + 128
//   Q4_0 (144): d[8] fp16 | qs [4 j][8 r][4], the file's bytes: nibble lo
//               of byte 4j + e is element 4j + e, nibble hi element
//               16 + 4j + e (q in 0..15, the 8 subtracted apart)
//   IQ4_NL (144): Q4_0's, the nibbles indexing kIQ4Values
//   Q4_1 (160): d[8] | m[8] fp16 | qs as Q4_0's
//   Q5_0 (176): d[8] | qs as Q4_0's (the low 4 bits) | qh [8 r][4] (the
//               fifth bits): bit b of byte e is element 4b + e's for b < 4,
//               element 16 + 4(b - 4) + e's for b >= 4
//   Q5_1 (192): d[8] | m[8] | qs as Q4_0's | qh as Q5_0's
//   Q2_K (672): d[8] | dmin[8] | scales [8 i][8 r][2] u8, the file's bytes
//               scales[2i], scales[2i + 1] (scale lo nibble, min hi) |
//               qs [2 h][8 j][8 r][4] the file's qs[32h + 4j + e] (bits 2k,
//               2k + 1: element 128h + 32k + 4j + e)
//   Q3_K (912): d[8] | sc [8 i][8 r][2] i8 (q3k_scale - 32 of sub-blocks
//               2i, 2i + 1) | qs as Q2_K's | hmask [8 j][8 r][4] the file's
//               hmask[4j + e] (bit 4h + k: element 128h + 32k + 4j + e)
//   Q4_K (1184): d[8] | dmin[8] | sc [8 s][8 r] u8 | m [4 i][8 r][2] u8
//               (the mins of sub-blocks 2i, 2i + 1) | qs [4 p][8 j][8 r][4],
//               the file's qs[32p + 4j + e] (lo nibble sub-block 2p, hi 2p + 1)
//   Q5_K (1440): Q4_K's 1184 | qh [8 j][8 r][4] the file's qh[4j + e] (bit
//               2p: the lo nibble of pair p's fifth bit, 2p + 1 the hi's)
//   Q6_K (1680): d[8] | sc [8 i][8 r][2] i8 (scales[2i], scales[2i + 1]) |
//               [2 h][8 j] 96 bytes each: [8 r][4] of the file's ql[64h +
//               4j + e], of ql[64h + 32 + 4j + e], of qh[32h + 4j + e]
//   IQ4_XS (1104): d[8] | sc [8 s][8 r] i8 (iq4xs_scale - 32) |
//               qs [8 s][4 j][8 r][4] the file's qs[16s + 4j + e] (nibble
//               lo element 32s + 4j + e, hi 32s + 16 + 4j + e)
//
// quant_matmul quantizes each activation row to int8 blocks
// (core/quant/activation.h) and takes each output as the dot product of a
// weight row with them (core/quant/vec_dot.h): the integer sums exact, the
// float steps in the order that header fixes, in the fast kernels as in the
// scalar reference. So an output does not depend on the batch, the thread
// count, the form or the ISA variant.
#pragma once

#include <cstdint>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/quant/activation.h"
#include "kernels/cpu/host_buffer.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu {

class QuantMatrix {
 public:
  static constexpr int64_t kGroupRows = 8;

  QuantMatrix() = default;

  // Serves `t`, a 2-D row-major tensor of a quantized type whose rows are a
  // whole number of blocks, in place; its bytes must outlive the matrix.
  // InvalidArgument otherwise.
  static Status view(const Tensor& t, QuantMatrix* out);
  // The view, plus the interleaved copy when the active ISA variant has a
  // kernel for t's type (quant_gemm_supports) and t has 8 rows or more.
  // OutOfMemory when the copy cannot be allocated. The pool spreads the copy.
  static Status make(const Tensor& t, ThreadPool* pool, QuantMatrix* out);
  // The view plus the interleaved copy whatever the active variant runs
  // (tests and benchmarks call each variant's kernels on it); InvalidArgument
  // for a type without an interleaved layout or under 8 rows.
  static Status pack(const Tensor& t, ThreadPool* pool, QuantMatrix* out);

  // Bytes of one interleaved block of 8 rows; 0 for a type without a layout.
  static size_t packed_block_bytes(DType t);

  DType dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  size_t row_bytes() const { return row_bytes_; }
  const uint8_t* row(int64_t r) const { return data_ + static_cast<size_t>(r) * row_bytes_; }
  bool empty() const { return data_ == nullptr; }

  bool packed() const { return packed_ != nullptr; }
  // Groups of 8 rows in the interleaved copy (0 without one): rows
  // [0, 8 * num_groups()).
  int64_t num_groups() const { return num_groups_; }
  int64_t blocks_per_row() const { return cols_ / dtype_block_elems(dtype_); }
  // Group g's blocks, blocks_per_row() of packed_block_bytes(dtype()) each.
  const uint8_t* group(int64_t g) const { return packed_.get() + g * group_bytes_; }
  // The bytes a product reads: the interleaved groups and the rows past them.
  size_t nbytes() const;

 private:
  const uint8_t* data_ = nullptr;
  DType dtype_ = DType::kQ8_0;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  size_t row_bytes_ = 0;
  HostBuffer packed_;  // the interleaved copy, or empty
  int64_t num_groups_ = 0;
  int64_t group_bytes_ = 0;
};

// y[t * ldy + r] = x[t] . W[r] for t < n, r < w.rows(): x [n, w.cols()]
// float, its rows quantized here (into a buffer the calling thread keeps).
// OutOfMemory when that buffer cannot grow.
Status quant_matmul(ThreadPool* pool, const float* x, int64_t n, const QuantMatrix& w, float* y,
                    int64_t ldy);

// The fast kernels of the ISA variants (quant_gemm.cc, quant_activation.cc);
// these forward to the active one (dispatch.cc).

// quant::quantize_activation_row, byte for byte: 8 lanes at a time on the
// AVX2 and AVX-512 variants, the reference itself on the others.
void quantize_activations(quant::ActivationKind kind, const float* x, int64_t n, void* dst);

// True when the variant has a kernel for weights of type t.
bool quant_gemm_supports(DType t);

// Which integer dot products the kernel runs: the best the CPU has (VNNI's
// vpdpbusd where present), or the AVX2 ones even then (so tests cover both).
enum class QuantIntDot : uint8_t { kBest = 0, kNoVnni = 1 };

// y[t * ldy + r] = W[r] . act[t] for t < n and r < 8 * w.num_groups(), as
// quant::vec_dot gives it, bit for bit. w packed, of a type the variant
// supports (else nothing is written); act [n] rows of act_row bytes, each
// quantize_activation_row(activation_kind(w.dtype()), ...) of w.cols()
// values, 4-byte aligned.
void quant_gemm(ThreadPool* pool, const QuantMatrix& w, const void* act, size_t act_row, int64_t n,
                float* y, int64_t ldy, QuantIntDot dot);

}  // namespace pvllm::cpu
