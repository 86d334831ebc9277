// The reference dot products (core/quant/vec_dot.h) and the activation
// quantizer (activation.h), on random rows of every type: quantized
// weights, and raw random blocks that reach every code and scale.
//
// What is checked, per row pair, with w[i] the dequantized weights
// (dequantize_row, bit for bit ggml's: quant_dequantize_test) and a[i] =
// ad * qa[i] the dequantized activations (in double, exactly):
//  1. The integer part: per block, ws * ad * isum + wm * ad * imin (in
//     double) equals sum_i w[i] * a[i] (in double). Types without a min
//     dequantize exactly in float (a code times an fp16 scale times a
//     sub-scale fits in 24 bits), so the two agree to double rounding; for
//     Q4_1, Q5_1, Q2_K, Q4_K, Q5_K each w[i] is one float subtraction off
//     its exact value: within 2^-24 |w[i]|.
//  2. The float contract: vec_dot is the exact value E = sum of the block
//     terms T (ws*ad*isum and wm*ad*imin) up to the roundings the contract
//     names: ws * ad and (float)isum, each a relative 2^-24, and one per
//     fmaf, a relative 2^-24 of the running sum, itself at most sum |T| (to
//     first order). So |vec_dot - E| <= (K + 2) 2^-24 sum |T| for K fmafs
//     (the standard bound for a recursive sum); with 1., vec_dot is within
//     that plus 2^-24 sum |w[i] a[i]| of the fp64 dot of w and a.
//  3. vec_dot is, bit for bit, the contract applied to block_dot's terms.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/quant/activation.h"
#include "core/quant/block_formats.h"
#include "core/quant/dequantize.h"
#include "core/quant/quantize.h"
#include "core/quant/vec_dot.h"

