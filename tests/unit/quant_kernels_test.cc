// The fast quantized GEMM (kernels/cpu/quant_gemm.cc on the interleaved
// layout of quant_matrix.h) against the scalar reference quant::vec_dot:
// every output bit for bit, on every ISA variant this CPU runs (x86-64-v2's
// SSE kernels among them) and both integer paths (VNNI where present,
// pmaddubsw always), over random blocks that reach the extreme codes and
// scales, token counts that leave every tile remainder, and row counts that
// leave rows past the last group of 8 (the reference's). Then the same
// through Linear, the way the CPU backend calls it, and the interleaved
// copy's size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "core/quant/activation.h"
#include "core/quant/block_formats.h"
#include "core/quant/vec_dot.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant_matrix.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/cpu_variants.h"

namespace pvllm::cpu {
namespace {

// The types with an interleaved layout: every quantized type.
const DType kTypes[] = {DType::kQ8_0, DType::kQ4_0,   DType::kQ4_1, DType::kQ5_0,
                        DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                        DType::kQ4_K, DType::kQ5_K,   DType::kQ6_K, DType::kIQ4_XS};

// The byte offsets of a block's fp16 scale fields.
std::vector<size_t> scale_fields(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      return {0};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {offsetof(quant::BlockQ2_K, d), offsetof(quant::BlockQ2_K, dmin)};
    case DType::kQ3_K:
      return {offsetof(quant::BlockQ3_K, d)};
    case DType::kQ6_K:
      return {offsetof(quant::BlockQ6_K, d)};
    default:
      return {};
  }
}

// An fp16 scale: usually of a weight's size, sometimes zero, subnormal
// (tiny) or near the largest half, either sign where the type allows.
uint16_t random_scale(std::mt19937& rng, bool signed_ok) {
  uint16_t h;
  switch (rng() % 8) {
    case 0:
      h = 0;
      break;
    case 1:
      h = static_cast<uint16_t>(1 + rng() % 1023);  // subnormal
      break;
    case 2:
      h = static_cast<uint16_t>(0x7800 + rng() % 0x400);  // 32768 .. 65504
      break;
    default: {
      std::uniform_real_distribution<float> mag(-14.0f, 2.0f);
      h = float_to_fp16(std::exp2(mag(rng)));
    }
  }
  if (signed_ok && (rng() & 1)) h = static_cast<uint16_t>(h | 0x8000);
  return h;
}

// rows x cols weights of type t as the file stores them: random bytes, or a
// block filled with one extreme byte (0x00, 0xFF, 0x80, 0x7F: Q8_0's codes
// 0, -1, -128, 127, the nibbles 0 and 15, the fifth and high bits all clear
// or all set, Q6_K's scales -128 and 127, the 6-bit scales 0 and 63),
// their fp16 scales then set by random_scale.
std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * dtype_row_bytes(t, cols));
  const size_t block = dtype_block_bytes(t);
  // The K types' min factor is -dmin: dmin and d stay positive as ggml
  // writes them. Every other scale (Q4_1's and Q5_1's m too) takes either sign.
  const bool signed_ok = t != DType::kQ2_K && t != DType::kQ4_K && t != DType::kQ5_K;
  for (size_t off = 0; off < bytes.size(); off += block) {
    const uint32_t kind = rng() % 8;
    const uint8_t fill[] = {0x00, 0xFF, 0x80, 0x7F};
    for (size_t i = 0; i < block; ++i) {
      bytes[off + i] = kind < 4 ? fill[kind] : static_cast<uint8_t>(rng());
    }
    for (size_t f : scale_fields(t)) {
      const uint16_t h = random_scale(rng, signed_ok);
      std::memcpy(&bytes[off + f], &h, 2);
    }
  }
  return bytes;
}

// n rows of cols activations, quantized for weights of type t; blocks of
// mixed sizes: zero, tiny (quantized to zero), one large outlier, ordinary.
std::vector<uint8_t> random_activations(DType t, int64_t n, int64_t cols, std::mt19937& rng,
                                        size_t* row_bytes) {
  const quant::ActivationKind kind = quant::activation_kind(t);
  const int64_t block = quant::activation_block_elems(kind);
  *row_bytes = quant::activation_row_bytes(kind, cols);
  std::vector<uint8_t> out(*row_bytes * static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t t0 = 0; t0 < n; ++t0) {
    for (int64_t b = 0; b < cols / block; ++b) {
      const uint32_t kind_of_block = rng() % 6;
      const float scale = kind_of_block == 0 ? 0.0f : kind_of_block == 1 ? 1e-39f : 3.0f;
      for (int64_t i = b * block; i < (b + 1) * block; ++i) x[i] = scale * u(rng);
      if (kind_of_block == 2) x[b * block + rng() % block] = 1e4f;
    }
    quant::quantize_activation_row(kind, x.data(), cols, out.data() + t0 * *row_bytes);
  }
  return out;
}

