#include "kernels/cpu/quant_matrix.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "core/quant/activation.h"
#include "core/quant/block_formats.h"
#include "core/quant/vec_dot.h"

namespace pvllm::cpu {
namespace {

using quant::BlockIQ4_NL;
using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::load_block;

constexpr int kRows = static_cast<int>(QuantMatrix::kGroupRows);

// Bytes [4r, 4r + 4) of each 32-byte k-group j at `out`: bytes at src[r] +
// 4j (the k-group's 4 codes of row r), num_groups k-groups, XORed with `flip`.
void interleave(const uint8_t* const* src, int num_groups, uint8_t flip, uint8_t* out) {
  for (int j = 0; j < num_groups; ++j) {
    for (int r = 0; r < kRows; ++r) {
      for (int e = 0; e < 4; ++e) out[32 * j + 4 * r + e] = src[r][4 * j + e] ^ flip;
    }
  }
}

template <typename Block>
void put_scales(const Block* b, uint16_t Block::*field, uint8_t* out) {
  for (int r = 0; r < kRows; ++r) std::memcpy(out + 2 * r, &(b[r].*field), 2);
}

void pack_q8_0(const BlockQ8_0* b, uint8_t* out) {
  put_scales(b, &BlockQ8_0::d, out);
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = reinterpret_cast<const uint8_t*>(b[r].qs);
  interleave(src, 8, 0x80, out + 16);  // q + 128: the int8's sign bit flipped
}

void pack_q4_0(const BlockQ4_0* b, uint8_t* out) {
  put_scales(b, &BlockQ4_0::d, out);
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = b[r].qs;
  interleave(src, 4, 0, out + 16);
}

void pack_q4_1(const BlockQ4_1* b, uint8_t* out) {
  put_scales(b, &BlockQ4_1::d, out);
  put_scales(b, &BlockQ4_1::m, out + 16);
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = b[r].qs;
  interleave(src, 4, 0, out + 32);
}

// Q5_0's and Q5_1's fifth bits, row r's in bytes [4r, 4r + 4), regrouped
// by k-group: bit b of byte e holds element 4b + e's (b < 4) or element
// 16 + 4(b - 4) + e's (b >= 4), so that one shift brings a k-group's bits
// to bit 4 of the bytes its nibbles fill.
template <typename Block>
void put_q5_high_bits(const Block* b, uint8_t* out) {
  for (int r = 0; r < kRows; ++r) {
    uint32_t qh;
    std::memcpy(&qh, b[r].qh, 4);
    for (int e = 0; e < 4; ++e) {
      uint8_t byte = 0;
      for (int k = 0; k < 4; ++k) {
        byte |= static_cast<uint8_t>(((qh >> (4 * k + e)) & 1) << k);
        byte |= static_cast<uint8_t>(((qh >> (16 + 4 * k + e)) & 1) << (4 + k));
      }
      out[4 * r + e] = byte;
    }
  }
}

void pack_q5_0(const BlockQ5_0* b, uint8_t* out) {
  put_scales(b, &BlockQ5_0::d, out);
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = b[r].qs;
  interleave(src, 4, 0, out + 16);
  put_q5_high_bits(b, out + 144);
}

void pack_q5_1(const BlockQ5_1* b, uint8_t* out) {
  put_scales(b, &BlockQ5_1::d, out);
  put_scales(b, &BlockQ5_1::m, out + 16);
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = b[r].qs;
  interleave(src, 4, 0, out + 32);
  put_q5_high_bits(b, out + 160);
}

void pack_iq4_nl(const BlockIQ4_NL* b, uint8_t* out) {
  put_scales(b, &BlockIQ4_NL::d, out);
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = b[r].qs;
  interleave(src, 4, 0, out + 16);
}

// Q4_K's and Q5_K's common part: d, dmin, the unpacked scales and mins and
// the nibbles (quant_matrix.h).
template <typename Block>
void pack_k_nibbles(const Block* b, uint8_t* out) {
  put_scales(b, &Block::d, out);
  put_scales(b, &Block::dmin, out + 16);
  uint8_t* sc = out + 32;
  uint8_t* mins = out + 96;
  for (int r = 0; r < kRows; ++r) {
    for (int s = 0; s < 8; ++s) {
      uint8_t scale, min;
      quant::k_scale_min(s, b[r].scales, &scale, &min);
      sc[8 * s + r] = scale;
      mins[16 * (s / 2) + 2 * r + s % 2] = min;
    }
  }
  for (int p = 0; p < 4; ++p) {
    const uint8_t* src[kRows];
    for (int r = 0; r < kRows; ++r) src[r] = b[r].qs + 32 * p;
    interleave(src, 8, 0, out + 160 + 256 * p);
  }
}

void pack_q4_k(const BlockQ4_K* b, uint8_t* out) { pack_k_nibbles(b, out); }

void pack_q5_k(const BlockQ5_K* b, uint8_t* out) {
  pack_k_nibbles(b, out);
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = b[r].qh;
  interleave(src, 8, 0, out + 1184);
}

// Q2_K's and Q3_K's 2-bit fields, half h's k-group j: the file's bytes
// qs[32h + 4j + e], each holding the four quarters' codes.
void put_two_bit_codes(const uint8_t* const* qs, uint8_t* out) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* src[kRows];
    for (int r = 0; r < kRows; ++r) src[r] = qs[r] + 32 * h;
    interleave(src, 8, 0, out + 256 * h);
  }
}