namespace pvllm::quant {
namespace {

constexpr double kU = 1.0 / (1 << 24);  // 2^-24, binary32's unit roundoff

constexpr DType kQuantizedTypes[] = {DType::kQ8_0, DType::kQ4_0,   DType::kQ4_1, DType::kQ5_0,
                                     DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                                     DType::kQ4_K, DType::kQ5_K,   DType::kQ6_K, DType::kIQ4_XS};

float activation_scale(ActivationKind kind, const unsigned char* row, int64_t b) {
  if (kind == ActivationKind::kQ8x32) return reinterpret_cast<const BlockQ8x32*>(row)[b].d;
  return reinterpret_cast<const BlockQ8x256*>(row)[b].d;
}

int8_t activation_code(ActivationKind kind, const unsigned char* row, int64_t i) {
  if (kind == ActivationKind::kQ8x32) {
    return reinterpret_cast<const BlockQ8x32*>(row)[i / 32].qs[i % 32];
  }
  return reinterpret_cast<const BlockQ8x256*>(row)[i / 256].qs[i % 256];
}

// Activation rows: one quantized row and what it stands for.
struct ActivationRow {
  std::vector<unsigned char> bytes;
  std::vector<double> values;  // d * q, exact in double
};

ActivationRow quantize_activations(DType weight, const std::vector<float>& x) {
  const ActivationKind kind = activation_kind(weight);
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t block = activation_block_elems(kind);
  ActivationRow row;
  row.bytes.resize(activation_row_bytes(kind, n));
  quantize_activation_row(kind, x.data(), n, row.bytes.data());
  for (int64_t i = 0; i < n; ++i) {
    row.values.push_back(double(activation_scale(kind, row.bytes.data(), i / block)) *
                         activation_code(kind, row.bytes.data(), i));
  }
  return row;
}

// A random finite fp16 scale of moderate size, either sign when `signed_ok`.
uint16_t random_half(std::mt19937& rng, bool signed_ok) {
  std::uniform_real_distribution<float> mag(-12.0f, 2.0f);
  float v = std::exp2(mag(rng));
  if (signed_ok && (rng() & 1)) v = -v;
  return float_to_fp16(v);
}

// A weight row of random bytes: every code, scale and sign pattern the
// format can hold, with the fp16 fields made finite.
std::vector<unsigned char> random_blocks(DType t, int64_t n, std::mt19937& rng) {
  std::vector<unsigned char> bytes(dtype_row_bytes(t, n));
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  const size_t block = dtype_block_bytes(t);
  for (size_t off = 0; off < bytes.size(); off += block) {
    unsigned char* p = bytes.data() + off;
    auto put = [&](size_t at, uint16_t h) { std::memcpy(p + at, &h, 2); };
    switch (t) {
      case DType::kQ8_0:
      case DType::kQ4_0:
      case DType::kQ5_0:
      case DType::kIQ4_NL:
      case DType::kIQ4_XS:
        put(0, random_half(rng, true));
        break;
      case DType::kQ4_1:
      case DType::kQ5_1:
        put(0, random_half(rng, true));
        put(2, random_half(rng, true));
        break;
      case DType::kQ4_K:
      case DType::kQ5_K:
        put(0, random_half(rng, false));
        put(2, random_half(rng, false));
        break;
      case DType::kQ2_K:
        put(offsetof(BlockQ2_K, d), random_half(rng, false));
        put(offsetof(BlockQ2_K, dmin), random_half(rng, false));
        break;
      case DType::kQ3_K:
        put(offsetof(BlockQ3_K, d), random_half(rng, true));
        break;
      case DType::kQ6_K:
        put(offsetof(BlockQ6_K, d), random_half(rng, true));
        break;
      default:
        break;
    }
  }
  return bytes;
}

// Checks 1-3 of the header on one weight row and one activation row.
void check_dot(DType t, const unsigned char* w, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const ActivationKind kind = activation_kind(t);
  const ActivationRow act = quantize_activations(t, x);
  std::vector<float> wf(x.size());
  dequantize_row(t, w, n, wf.data());

  const int64_t block = dtype_block_elems(t);
  const size_t a_block_bytes = activation_row_bytes(kind, block);
  const bool with_min = has_min_term(t);
  double exact = 0, sum_abs_terms = 0, dot64 = 0, sum_abs_wa = 0;
  float acc = 0.0f;
  int num_fmas = 0;
  for (int64_t b = 0; b < n / block; ++b) {
    const unsigned char* ab = act.bytes.data() + b * a_block_bytes;
    const BlockDot bd = block_dot(t, w + b * dtype_block_bytes(t), ab);
    const double ad = activation_scale(kind, act.bytes.data(), b);
    if (!with_min) {
      EXPECT_EQ(bd.wm, 0.0f);
      EXPECT_EQ(bd.imin, 0);
    }
    const double term = double(bd.ws) * ad * bd.isum;
    const double min_term = double(bd.wm) * ad * bd.imin;
    double block64 = 0, block_abs = 0;
    for (int64_t i = b * block; i < (b + 1) * block; ++i) {
      block64 += double(wf[i]) * act.values[i];
      block_abs += std::fabs(double(wf[i]) * act.values[i]);
    }
    // 1. The integer part.
    const double slack = with_min ? kU * block_abs : 0.0;
    ASSERT_LE(std::fabs(term + min_term - block64), slack + 1e-12 * (block_abs + std::fabs(term)))
        << dtype_name(t) << " block " << b << ": isum " << bd.isum << " imin " << bd.imin;
    exact += term + min_term;
    sum_abs_terms += std::fabs(term) + std::fabs(min_term);
    dot64 += block64;
    sum_abs_wa += block_abs;
    // 3. The contract, spelled out.
    acc = std::fmaf(bd.ws * float(ad), static_cast<float>(bd.isum), acc);
    ++num_fmas;
    if (with_min) {
      acc = std::fmaf(bd.wm * float(ad), static_cast<float>(bd.imin), acc);
      ++num_fmas;
    }
  }
  const float ref = vec_dot(t, w, act.bytes.data(), n);
  EXPECT_EQ(std::bit_cast<uint32_t>(ref), std::bit_cast<uint32_t>(acc))
      << dtype_name(t) << ": " << ref << " vs the contract's " << acc;
  // 2. The float contract's error, and the distance to the fp64 dot.
  const double bound = (num_fmas + 2) * kU * sum_abs_terms * (1 + 1e-6);
  EXPECT_LE(std::fabs(ref - exact), bound) << dtype_name(t);
  const double wa_slack = with_min ? kU * sum_abs_wa : 0.0;
  EXPECT_LE(std::fabs(ref - dot64), bound + wa_slack + 1e-12 * sum_abs_wa) << dtype_name(t);
}

std::vector<float> random_row(int64_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  // A few outliers, as real activations have.
  for (int k = 0; k < 4; ++k) x[rng() % x.size()] *= 40.0f;
  return x;
}

TEST(QuantVecDotTest, QuantizedRowsMatchTheFp64Dot) {
  std::mt19937 rng(1234);
  for (DType t : kQuantizedTypes) {
    SCOPED_TRACE(dtype_name(t));
    for (int64_t n : {256, 1024, 4096}) {
      for (int trial = 0; trial < 4; ++trial) {
        const std::vector<float> wx = random_row(n, rng, 0.05f);
        std::vector<unsigned char> w(dtype_row_bytes(t, n));
        ASSERT_TRUE(quantize_row(t, wx.data(), n, w.data()).ok());
        check_dot(t, w.data(), random_row(n, rng, trial == 0 ? 1.0f : 0.3f));
      }
    }
  }
}

TEST(QuantVecDotTest, RandomBlocksMatchTheFp64Dot) {
  std::mt19937 rng(99);
  for (DType t : kQuantizedTypes) {
    SCOPED_TRACE(dtype_name(t));
    for (int trial = 0; trial < 8; ++trial) {
      const int64_t n = 2048;
      const std::vector<unsigned char> w = random_blocks(t, n, rng);
      check_dot(t, w.data(), random_row(n, rng, 2.0f));
    }
    // Activations all at +-amax: every code at 127 in magnitude, the
    // integer sums at their largest.
    const int64_t n = 1024;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = (rng() & 1) ? 3.0f : -3.0f;
    check_dot(t, random_blocks(t, n, rng).data(), x);
  }
}

// Hand-made blocks whose dot product is known exactly.
TEST(QuantVecDotTest, KnownBlocks) {
  std::vector<float> ones(256, 127.0f);  // d = 1, every code 127
  std::vector<unsigned char> a32(activation_row_bytes(ActivationKind::kQ8x32, 32));
  quantize_activation_row(ActivationKind::kQ8x32, ones.data(), 32, a32.data());
  std::vector<unsigned char> a256(activation_row_bytes(ActivationKind::kQ8x256, 256));
  quantize_activation_row(ActivationKind::kQ8x256, ones.data(), 256, a256.data());

  BlockQ8_0 q8{};
  q8.d = float_to_fp16(1.0f);
  for (int i = 0; i < 32; ++i) q8.qs[i] = static_cast<int8_t>(i - 16);
  EXPECT_EQ(vec_dot(DType::kQ8_0, &q8, a32.data(), 32), -16.0f * 127.0f);

  BlockQ4_1 q41{};  // every weight 1 * 1 + 0.5
  q41.d = float_to_fp16(1.0f);
  q41.m = float_to_fp16(0.5f);
  std::memset(q41.qs, 0x11, sizeof q41.qs);
  EXPECT_EQ(vec_dot(DType::kQ4_1, &q41, a32.data(), 32), 32 * 1.5f * 127.0f);

  BlockQ4_K q4k{};  // every scale and min 1, every code 2: weights 1 * 1 * 2 - 1 * 1 = 1
  q4k.d = float_to_fp16(1.0f);
  q4k.dmin = float_to_fp16(1.0f);
  for (int j = 0; j < 4; ++j) q4k.scales[j] = q4k.scales[j + 4] = 1;
  for (int j = 8; j < 12; ++j) q4k.scales[j] = 0x11;
  std::memset(q4k.qs, 0x22, sizeof q4k.qs);
  EXPECT_EQ(vec_dot(DType::kQ4_K, &q4k, a256.data(), 256), 256 * 127.0f);

  BlockQ6_K q6k{};  // scale 2 everywhere, code 33 - 32 = 1: weights 0.5 * 2 * 1
  q6k.d = float_to_fp16(0.5f);
  for (auto& s : q6k.scales) s = 2;
  std::memset(q6k.ql, 0x11, sizeof q6k.ql);
  std::memset(q6k.qh, 0xAA, sizeof q6k.qh);  // high bits 2 -> code 1 | 32 = 33
  EXPECT_EQ(vec_dot(DType::kQ6_K, &q6k, a256.data(), 256), 256 * 127.0f);
}

// activation.h's definition, exactly: d = amax / 127, q = nearest (ties to
// even) of x / d, exact sums, zero blocks for amax under 127 * FLT_MIN.
TEST(QuantActivationTest, QuantizesAsDefined) {
  std::mt19937 rng(5);
  for (const ActivationKind kind : {ActivationKind::kQ8x32, ActivationKind::kQ8x256}) {
    const int64_t block = activation_block_elems(kind);
    for (float scale : {1e-30f, 1e-3f, 1.0f, 1e4f, 1e30f}) {
      const int64_t n = 8 * block;
      std::vector<float> x = random_row(n, rng, scale);
      std::vector<unsigned char> bytes(activation_row_bytes(kind, n));
      quantize_activation_row(kind, x.data(), n, bytes.data());
      for (int64_t b = 0; b < n / block; ++b) {
        const float* xb = x.data() + b * block;
        float amax = 0;
        for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const int8_t* q;
        float d;
        if (kind == ActivationKind::kQ8x32) {
          const auto& a = reinterpret_cast<const BlockQ8x32*>(bytes.data())[b];
          q = a.qs;
          d = a.d;
          int sum = 0;
          for (int i = 0; i < 32; ++i) sum += q[i];
          EXPECT_EQ(a.sum, sum);
        } else {
          const auto& a = reinterpret_cast<const BlockQ8x256*>(bytes.data())[b];
          q = a.qs;
          d = a.d;
          for (int s = 0; s < 16; ++s) {
            int sum = 0;
            for (int i = 16 * s; i < 16 * s + 16; ++i) sum += q[i];
            EXPECT_EQ(a.bsums[s], sum);
          }
        }
        ASSERT_EQ(d, amax / 127.0f);
        int max_code = 0;
        for (int64_t i = 0; i < block; ++i) {
          EXPECT_EQ(q[i], static_cast<int8_t>(std::nearbyint(xb[i] / d)));
          // |x - d q| <= d / 2, up to the rounding of x / d (|x / d| <= 127).
          EXPECT_LE(std::fabs(double(xb[i]) - double(d) * q[i]), double(d) * (0.5 + 128 * kU));
          max_code = std::max(max_code, std::abs(int{q[i]}));
        }
        EXPECT_EQ(max_code, 127);  // the largest value maps to +-127
      }
    }
    // Zero, and too small to scale: all zero, d = 0.
    for (float tiny : {0.0f, 1e-37f, -5e-40f}) {
      std::vector<float> x(block, tiny);
      std::vector<unsigned char> bytes(activation_row_bytes(kind, block));
      quantize_activation_row(kind, x.data(), block, bytes.data());
      std::vector<float> back(block, 1.0f);
      dequantize_activation_row(kind, bytes.data(), block, back.data());
      for (float v : back) EXPECT_EQ(v, 0.0f) << tiny;
    }
  }
}

TEST(QuantActivationTest, TiesRoundToEven) {
  // amax 127: d = 1 exactly, so x / d is x.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = 0.5f;
  x[5] = -126.5f;
  BlockQ8x32 a;
  quantize_activation_block(x.data(), &a);
  EXPECT_EQ(a.d, 1.0f);
  EXPECT_EQ(a.qs[1], 2);
  EXPECT_EQ(a.qs[2], 4);
  EXPECT_EQ(a.qs[3], -2);
  EXPECT_EQ(a.qs[4], 0);
  EXPECT_EQ(a.qs[5], -126);
  EXPECT_EQ(a.sum, 127 + 2 + 4 - 2 - 126);
}

TEST(QuantActivationTest, KindsPairWithTheWeightBlocks) {
  for (DType t : kQuantizedTypes) {
    EXPECT_EQ(activation_block_elems(activation_kind(t)), dtype_block_elems(t)) << dtype_name(t);
  }
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_EQ(activation_kind(t), ActivationKind::kNone);
  }
  EXPECT_EQ(activation_row_bytes(ActivationKind::kQ8x32, 64), 2 * sizeof(BlockQ8x32));
  EXPECT_EQ(activation_row_bytes(ActivationKind::kQ8x256, 100), 0u);
}

}  // namespace
}  // namespace pvllm::quant