Tensor tensor_of(DType t, int64_t rows, int64_t cols, const std::vector<uint8_t>& bytes) {
  Tensor w;
  w.name = std::string(dtype_name(t)) + " weights";
  w.dtype = t;
  w.shape = {rows, cols};
  w.data = bytes.data();
  return w;
}

// ref[tok * rows + r] = vec_dot(row r, activation row tok).
std::vector<float> reference(const QuantMatrix& w, const uint8_t* act, size_t act_row, int64_t n) {
  std::vector<float> ref(static_cast<size_t>(n * w.rows()));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < w.rows(); ++r) {
      ref[t * w.rows() + r] = quant::vec_dot(w.dtype(), w.row(r), act + t * act_row, w.cols());
    }
  }
  return ref;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

using testing::Variant;
using testing::variants;

TEST(QuantGemmTest, EveryVariantMatchesTheReferenceBitForBit) {
  std::mt19937 rng(7);
  ThreadPool pool(3);
  int kernels_run = 0;
  for (const DType type : kTypes) {
    const int64_t elems = dtype_block_elems(type);
    const int64_t cols = elems * (elems == 32 ? 7 : 3);
    for (const int64_t rows : {8, 13, 40}) {
      const std::vector<uint8_t> bytes = random_weights(type, rows, cols, rng);
      QuantMatrix w;
      ASSERT_TRUE(QuantMatrix::pack(tensor_of(type, rows, cols, bytes), &pool, &w).ok());
      ASSERT_EQ(w.num_groups(), rows / 8);
      for (const int64_t n : {1, 2, 5, 6, 7, 13, 64}) {
        size_t act_row = 0;
        const std::vector<uint8_t> act = random_activations(type, n, cols, rng, &act_row);
        const std::vector<float> ref = reference(w, act.data(), act_row, n);
        for (const Variant& v : variants()) {
          if (!v.runs_here || !v.table->quant_gemm_supports(type)) continue;
          for (const QuantIntDot dot : {QuantIntDot::kBest, QuantIntDot::kNoVnni}) {
            for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
              // ldy wider than the rows: only the groups' outputs are written.
              const int64_t ldy = rows + 3;
              std::vector<float> y(static_cast<size_t>(n * ldy), -7.0f);
              v.table->quant_gemm(p, w, act.data(), act_row, n, y.data(), ldy, dot);
              ++kernels_run;
              int mismatches = 0;
              for (int64_t t = 0; t < n; ++t) {
                for (int64_t r = 0; r < ldy; ++r) {
                  const float got = y[t * ldy + r];
                  const float want = r < 8 * w.num_groups() ? ref[t * rows + r] : -7.0f;
                  if (bits(got) != bits(want) && mismatches++ < 3) {
                    ADD_FAILURE() << v.name << (dot == QuantIntDot::kBest ? " best" : " no-vnni")
                                  << " " << dtype_name(type) << " rows " << rows << " n " << n
                                  << " token " << t << " row " << r << ": " << got << " (0x"
                                  << std::hex << bits(got) << "), want " << want << " (0x"
                                  << bits(want) << std::dec << ")";
                  }
                }
              }
              EXPECT_EQ(mismatches, 0);
            }
          }
        }
      }
    }
  }
  if (kernels_run == 0) GTEST_SKIP() << "no ISA variant of this CPU has a quantized kernel";
  std::printf("kernel runs compared: %d\n", kernels_run);
}

// One Q8_0 block of weights (scale ws, codes q at the front, the rest 0)
// and the activation block beside it (scale ad, codes a at the front).
struct ExactBlock {
  uint16_t ws;
  float ad;
  std::vector<int8_t> q, a;
};