void pack_q2_k(const BlockQ2_K* b, uint8_t* out) {
  put_scales(b, &BlockQ2_K::d, out);
  put_scales(b, &BlockQ2_K::dmin, out + 16);
  uint8_t* sc = out + 32;
  for (int r = 0; r < kRows; ++r) {
    for (int s = 0; s < 16; ++s) sc[16 * (s / 2) + 2 * r + s % 2] = b[r].scales[s];
  }
  const uint8_t* qs[kRows];
  for (int r = 0; r < kRows; ++r) qs[r] = b[r].qs;
  put_two_bit_codes(qs, out + 160);
}

void pack_q3_k(const BlockQ3_K* b, uint8_t* out) {
  put_scales(b, &BlockQ3_K::d, out);
  uint8_t* sc = out + 16;
  for (int r = 0; r < kRows; ++r) {
    for (int s = 0; s < 16; ++s) {
      sc[16 * (s / 2) + 2 * r + s % 2] =
          static_cast<uint8_t>(quant::q3k_scale(s, b[r].scales) - 32);
    }
  }
  const uint8_t* src[kRows];
  for (int r = 0; r < kRows; ++r) src[r] = b[r].qs;
  put_two_bit_codes(src, out + 144);
  for (int r = 0; r < kRows; ++r) src[r] = b[r].hmask;
  interleave(src, 8, 0, out + 656);
}

void pack_iq4_xs(const BlockIQ4_XS* b, uint8_t* out) {
  put_scales(b, &BlockIQ4_XS::d, out);
  uint8_t* sc = out + 16;
  for (int r = 0; r < kRows; ++r) {
    for (int s = 0; s < 8; ++s) {
      sc[8 * s + r] = static_cast<uint8_t>(quant::iq4xs_scale(s, b[r]) - 32);
    }
  }
  for (int s = 0; s < 8; ++s) {
    const uint8_t* src[kRows];
    for (int r = 0; r < kRows; ++r) src[r] = b[r].qs + 16 * s;
    interleave(src, 4, 0, out + 80 + 128 * s);
  }
}

void pack_q6_k(const BlockQ6_K* b, uint8_t* out) {
  put_scales(b, &BlockQ6_K::d, out);
  uint8_t* sc = out + 16;
  for (int r = 0; r < kRows; ++r) {
    for (int s = 0; s < 16; ++s) {
      sc[16 * (s / 2) + 2 * r + s % 2] = static_cast<uint8_t>(b[r].scales[s]);
    }
  }
  // k-group j of half h: its three vectors side by side, so that the
  // kernel reads the block front to back.
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 8; ++j) {
      uint8_t* o = out + 144 + 96 * (8 * h + j);
      const uint8_t* src[kRows];
      for (int r = 0; r < kRows; ++r) src[r] = b[r].ql + 64 * h + 4 * j;
      interleave(src, 1, 0, o);
      for (int r = 0; r < kRows; ++r) src[r] = b[r].ql + 64 * h + 32 + 4 * j;
      interleave(src, 1, 0, o + 32);
      for (int r = 0; r < kRows; ++r) src[r] = b[r].qh + 32 * h + 4 * j;
      interleave(src, 1, 0, o + 64);
    }
  }
}

