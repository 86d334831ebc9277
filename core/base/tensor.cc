// DType helpers and the half / bfloat16 conversions. The conversions work
// on bit patterns so they are exact, portable and independent of F16C.
#include "core/base/tensor.h"

#include <cstring>

#include "core/base/panel_layout.h"

namespace pvllm {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "unknown";
}

size_t Tensor::nbytes() const {
  if (layout == Layout::kPanels16) {
    panels::Shape s;
    if (shape.size() != 2 || !panels::shape_of(shape[0], shape[1], dtype, &s).ok()) return 0;
    return static_cast<size_t>(s.bytes());
  }
  return static_cast<size_t>(numel()) * dtype_size(dtype);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
  }
  return 0;
}

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