// Three blocks whose float steps land where rounding twice would show:
// 1.0 after the first, then a last product p * x just beside half a float
// ulp of the sum, nearer than half a double ulp, so that the sum rounded
// to double first would be a tie and round to even. Either + 2^-23
// (exactly), then 2^-24 - 2^-54 ((2^15 + 1) 2^-54 times 32767) on the odd
// 1 + 2^-23 (the sum stays), or an empty block, then 2^-24 + 2^-66 ((2^42
// + 1) 2^-66 = 10496005 2^-66 times 419021) on the even 1.0 (it goes up).
std::vector<ExactBlock> exact_blocks(bool up) {
  const uint16_t one = 0x3C00;
  const ExactBlock first{one, 0x1p-13f, {64, 64}, {64, 64}};
  if (!up) {
    return {first,
            {one, 0x1p-23f, {1}, {1}},
            {one, 32769 * 0x1p-54f, {127, 127, 127, 1}, {127, 127, 4, 1}}};
  }
  ExactBlock last{one, 10496005 * 0x1p-66f, std::vector<int8_t>(25, 127),
                  std::vector<int8_t>(25, 127)};
  last.q.insert(last.q.end(), {127, 6});
  last.a.insert(last.a.end(), {124, 8});
  return {first, {one, 0.0f, {}, {}}, last};
}

// Every variant's fused step rounds once: lanes 0-3 take the blocks as
// they are, lanes 4-7 with every weight scale negated.
TEST(QuantGemmTest, FusedStepsRoundOnceOnEveryVariant) {
  for (const bool up : {false, true}) {
    const std::vector<ExactBlock> blocks = exact_blocks(up);
    const int64_t cols = 32 * static_cast<int64_t>(blocks.size());
    std::vector<uint8_t> bytes(8 * dtype_row_bytes(DType::kQ8_0, cols));
    std::vector<quant::BlockQ8x32> act(blocks.size());
    for (size_t b = 0; b < blocks.size(); ++b) {
      act[b] = {blocks[b].ad, 0, {}};
      for (size_t i = 0; i < blocks[b].a.size(); ++i) {
        act[b].qs[i] = blocks[b].a[i];
        act[b].sum += blocks[b].a[i];
      }
      for (int r = 0; r < 8; ++r) {
        quant::BlockQ8_0 w{static_cast<uint16_t>(blocks[b].ws | (r < 4 ? 0 : 0x8000)), {}};
        std::copy(blocks[b].q.begin(), blocks[b].q.end(), w.qs);
        std::memcpy(bytes.data() + (r * blocks.size() + b) * sizeof(w), &w, sizeof(w));
      }
    }
    QuantMatrix w;
    ASSERT_TRUE(QuantMatrix::pack(tensor_of(DType::kQ8_0, 8, cols, bytes), nullptr, &w).ok());
    const float want = 1.0f + 0x1p-23f;  // both ways
    ASSERT_EQ(quant::vec_dot(DType::kQ8_0, w.row(0), act.data(), cols), want);
    ASSERT_EQ(quant::vec_dot(DType::kQ8_0, w.row(4), act.data(), cols), -want);
    // The double rounding this guards against.
    const double last_product = up ? 0x1p-24 + 0x1p-66 : 0x1p-24 - 0x1p-54;
    ASSERT_NE(static_cast<float>(static_cast<double>(up ? 1.0f : 1.0f + 0x1p-23f) + last_product),
              want);
    for (const Variant& v : variants()) {
      if (!v.runs_here || !v.table->quant_gemm_supports(DType::kQ8_0)) continue;
      for (const QuantIntDot dot : {QuantIntDot::kBest, QuantIntDot::kNoVnni}) {
        float y[8];
        v.table->quant_gemm(nullptr, w, act.data(), sizeof(quant::BlockQ8x32) * act.size(), 1, y, 8,
                            dot);
        for (int r = 0; r < 8; ++r) {
          EXPECT_EQ(bits(y[r]), bits(r < 4 ? want : -want))
              << v.name << (up ? " up" : " stays") << " row " << r << ": " << y[r];
        }
      }
    }
  }
}

// The x86-64-v2, AVX2 and AVX-512 variants serve every quantized type; the
// generic build leaves them to the reference. Plain types have no kernel.
TEST(QuantGemmTest, VariantsClaimTheirTypes) {
  for (const Variant& v : variants()) {
    const bool fast = std::string(v.name) != "generic";
    for (const DType type : kTypes) {
      EXPECT_EQ(v.table->quant_gemm_supports(type), fast) << v.name << " " << dtype_name(type);
    }
    for (const DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
      EXPECT_FALSE(v.table->quant_gemm_supports(type)) << v.name << " " << dtype_name(type);
    }
  }
}

