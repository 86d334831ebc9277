// The kernels of the newer architectures' attention blocks against fp32 CPU
// references on fp16 / bf16-rounded data: the bias add after a projection
// (q/k/v bias over the fused QKV output, o bias) and Qwen3's per-head
// RMSNorm of q and k (kernels/cpu rmsnorm over rows of head_dim). Both run
// on strided views of a fused [tokens, q | k | v] buffer whose other
// columns must come back untouched. Validation tests run everywhere; the
// rest skip where no device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/common/device_buffer.h"
#include "kernels/cuda/head_norm.h"
#include "tests/cuda/cuda_test_util.h"

namespace pvllm {
namespace {

using cuda_test::download;
using cuda_test::from_bits;
using cuda_test::half_ulp_rel;
using cuda_test::random_rounded;
using cuda_test::RoundedValues;
using cuda_test::upload;

using cuda_test::kAbsSlack;
using cuda_test::kFp32Slack;

// Compares `count` elements starting at `first` of every `stride`-long row
// of `got` with `ref` (rows of `count`); every other element of a row must
// equal `untouched` bit for bit.
void expect_rows(DType dtype, const std::vector<uint16_t>& got, const std::vector<float>& ref,
                 const std::vector<uint16_t>& untouched, size_t stride, size_t first, size_t count,
                 const std::string& what) {
  ASSERT_EQ(got.size(), untouched.size());
  int num_bad = 0;
  for (size_t i = 0; i < got.size() && num_bad < 5; ++i) {
    const size_t row = i / stride, col = i % stride;
    if (col < first || col >= first + count) {
      if (got[i] != untouched[i] && num_bad++ < 5) {
        ADD_FAILURE() << what << ": element " << i << " outside the rows was changed";
      }
      continue;
    }
    const double r = ref[row * count + col - first];
    const double tol = (half_ulp_rel(dtype) + kFp32Slack) * std::fabs(r) + kAbsSlack;
    const double g = from_bits(got[i], dtype);
    if (!(std::fabs(g - r) <= tol) && num_bad++ < 5) {
      ADD_FAILURE() << what << ": row " << row << " column " << col - first << " device " << g
                    << " reference " << r << " tolerance " << tol;
    }
  }
  EXPECT_EQ(num_bad, 0) << what;
}

// ---- bias ------------------------------------------------------------------------

struct BiasCase {
  DType dtype;
  int32_t cols;
  int32_t pad;  // the row stride is cols + pad (0: packed)
};

class CudaBiasTest : public ::testing::TestWithParam<BiasCase> {};

TEST_P(CudaBiasTest, AddsTheBiasToEveryRowOnly) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const auto [dtype, cols, pad] = GetParam();
  const int32_t num_tokens = 7;
  const size_t stride = static_cast<size_t>(cols + pad);
  std::mt19937 rng(11 + cols + pad);
  const RoundedValues x = random_rounded(dtype, num_tokens * stride, -4.0f, 4.0f, rng);
  const RoundedValues bias = random_rounded(dtype, cols, -1.0f, 1.0f, rng);
  std::vector<float> ref(static_cast<size_t>(num_tokens) * cols);
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int32_t c = 0; c < cols; ++c)
      ref[t * cols + c] = x.values[t * stride + c] + bias.values[c];
  }
  DeviceBuffer d_x, d_bias;
  ASSERT_TRUE(upload(d_x, x.bits));
  ASSERT_TRUE(upload(d_bias, bias.bits));
  BiasAddParams p;
  p.x = d_x.get();
  p.bias = d_bias.get();
  p.num_tokens = num_tokens;
  p.cols = cols;
  p.token_stride = pad == 0 ? 0 : static_cast<int64_t>(stride);
  p.dtype = dtype;
  PVLLM_CUDA_OK(pvllm_cuda_add_bias(p, nullptr));
  PVLLM_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> got;
  ASSERT_TRUE(download(d_x, x.bits.size(), &got));
  expect_rows(dtype, got, ref, x.bits, stride, 0, static_cast<size_t>(cols), "bias");
}

// Vector path (cols and stride multiples of 8), scalar path (odd cols or
// stride), and a fused-QKV-like row.
INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaBiasTest,
    ::testing::Values(BiasCase{DType::kBF16, 64, 0}, BiasCase{DType::kF16, 64, 0},
                      BiasCase{DType::kBF16, 37, 0}, BiasCase{DType::kF16, 40, 3},
                      BiasCase{DType::kBF16, 3072, 1024}, BiasCase{DType::kF16, 3072, 1024}),
    [](const auto& info) {
      const BiasCase& c = info.param;
      return std::string(cuda_test::dtype_label(c.dtype)) + "_c" + std::to_string(c.cols) + "_pad" +
             std::to_string(c.pad);
    });

// ---- per-head q/k RMSNorm --------------------------------------------------------

struct HeadNormCase {
  DType dtype;
  int32_t head_dim;
};

class CudaHeadNormTest : public ::testing::TestWithParam<HeadNormCase> {};

