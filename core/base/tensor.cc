// DType helpers and the half / bfloat16 conversions. The conversions work
// on bit patterns so they are exact, portable and independent of F16C.
#include "core/base/tensor.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/base/panel_layout.h"

namespace pvllm {

namespace {

struct DTypeInfo {
  const char* name;
  int64_t block_elems;
  size_t block_bytes;
};

// Indexed by the DType's value; the block sizes are ggml's (block_formats.h
// checks its structs against them).
constexpr DTypeInfo kDTypes[kNumDTypes] = {
    {"F32", 1, 4},      {"F16", 1, 2},      {"BF16", 1, 2},       {"Q8_0", 32, 34},
    {"Q4_0", 32, 18},   {"Q4_1", 32, 20},   {"Q5_0", 32, 22},     {"Q5_1", 32, 24},
    {"Q2_K", 256, 84},  {"Q3_K", 256, 110}, {"Q4_K", 256, 144},   {"Q5_K", 256, 176},
    {"Q6_K", 256, 210}, {"IQ4_NL", 32, 18}, {"IQ4_XS", 256, 136},
};

const DTypeInfo* info(DType t) {
  const auto i = static_cast<size_t>(t);
  return i < static_cast<size_t>(kNumDTypes) ? &kDTypes[i] : nullptr;
}

}  // namespace

const char* dtype_name(DType t) {
  const DTypeInfo* i = info(t);
  return i ? i->name : "unknown";
}

bool dtype_from_name(const std::string& name, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const char* n = kDTypes[i].name;
    if (name.size() != std::strlen(n)) continue;
    bool same = true;
    for (size_t c = 0; c < name.size() && same; ++c) {
      same = std::toupper(static_cast<unsigned char>(name[c])) == n[c];
    }
    if (same) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

bool dtype_is_quantized(DType t) {
  const DTypeInfo* i = info(t);
  return i != nullptr && i->block_elems > 1;
}

int64_t dtype_block_elems(DType t) {
  const DTypeInfo* i = info(t);
  return i ? i->block_elems : 1;
}

size_t dtype_block_bytes(DType t) {
  const DTypeInfo* i = info(t);
  return i ? i->block_bytes : 0;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  const DTypeInfo* i = info(t);
  if (i == nullptr || n < 0 || n % i->block_elems != 0) return 0;
  return static_cast<size_t>(n / i->block_elems) * i->block_bytes;
}

size_t Tensor::nbytes() const {
  if (layout == Layout::kPanels16) {
    panels::Shape s;
    if (shape.size() != 2 || !panels::shape_of(shape[0], shape[1], dtype, &s).ok()) return 0;
    return static_cast<size_t>(s.bytes());
  }
  if (dtype_is_quantized(dtype)) {
    if (shape.empty()) return 0;
    const size_t row = dtype_row_bytes(dtype, shape.back());
    return static_cast<size_t>(numel() / std::max<int64_t>(1, shape.back())) * row;
  }
  return static_cast<size_t>(numel()) * dtype_size(dtype);
}

size_t dtype_size(DType t) { return dtype_is_quantized(t) ? 0 : dtype_block_bytes(t); }

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Shifts `m` right by `shift` bits, rounding to nearest with ties to even.
uint32_t shift_round_even(uint32_t m, int shift) {
  const uint32_t kept = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) return kept + 1;
  return kept;
}

}  // namespace

float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mant) * bits_float(0x33800000u);  // 2^-24
    return bits_float(sign | float_bits(magnitude));
  }
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
  return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff);
  const uint32_t mant = u & 0x7fffff;
  if (exp == 0xff) {
    if (mant == 0) return sign | 0x7c00;
    // Keep the payload's top bits and force a quiet NaN so it stays a NaN.
    return static_cast<uint16_t>(sign | 0x7e00 | (mant >> 13));
  }
  const int32_t e = exp - 127;
  if (e > 15) return sign | 0x7c00;  // overflow to infinity
  if (e >= -14) {
    // Normal half. A carry out of the mantissa bumps the exponent, which is
    // exactly right, up to and including rounding to infinity.
    const uint32_t packed = (static_cast<uint32_t>(e + 15) << 23) | mant;
    return static_cast<uint16_t>(sign | shift_round_even(packed, 13));
  }
  // Below 2^-25 everything rounds to zero (2^-25 itself is a tie to zero).
  if (e < -25) return sign;
  // Subnormal half: value = (1.mant) * 2^e, in units of 2^-24. Rounding up to
  // 0x400 yields the smallest normal, again the right encoding.
  const uint32_t full = mant | 0x800000;
  return static_cast<uint16_t>(sign | shift_round_even(full, -e - 1));
}

float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffff) != 0) {
    // NaN: truncating could clear every payload bit and make it infinity.
    return static_cast<uint16_t>((u >> 16) | 0x0040);
  }
  const uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

}  // namespace pvllm
