// Each block's codes in element order (core/quant/unpack.h), each written
// to the lane unit and position that common/quant_layout.h names.
#include "kernels/cuda/quant_repack.h"

#include <cstring>
#include <string>

#include "core/quant/block_formats.h"
#include "core/quant/unpack.h"
#include "kernels/cuda/common/quant_layout.h"

namespace pvllm {
namespace {

namespace ql = quant_layout;

int code_bits(DType dtype) { return dtype == DType::kQ8_0 ? 8 : 4; }

// Stores element (row, kk) of block b: an int8 code byte (8 bits) or a
// nibble (4 bits, 0..15) into its lane unit.
void put_code(int bits, int64_t nb, int64_t row, int64_t b, int kk, int code, uint8_t* codes) {
  const int r = static_cast<int>(row % ql::kGroupRows);
  const int e = ql::elem_of(kk);
  uint8_t* unit = codes + ql::unit_offset(bits, nb, row / ql::kGroupRows, b, ql::lane_of(r, kk));
  if (bits == 8) {
    unit[e] = static_cast<uint8_t>(code);
  } else {
    const int shift = ql::nibble_shift(e);
    unit[shift / 8] |= static_cast<uint8_t>((code & 0xF) << (shift % 8));
  }
}

// Q8_0 and Q4_0: one block of codes and one fp16 d per 32 elements.
template <typename Block>
void repack_small_blocks(const void* data, int64_t n, int64_t k, int nibble_offset,
                         QuantRepacked* out) {
  const int64_t nb = k / quant::kBlock32;
  const int bits = code_bits(Block::kType);
  int8_t q[32];
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t b = 0; b < nb; ++b) {
      const auto block = quant::load_block<Block>(data, row * nb + b);
      quant::unpack(block, q);
      for (int kk = 0; kk < 32; ++kk) {
        put_code(bits, nb, row, b, kk, q[kk] + nibble_offset, out->codes.data());
      }
      std::memcpy(&out->scales[(row * nb + b) * 2], &block.d, 2);
    }
  }
}

void repack_q4_k(const void* data, int64_t n, int64_t k, QuantRepacked* out) {
  const int64_t nsb = k / quant::kBlock256;
  const int64_t nb = k / quant::kBlock32;
  int8_t q[256];
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const auto block = quant::load_block<quant::BlockQ4_K>(data, row * nsb + sb);
      quant::unpack(block, q);
      for (int i = 0; i < 256; ++i) {
        put_code(4, nb, row, sb * 8 + i / 32, i % 32, q[i], out->codes.data());
      }
      uint8_t* header = &out->scales[(row * nsb + sb) * 16];
      std::memcpy(header, &block.d, 2);
      std::memcpy(header + 2, &block.dmin, 2);
      std::memcpy(header + 4, block.scales, 12);
    }
  }
}

}  // namespace

Status quant_matmul_check_weight(DType dtype, int64_t n, int64_t k) {
  if (dtype != DType::kQ8_0 && dtype != DType::kQ4_0 && dtype != DType::kQ4_K) {
    return InvalidArgument(std::string("quantized matmul: weights of type ") + dtype_name(dtype) +
                           " are not served (Q8_0, Q4_0 and Q4_K are)");
  }
  const int64_t block = dtype_block_elems(dtype);
  if (n <= 0 || n % ql::kGroupRows != 0) {
    return InvalidArgument("quantized matmul: " + std::to_string(n) +
                           " rows, not a positive multiple of 8");
  }
  if (k <= 0 || k % block != 0) {
    return InvalidArgument("quantized matmul: row length " + std::to_string(k) +
                           " is not a positive multiple of " + std::to_string(block));
  }
  return Status::Ok();
}

int64_t quant_codes_bytes(DType dtype, int64_t n, int64_t k) {
  return n * k * code_bits(dtype) / 8;
}

int64_t quant_scales_bytes(DType dtype, int64_t n, int64_t k) {
  return dtype == DType::kQ4_K ? n * (k / quant::kBlock256) * 16 : n * (k / quant::kBlock32) * 2;
}

Status quant_repack(DType dtype, const void* data, int64_t n, int64_t k, QuantRepacked* out) {
  const Status s = quant_matmul_check_weight(dtype, n, k);
  if (!s.ok()) return s;
  out->dtype = dtype;
  out->n = n;
  out->k = k;
  out->codes.assign(static_cast<size_t>(quant_codes_bytes(dtype, n, k)), 0);
  out->scales.assign(static_cast<size_t>(quant_scales_bytes(dtype, n, k)), 0);
  switch (dtype) {
    case DType::kQ8_0:
      repack_small_blocks<quant::BlockQ8_0>(data, n, k, 0, out);
      break;
    case DType::kQ4_0:
      repack_small_blocks<quant::BlockQ4_0>(data, n, k, 8, out);
      break;
    default:
      repack_q4_k(data, n, k, out);
      break;
  }
  return Status::Ok();
}

}  // namespace pvllm