TEST_P(CudaHeadNormTest, NormalisesEveryQAndKHeadOfAFusedQkvRow) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const auto [dtype, head_dim] = GetParam();
  const int32_t num_tokens = 9, num_heads = 6, num_kv_heads = 2;
  const size_t q_row = static_cast<size_t>(num_heads) * head_dim;
  const size_t k_row = static_cast<size_t>(num_kv_heads) * head_dim;
  const size_t stride = q_row + 2 * k_row;  // q | k | v
  const float eps = 1e-6f;
  std::mt19937 rng(21 + head_dim);
  const RoundedValues qkv = random_rounded(dtype, num_tokens * stride, -3.0f, 3.0f, rng);
  const RoundedValues q_w = random_rounded(dtype, head_dim, 0.5f, 1.5f, rng);
  const RoundedValues k_w = random_rounded(dtype, head_dim, 0.5f, 1.5f, rng);

  // Reference: cpu::rmsnorm over each token's q heads and k heads, laid
  // out as the [q | k] columns of its row.
  const size_t qk_row = q_row + k_row;
  std::vector<float> ref(num_tokens * qk_row);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* row = qkv.values.data() + t * stride;
    cpu::rmsnorm(row, q_w.values.data(), num_heads, head_dim, eps, ref.data() + t * qk_row);
    cpu::rmsnorm(row + q_row, k_w.values.data(), num_kv_heads, head_dim, eps,
                 ref.data() + t * qk_row + q_row);
  }
  DeviceBuffer d_qkv, d_qw, d_kw;
  ASSERT_TRUE(upload(d_qkv, qkv.bits));
  ASSERT_TRUE(upload(d_qw, q_w.bits));
  ASSERT_TRUE(upload(d_kw, k_w.bits));
  HeadNormParams p;
  p.q = d_qkv.get();
  p.k = d_qkv.as<uint16_t>() + q_row;
  p.q_weight = d_qw.get();
  p.k_weight = d_kw.get();
  p.num_tokens = num_tokens;
  p.num_heads = num_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.q_token_stride = static_cast<int64_t>(stride);
  p.k_token_stride = static_cast<int64_t>(stride);
  p.eps = eps;
  p.dtype = dtype;
  PVLLM_CUDA_OK(pvllm_cuda_head_rmsnorm(p, nullptr));
  PVLLM_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> got;
  ASSERT_TRUE(download(d_qkv, qkv.bits.size(), &got));
  expect_rows(dtype, got, ref, qkv.bits, stride, 0, qk_row, "q and k");
}

// Qwen3's 128, the attention kernels' 64, a head shorter than a warp's
// stride and the longest served.
INSTANTIATE_TEST_SUITE_P(Shapes, CudaHeadNormTest,
                         ::testing::Values(HeadNormCase{DType::kBF16, 128},
                                           HeadNormCase{DType::kF16, 128},
                                           HeadNormCase{DType::kBF16, 64},
                                           HeadNormCase{DType::kF16, 24},
                                           HeadNormCase{DType::kBF16, 256}),
                         [](const auto& info) {
                           return std::string(cuda_test::dtype_label(info.param.dtype)) + "_d" +
                                  std::to_string(info.param.head_dim);
                         });

// ---- validation: no device needed --------------------------------------------

TEST(HeadNormBiasValidation, BadShapesAreRejectedBeforeAnyCudaCall) {
  void* fake = reinterpret_cast<void*>(uintptr_t{256});
  BiasAddParams b;
  b.x = fake;
  b.bias = fake;
  b.num_tokens = 2;
  b.cols = 0;
  EXPECT_EQ(pvllm_cuda_add_bias(b, nullptr), cudaErrorInvalidValue);  // no columns
  b.cols = 16;
  b.token_stride = 8;  // shorter than a row
  EXPECT_EQ(pvllm_cuda_add_bias(b, nullptr), cudaErrorInvalidValue);
  b.token_stride = 0;
  b.dtype = static_cast<DType>(7);  // no such dtype
  EXPECT_EQ(pvllm_cuda_add_bias(b, nullptr), cudaErrorInvalidValue);
  b.dtype = DType::kBF16;
  b.bias = nullptr;
  EXPECT_EQ(pvllm_cuda_add_bias(b, nullptr), cudaErrorInvalidValue);

  HeadNormParams h;
  h.q = fake;
  h.k = fake;
  h.q_weight = fake;
  h.k_weight = fake;
  h.num_tokens = 2;
  h.num_heads = 4;
  h.num_kv_heads = 2;
  h.head_dim = kHeadNormMaxHeadDim + 8;  // longer than one warp serves
  EXPECT_EQ(pvllm_cuda_head_rmsnorm(h, nullptr), cudaErrorInvalidValue);
  h.head_dim = 128;
  h.k_weight = nullptr;  // k heads without their weight
  EXPECT_EQ(pvllm_cuda_head_rmsnorm(h, nullptr), cudaErrorInvalidValue);
  h.k_weight = fake;
  h.q_token_stride = 256;  // shorter than 4 heads of 128
  EXPECT_EQ(pvllm_cuda_head_rmsnorm(h, nullptr), cudaErrorInvalidValue);
  h.q_token_stride = 0;
  h.dtype = static_cast<DType>(7);  // no such dtype
  EXPECT_EQ(pvllm_cuda_head_rmsnorm(h, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace pvllm