// Block b of the 8 rows at `rows` (row_bytes apart) into `out`.
template <typename Block>
void pack_block(const uint8_t* rows, size_t row_bytes, int64_t b,
                void (*pack)(const Block*, uint8_t*), uint8_t* out) {
  Block blocks[kRows];
  for (int r = 0; r < kRows; ++r) blocks[r] = load_block<Block>(rows + r * row_bytes, b);
  pack(blocks, out);
}

void pack_group(const QuantMatrix& m, int64_t g, uint8_t* out) {
  const uint8_t* rows = m.row(g * kRows);
  const size_t block_bytes = QuantMatrix::packed_block_bytes(m.dtype());
  for (int64_t b = 0; b < m.blocks_per_row(); ++b) {
    uint8_t* o = out + b * block_bytes;
    switch (m.dtype()) {
      case DType::kQ8_0:
        pack_block<BlockQ8_0>(rows, m.row_bytes(), b, pack_q8_0, o);
        break;
      case DType::kQ4_0:
        pack_block<BlockQ4_0>(rows, m.row_bytes(), b, pack_q4_0, o);
        break;
      case DType::kQ4_1:
        pack_block<BlockQ4_1>(rows, m.row_bytes(), b, pack_q4_1, o);
        break;
      case DType::kQ5_0:
        pack_block<BlockQ5_0>(rows, m.row_bytes(), b, pack_q5_0, o);
        break;
      case DType::kQ5_1:
        pack_block<BlockQ5_1>(rows, m.row_bytes(), b, pack_q5_1, o);
        break;
      case DType::kIQ4_NL:
        pack_block<BlockIQ4_NL>(rows, m.row_bytes(), b, pack_iq4_nl, o);
        break;
      case DType::kQ2_K:
        pack_block<BlockQ2_K>(rows, m.row_bytes(), b, pack_q2_k, o);
        break;
      case DType::kQ3_K:
        pack_block<BlockQ3_K>(rows, m.row_bytes(), b, pack_q3_k, o);
        break;
      case DType::kQ4_K:
        pack_block<BlockQ4_K>(rows, m.row_bytes(), b, pack_q4_k, o);
        break;
      case DType::kQ5_K:
        pack_block<BlockQ5_K>(rows, m.row_bytes(), b, pack_q5_k, o);
        break;
      case DType::kIQ4_XS:
        pack_block<BlockIQ4_XS>(rows, m.row_bytes(), b, pack_iq4_xs, o);
        break;
      case DType::kQ6_K:
        pack_block<BlockQ6_K>(rows, m.row_bytes(), b, pack_q6_k, o);
        break;
      default:
        return;
    }
  }
}

// Enough multiply-adds per thread that handing out the work costs little.
constexpr int64_t kMinMacsPerRange = int64_t{1} << 15;

}  // namespace

Status QuantMatrix::view(const Tensor& t, QuantMatrix* out) {
  if (t.empty() || !dtype_is_quantized(t.dtype) || t.layout != Layout::kRowMajor ||
      t.shape.size() != 2 || t.shape[0] <= 0 || t.shape[1] <= 0 ||
      t.shape[1] % dtype_block_elems(t.dtype) != 0) {
    return InvalidArgument("quantized view: " + t.name +
                           " is not a row-major matrix of whole blocks of a quantized type");
  }
  QuantMatrix m;
  m.data_ = static_cast<const uint8_t*>(t.data);
  m.dtype_ = t.dtype;
  m.rows_ = t.shape[0];
  m.cols_ = t.shape[1];
  m.row_bytes_ = dtype_row_bytes(t.dtype, t.shape[1]);
  *out = std::move(m);
  return Status::Ok();
}

Status QuantMatrix::make(const Tensor& t, ThreadPool* pool, QuantMatrix* out) {
  if (quant_gemm_supports(t.dtype) && t.shape.size() == 2 && t.shape[0] >= kGroupRows) {
    return pack(t, pool, out);
  }
  return view(t, out);
}