// Every quantized type has an interleaved layout.
TEST(QuantMatrixTest, EveryQuantizedTypeHasALayout) {
  for (const DType type : kTypes) {
    EXPECT_GT(QuantMatrix::packed_block_bytes(type), 0u) << dtype_name(type);
  }
}

TEST(QuantMatrixTest, InterleavedCopyStaysWithinFivePercentOfTheFile) {
  for (const DType type : kTypes) {
    const int64_t rows = 64, cols = 4096;
    std::vector<uint8_t> bytes(static_cast<size_t>(rows) * dtype_row_bytes(type, cols));
    QuantMatrix w;
    ASSERT_TRUE(QuantMatrix::pack(tensor_of(type, rows, cols, bytes), nullptr, &w).ok());
    EXPECT_LE(static_cast<double>(w.nbytes()), 1.05 * static_cast<double>(bytes.size()))
        << dtype_name(type);
    EXPECT_GE(w.nbytes(), bytes.size()) << dtype_name(type);
  }
}

TEST(QuantMatrixTest, MakeCopiesOnlyWhatAKernelReads) {
  std::vector<uint8_t> bytes(static_cast<size_t>(13) * dtype_row_bytes(DType::kQ4_K, 256));
  QuantMatrix w;
  ASSERT_TRUE(QuantMatrix::make(tensor_of(DType::kQ4_K, 13, 256, bytes), nullptr, &w).ok());
  EXPECT_EQ(w.packed(), quant_gemm_supports(DType::kQ4_K));
  ASSERT_TRUE(QuantMatrix::make(tensor_of(DType::kQ4_K, 7, 256, bytes), nullptr, &w).ok());
  EXPECT_FALSE(w.packed());  // under one group
  EXPECT_FALSE(QuantMatrix::pack(tensor_of(DType::kQ4_K, 7, 256, bytes), nullptr, &w).ok());
}

// Linear over quantized parts of several types (each served by the active
// variant: the fast kernel for its groups, the reference for the rest and
// for types without a kernel) equals the reference row by row.
TEST(QuantLinearTest, ApplyMatchesTheReferencePerRow) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const int64_t cols = 512;
  struct Part {
    DType type;
    int64_t rows;
  };
  const Part shapes[] = {{DType::kQ8_0, 13},   {DType::kQ4_K, 40}, {DType::kQ6_K, 8},
                         {DType::kQ4_0, 21},   {DType::kQ5_K, 9},  {DType::kQ5_0, 16},
                         {DType::kIQ4_XS, 11}, {DType::kQ2_K, 8},  {DType::kQ3_K, 3}};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Tensor> tensors;
  for (const Part& p : shapes) bytes.push_back(random_weights(p.type, p.rows, cols, rng));
  for (size_t i = 0; i < bytes.size(); ++i) {
    tensors.push_back(tensor_of(shapes[i].type, shapes[i].rows, cols, bytes[i]));
  }
  std::vector<const Tensor*> parts;
  for (const Tensor& t : tensors) parts.push_back(&t);
  Linear linear;
  ASSERT_TRUE(Linear::make(parts, &pool, &linear).ok());
  for (const int64_t n : {1, 7, 64}) {
    std::vector<float> x(static_cast<size_t>(n * cols));
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& v : x) v = u(rng);
    std::vector<float> y(static_cast<size_t>(n * linear.rows()));
    ASSERT_TRUE(linear.apply(&pool, x.data(), n, y.data()).ok());
    int64_t row0 = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const DType type = shapes[i].type;
      const quant::ActivationKind kind = quant::activation_kind(type);
      const size_t act_row = quant::activation_row_bytes(kind, cols);
      std::vector<uint8_t> act(act_row * static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) {
        quant::quantize_activation_row(kind, x.data() + t * cols, cols, act.data() + t * act_row);
      }
      const size_t row_bytes = dtype_row_bytes(type, cols);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = 0; r < shapes[i].rows; ++r) {
          const float want =
              quant::vec_dot(type, bytes[i].data() + r * row_bytes, act.data() + t * act_row, cols);
          const float got = y[t * linear.rows() + row0 + r];
          ASSERT_EQ(bits(got), bits(want)) << dtype_name(type) << " n " << n << " token " << t
                                           << " row " << r << ": " << got << " vs " << want;
        }
      }
      row0 += shapes[i].rows;
    }
  }
}

}  // namespace
}  // namespace pvllm::cpu
