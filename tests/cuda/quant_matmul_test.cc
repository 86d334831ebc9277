// pvllm_cuda_quant_matmul (kernels/cuda/quant_matmul.h) against a CPU
// reference: core/quant's dequantized weights times the activations as the
// kernel sees them (rounded to bf16 / fp16), summed in double. Both kernels
// (GEMV and tensor cores) and the automatic choice, for every weight type,
// both activation types, m from decode to prefill sizes, n not a multiple
// of the mma kernel's 64 columns and k not a multiple of its chunk. The
// argument checks run without a device; the rest skip without one.
#include "kernels/cuda/quant_matmul.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/quant/block_formats.h"
#include "core/quant/dequantize.h"
#include "kernels/cuda/quant_repack.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/quant_weights_util.h"

namespace pvllm {
namespace {

using cuda_test::download;
using cuda_test::upload;

struct Case {
  DType wtype;
  DType xtype;
  QuantMatmulPath path;
  int64_t m;
};

const char* path_name(QuantMatmulPath p) {
  return p == QuantMatmulPath::kGemv ? "gemv" : p == QuantMatmulPath::kMma ? "mma" : "auto";
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(dtype_name(c.wtype)) + "_" + cuda_test::dtype_label(c.xtype) + "_" +
         path_name(c.path) + "_m" + std::to_string(c.m);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (DType w : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K}) {
    for (DType x : {DType::kBF16, DType::kF16}) {
      for (QuantMatmulPath p :
           {QuantMatmulPath::kGemv, QuantMatmulPath::kMma, QuantMatmulPath::kAuto}) {
        for (int64_t m : {1, 3, 8, 17, 64, 300}) cases.push_back({w, x, p, m});
      }
    }
  }
  return cases;
}

// n = 328: five 64-column tiles and a partial one; k = 1440 = 45 blocks of
// 32 (neither the 64- nor the 128-element chunks divide it); Q4_K's k is
// five super-blocks.
int64_t test_n(DType) { return 328; }
int64_t test_k(DType w) { return w == DType::kQ4_K ? 1280 : 1440; }

// Per output, the sum of |x_i| times the largest magnitude among the terms
// the kernel adds for weight i: |w_i| for Q8_0 and Q4_0; for Q4_K the
// kernel adds (d sc) q and dmin m apart, |w_i| + 2 |dmin m| bounds both.
std::vector<double> weight_magnitudes(DType w, const std::vector<uint8_t>& file, int64_t n,
                                      int64_t k, const std::vector<float>& deq) {
  std::vector<double> mag(deq.size());
  for (size_t i = 0; i < deq.size(); ++i) mag[i] = std::fabs(deq[i]);
  if (w != DType::kQ4_K) return mag;
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t sb = 0; sb < k / 256; ++sb) {
      const auto b = quant::load_block<quant::BlockQ4_K>(file.data(), row * (k / 256) + sb);
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        quant::k_scale_min(j, b.scales, &sc, &m);
        const double min = std::fabs(fp16_to_float(b.dmin) * m);
        for (int e = 0; e < 32; ++e) mag[row * k + sb * 256 + j * 32 + e] += 2 * min;
      }
    }
  }
  return mag;
}

class QuantMatmulTest : public testing::TestWithParam<Case> {};