Status QuantMatrix::pack(const Tensor& t, ThreadPool* pool, QuantMatrix* out) {
  QuantMatrix m;
  PVLLM_RETURN_IF_ERROR(view(t, &m));
  const size_t block_bytes = packed_block_bytes(m.dtype_);
  if (block_bytes == 0 || m.rows_ < kGroupRows) {
    return InvalidArgument("quantized pack: " + t.name + " (" + dtype_name(t.dtype) +
                           ") has no interleaved layout or fewer than 8 rows");
  }
  m.num_groups_ = m.rows_ / kGroupRows;
  m.group_bytes_ = m.blocks_per_row() * static_cast<int64_t>(block_bytes);
  const size_t bytes = static_cast<size_t>(m.num_groups_ * m.group_bytes_);
  m.packed_ = allocate_host(bytes);
  if (m.packed_ == nullptr) {
    return OutOfMemory("quantized pack: cannot allocate " + std::to_string(bytes) + " bytes for " +
                       t.name);
  }
  auto groups = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) pack_group(m, g, m.packed_.get() + g * m.group_bytes_);
  };
  if (pool == nullptr) {
    groups(0, m.num_groups_);
  } else {
    pool->parallel_for(m.num_groups_, groups);
  }
  *out = std::move(m);
  return Status::Ok();
}

size_t QuantMatrix::packed_block_bytes(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return 272;
    case DType::kQ4_0:
    case DType::kIQ4_NL:
      return 144;
    case DType::kQ4_1:
      return 160;
    case DType::kQ5_0:
      return 176;
    case DType::kQ5_1:
      return 192;
    case DType::kQ2_K:
      return 672;
    case DType::kQ3_K:
      return 912;
    case DType::kQ4_K:
      return 1184;
    case DType::kQ5_K:
      return 1440;
    case DType::kIQ4_XS:
      return 1104;
    case DType::kQ6_K:
      return 1680;
    default:
      return 0;
  }
}

size_t QuantMatrix::nbytes() const {
  const int64_t packed_rows = num_groups_ * kGroupRows;
  return static_cast<size_t>(num_groups_ * group_bytes_) +
         static_cast<size_t>(rows_ - packed_rows) * row_bytes_;
}

Status quant_matmul(ThreadPool* pool, const float* x, int64_t n, const QuantMatrix& w, float* y,
                    int64_t ldy) {
  if (n <= 0 || w.empty()) return Status::Ok();
  const quant::ActivationKind kind = quant::activation_kind(w.dtype());
  const size_t act_row = quant::activation_row_bytes(kind, w.cols());
  // The activations of one call, kept by the thread that drives the
  // backend so that steps do not allocate.
  thread_local std::vector<float> act_storage;
  const size_t floats = (act_row * static_cast<size_t>(n) + sizeof(float) - 1) / sizeof(float);
  try {
    if (act_storage.size() < floats) act_storage.resize(floats);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("quant_matmul: cannot allocate " + std::to_string(floats * sizeof(float)) +
                       " bytes of quantized activations");
  }
  auto* act = reinterpret_cast<unsigned char*>(act_storage.data());
  const int64_t cols = w.cols();
  auto quantize = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      quantize_activations(kind, x + t * cols, cols, act + t * act_row);
    }
  };
  // The interleaved rows through the fast kernel, the others (all of them
  // without a copy) through the reference.
  const bool fast = w.packed() && quant_gemm_supports(w.dtype());
  const int64_t first_ref = fast ? w.num_groups() * QuantMatrix::kGroupRows : 0;
  auto rows = [&](int64_t i0, int64_t i1) {
    for (int64_t r = first_ref + i0; r < first_ref + i1; ++r) {
      const uint8_t* wr = w.row(r);
      for (int64_t t = 0; t < n; ++t) {
        y[t * ldy + r] = quant::vec_dot(w.dtype(), wr, act + t * act_row, cols);
      }
    }
  };
  const int64_t num_ref = w.rows() - first_ref;
  if (pool == nullptr) {
    quantize(0, n);
  } else {
    pool->parallel_for(n, quantize, std::max<int64_t>(1, kMinMacsPerRange / cols));
  }
  if (fast) quant_gemm(pool, w, act, act_row, n, y, ldy, QuantIntDot::kBest);
  if (num_ref == 0) return Status::Ok();
  if (pool == nullptr) {
    rows(0, num_ref);
  } else {
    pool->parallel_for(num_ref, rows, std::max<int64_t>(1, kMinMacsPerRange / (cols * n)));
  }
  return Status::Ok();
}

}  // namespace pvllm::cpu
