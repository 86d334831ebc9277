// The activation quantization of the CPU kernels
// (kernels/cpu/quant_activation.cc) against core/quant's reference,
// byte for byte, on every ISA variant this CPU runs: scales from tiny (under
// FLT_MIN once divided by 127) to large, all-zero blocks, signed zeros,
// codes landing exactly halfway between integers (ties go to even), and
// rows of many blocks.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/quant/activation.h"
#include "kernels/cpu/kernel_table.h"
#include "tests/util/cpu_variants.h"

namespace pvllm::cpu {
namespace {

// A row of n values, block by block in one of several regimes.
std::vector<float> make_row(int64_t n, int64_t block, std::mt19937* rng) {
  std::vector<float> x(static_cast<size_t>(n));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int64_t b = 0; b < n / block; ++b) {
    float* v = x.data() + b * block;
    const int regime = static_cast<int>(b % 6);
    for (int64_t i = 0; i < block; ++i) {
      switch (regime) {
        case 0:  // ordinary
          v[i] = unit(*rng) * 3.0f;
          break;
        case 1:  // all zeros, some negative
          v[i] = (i % 2) ? -0.0f : 0.0f;
          break;
        case 2:  // so small that amax / 127 is under FLT_MIN
          v[i] = unit(*rng) * 100.0f * FLT_MIN;
          break;
        case 3:  // d = 1 exactly (amax 127); the others halfway: ties to even
          v[i] = i == 0 ? 127.0f : static_cast<float>(static_cast<int>(i % 20) - 10) + 0.5f;
          break;
        case 4:  // large and of both signs
          v[i] = unit(*rng) * 1e30f;
          break;
        default:  // one outlier among small values
          v[i] = i == block / 2 ? -50.0f : unit(*rng) * 1e-3f;
          break;
      }
    }
  }
  return x;
}

TEST(QuantActivationTest, EveryVariantWritesTheReferenceBytes) {
  std::mt19937 rng(7);
  int runs = 0;
  for (const auto kind : {quant::ActivationKind::kQ8x32, quant::ActivationKind::kQ8x256}) {
    const int64_t block = quant::activation_block_elems(kind);
    for (const int64_t blocks : {1, 6, 13}) {
      const int64_t n = block * blocks;
      const std::vector<float> x = make_row(n, block, &rng);
      const size_t bytes = quant::activation_row_bytes(kind, n);
      std::vector<unsigned char> expected(bytes), got(bytes);
      quant::quantize_activation_row(kind, x.data(), n, expected.data());
      for (const testing::Variant& v : testing::variants()) {
        if (!v.runs_here) continue;
        std::memset(got.data(), 0xA5, bytes);
        v.table->quantize_activations(kind, x.data(), n, got.data());
        ++runs;
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), bytes), 0)
            << v.name << ", block " << block << ", " << blocks << " blocks";
      }
    }
  }
  EXPECT_GT(runs, 0);
}

// The ties really are ties, so the case above tests rounding to even:
// 2.5 / 1 rounds to 2, -3.5 to -4.
TEST(QuantActivationTest, HalfwayCodesRoundToEven) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -3.5f;
  quant::BlockQ8x32 b;
  for (const testing::Variant& v : testing::variants()) {
    if (!v.runs_here) continue;
    v.table->quantize_activations(quant::ActivationKind::kQ8x32, x.data(), 32, &b);
    EXPECT_EQ(b.d, 1.0f) << v.name;
    EXPECT_EQ(b.qs[1], 2) << v.name;
    EXPECT_EQ(b.qs[2], -4) << v.name;
    EXPECT_EQ(b.sum, 127 + 2 - 4) << v.name;
  }
}

}  // namespace
}  // namespace pvllm::cpu