TEST_P(QuantMatmulTest, MatchesDequantizedReference) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const Case& c = GetParam();
  const int64_t n = test_n(c.wtype);
  const int64_t k = test_k(c.wtype);
  const int64_t x_stride = k + 8;  // padded rows: the strides are honoured
  const int64_t y_stride = n + 2;
  // y in the activation type for one m of each case family, fp32 otherwise.
  const DType ytype = c.m == 17 ? c.xtype : DType::kF32;
  std::mt19937 rng(static_cast<uint32_t>(c.m * 7 + static_cast<int>(c.wtype)));
  const std::vector<uint8_t> file = cuda_test::random_quant_weights(c.wtype, n, k, rng, false);
  QuantRepacked w;
  ASSERT_TRUE(quant_repack(c.wtype, file.data(), n, k, &w).ok());
  std::vector<float> deq(static_cast<size_t>(n * k));
  quant::dequantize_row(c.wtype, file.data(), n * k, deq.data());
  const std::vector<double> mag = weight_magnitudes(c.wtype, file, n, k, deq);
  const cuda_test::RoundedValues x =
      cuda_test::random_rounded(c.xtype, static_cast<size_t>(c.m * x_stride), -1.0f, 1.0f, rng);

  DeviceBuffer d_codes, d_scales, d_x, d_y;
  ASSERT_TRUE(upload(d_codes, w.codes));
  ASSERT_TRUE(upload(d_scales, w.scales));
  ASSERT_TRUE(upload(d_x, x.bits));
  const size_t y_elem = ytype == DType::kF32 ? 4 : 2;
  const size_t y_bytes = static_cast<size_t>(c.m * y_stride) * y_elem;
  ASSERT_TRUE(cuda_test::allocate(d_y, y_bytes));
  PVLLM_CUDA_OK(cudaMemset(d_y.get(), 0xFF, y_bytes));  // NaN: unwritten outputs show

  QuantMatmulParams p;
  p.weight_dtype = c.wtype;
  p.codes = d_codes.get();
  p.scales = d_scales.get();
  p.x = d_x.get();
  p.y = d_y.get();
  p.m = c.m;
  p.n = n;
  p.k = k;
  p.x_stride = x_stride;
  p.y_stride = y_stride;
  p.x_dtype = c.xtype;
  p.y_dtype = ytype;
  p.path = c.path;
  PVLLM_CUDA_OK(pvllm_cuda_quant_matmul(p, nullptr));
  PVLLM_CUDA_OK(cudaDeviceSynchronize());

  std::vector<float> y(static_cast<size_t>(c.m * y_stride));
  if (ytype == DType::kF32) {
    ASSERT_TRUE(download(d_y, y.size(), &y));
  } else {
    std::vector<uint16_t> bits;
    ASSERT_TRUE(download(d_y, y.size(), &bits));
    y = cuda_test::from_bits(bits, ytype);
  }
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0.0;
      double magnitude = 0.0;
      for (int64_t t = 0; t < k; ++t) {
        const double xv = x.values[i * x_stride + t];
        want += xv * deq[j * k + t];
        magnitude += std::fabs(xv) * mag[j * k + t];
      }
      // fp32 accumulation of exact (GEMV: fp32 FMA; mma: x times integer
      // codes, exact in the tensor core) products: k = 1440 roundings of
      // at most 2^-24 of the running magnitude each stay below 1e-4 of the
      // sum of magnitudes, while one misplaced weight moves the result by
      // about magnitude / k (7e-4 of it). Outputs in bf16 / fp16 add half
      // an ulp of the result.
      double tol = 1e-4 * magnitude + 1e-6;
      if (ytype != DType::kF32) tol += cuda_test::half_ulp_rel(ytype) * std::fabs(want);
      const float got = y[i * y_stride + j];
      ASSERT_TRUE(std::isfinite(got)) << "row " << i << " col " << j;
      ASSERT_NEAR(got, want, tol) << "row " << i << " col " << j;
    }
    for (int64_t j = n; j < y_stride; ++j) {
      ASSERT_TRUE(std::isnan(y[i * y_stride + j])) << "padding written: row " << i << " col " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(QuantShapes, QuantMatmulTest, testing::ValuesIn(all_cases()), case_name);

// Unsupported weights and arguments are refused before any CUDA call (so
// this runs without a device too).
TEST(QuantMatmulArgs, RefusesWhatIsNotServed) {
  alignas(16) static uint8_t buffer[4096];
  QuantMatmulParams ok;
  ok.weight_dtype = DType::kQ4_0;
  ok.codes = buffer;
  ok.scales = buffer;
  ok.x = buffer;
  ok.y = buffer;
  ok.m = 1;
  ok.n = 8;
  ok.k = 32;
  ok.x_stride = 32;
  ok.y_stride = 8;
  const auto refused = [](const QuantMatmulParams& p) {
    return pvllm_cuda_quant_matmul(p, nullptr) == cudaErrorInvalidValue;
  };
  QuantMatmulParams p = ok;
  p.weight_dtype = DType::kQ6_K;
  EXPECT_TRUE(refused(p));
  p = ok;
  p.n = 12;
  EXPECT_TRUE(refused(p));
  p = ok;
  p.k = 48;
  EXPECT_TRUE(refused(p));
  p = ok;
  p.weight_dtype = DType::kQ4_K;  // k = 32 is no whole super-block
  EXPECT_TRUE(refused(p));
  p = ok;
  p.x = buffer + 2;
  EXPECT_TRUE(refused(p));
  p = ok;
  p.x_stride = 36;
  EXPECT_TRUE(refused(p));
  p = ok;
  p.y_dtype = DType::kF16;  // neither fp32 nor x's bf16
  EXPECT_TRUE(refused(p));
  p = ok;
  p.x_dtype = DType::kF32;
  EXPECT_TRUE(refused(p));
  p = ok;
  p.y = nullptr;
  EXPECT_TRUE(refused(p));
  p = ok;
  p.m = 0;
  p.y = nullptr;  // nothing to do: accepted without pointers being read
  EXPECT_EQ(pvllm_cuda_quant_matmul(p, nullptr), cudaSuccess);
}

TEST(QuantMatmulArgs, RepackRefusesOtherTypesByName) {
  QuantRepacked w;
  const Status s = quant_repack(DType::kQ6_K, nullptr, 8, 256, &w);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Q6_K"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pvllm
