// quantize_row's dispatch, the plain conversions and the five linear 32-
// blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): one scale (and min) from the
// block's extremes, each code the scaled value rounded.
#include "core/quant/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

namespace pvllm::quant {
namespace {

// What a float-to-integer conversion of v gives: truncation toward zero
// (v is within int range in every use below).
inline int truncate_to_int(float v) { return static_cast<int>(v); }

// The value of largest magnitude in a 32-block (the first such) and that
// magnitude.
float block_signed_absmax(const float* x, float* amax_out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  *amax_out = amax;
  return max;
}

void block_min_max(const float* x, float* min_out, float* max_out) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  *min_out = min;
  *max_out = max;
}

// Q5's fifth bits: bit 4 of code i goes to bit i of qh.
void store_q5_codes(const uint8_t codes[32], uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
    qh |= static_cast<uint32_t>((codes[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((codes[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

template <typename Block>
Status quantize_typed(const float* x, int64_t n, void* dst) {
  const int64_t nb = n / Block::kElems;
  // Blocks are built in place of an aligned buffer, then copied (dst may
  // have any alignment).
  constexpr int64_t kChunk = 64;
  Block buffer[kChunk];
  auto* out = static_cast<unsigned char*>(dst);
  for (int64_t b = 0; b < nb; b += kChunk) {
    const int64_t count = std::min(kChunk, nb - b);
    quantize_blocks(x + b * Block::kElems, count, buffer);
    std::memcpy(out + b * sizeof(Block), buffer, static_cast<size_t>(count) * sizeof(Block));
  }
  return Status::Ok();
}

void store_halves(DType t, const float* x, int64_t n, void* dst) {
  auto* out = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = t == DType::kF16 ? float_to_fp16(x[i]) : float_to_bf16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

}  // namespace

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ8_0* y) {
  for (int64_t i = 0; i < num_blocks; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_fp16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ4_0* y) {
  for (int64_t i = 0; i < num_blocks; ++i, x += 32) {
    float amax;
    const float max = block_signed_absmax(x, &amax);
    const float d = max / -8.0f;  // -0 for an all-zero block, as stored
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, truncate_to_int(x[j] * id + 8.5f));
      const int q1 = std::min(15, truncate_to_int(x[j + 16] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ4_1* y) {
  for (int64_t i = 0; i < num_blocks; ++i, x += 32) {
    float min, max;
    block_min_max(x, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_fp16(d);
    y[i].m = float_to_fp16(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, truncate_to_int((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, truncate_to_int((x[j + 16] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ5_0* y) {
  for (int64_t i = 0; i < num_blocks; ++i, x += 32) {
    float amax;
    const float max = block_signed_absmax(x, &amax);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_fp16(d);
    uint8_t codes[32];
    for (int j = 0; j < 32; ++j) {
      codes[j] = static_cast<uint8_t>(std::min(31, truncate_to_int(x[j] * id + 16.5f)));
    }
    store_q5_codes(codes, y[i].qs, y[i].qh);
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ5_1* y) {
  for (int64_t i = 0; i < num_blocks; ++i, x += 32) {
    float min, max;
    block_min_max(x, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_fp16(d);
    y[i].m = float_to_fp16(min);
    uint8_t codes[32];
    // No clamp: (x - min) * id stays below 31.5.
    for (int j = 0; j < 32; ++j) {
      codes[j] = static_cast<uint8_t>(truncate_to_int((x[j] - min) * id + 0.5f));
    }
    store_q5_codes(codes, y[i].qs, y[i].qh);
  }
}

bool can_quantize(DType t) { return static_cast<int>(t) < kNumDTypes; }

Status quantize_row(DType t, const float* x, int64_t n, void* dst) {
  if (!can_quantize(t)) {
    return Unsupported(std::string("quantize_row: no quantizer for ") + dtype_name(t));
  }
  const int64_t block = dtype_block_elems(t);
  if (n < 0 || n % block != 0) {
    return InvalidArgument("quantize_row: " + std::to_string(n) + " values are not whole " +
                           dtype_name(t) + " blocks of " + std::to_string(block));
  }
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, x, static_cast<size_t>(n) * 4);
      return Status::Ok();
    case DType::kF16:
    case DType::kBF16:
      store_halves(t, x, n, dst);
      return Status::Ok();
    case DType::kQ8_0:
      return quantize_typed<BlockQ8_0>(x, n, dst);
    case DType::kQ4_0:
      return quantize_typed<BlockQ4_0>(x, n, dst);
    case DType::kQ4_1:
      return quantize_typed<BlockQ4_1>(x, n, dst);
    case DType::kQ5_0:
      return quantize_typed<BlockQ5_0>(x, n, dst);
    case DType::kQ5_1:
      return quantize_typed<BlockQ5_1>(x, n, dst);
    case DType::kIQ4_NL:
      return quantize_typed<BlockIQ4_NL>(x, n, dst);
    case DType::kQ2_K:
      return quantize_typed<BlockQ2_K>(x, n, dst);
    case DType::kQ3_K:
      return quantize_typed<BlockQ3_K>(x, n, dst);
    case DType::kQ4_K:
      return quantize_typed<BlockQ4_K>(x, n, dst);
    case DType::kQ5_K:
      return quantize_typed<BlockQ5_K>(x, n, dst);
    case DType::kQ6_K:
      return quantize_typed<BlockQ6_K>(x, n, dst);
    case DType::kIQ4_XS:
      return quantize_typed<BlockIQ4_XS>(x, n, dst);
  }
  return Unsupported("quantize_row: unknown dtype");
}

}  // namespace pvllm::quant
