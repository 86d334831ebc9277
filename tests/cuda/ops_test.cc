// The CUDA elementwise ops (RMSNorm with and without the fused residual,
// SiLU x mul, embedding gather, RoPE) against the fp32 CPU references of
// kernels/cpu/ops.h on random data rounded to fp16 / bf16.
//
// Tolerances: the device computes in fp32 like the reference and rounds the
// result once to the dtype, so |device - reference| <= half an ulp of the
// dtype (half_ulp_rel(dtype) * |ref|) plus the fp32 difference between the
// two computations: reduction order (RMSNorm, ~sqrt(hidden) * 2^-24, bounded
// here by 2e-5 relative), expf vs std::exp (a few ulp) and, for RoPE, the
// documented fp32 angle (see rope.h). Exact copies (embedding, the stored
// residual) are compared bit for bit.
#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/model/model_config.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "tests/cuda/cuda_test_util.h"

namespace pvllm {
namespace {

using cuda_test::download;
using cuda_test::from_bits;
using cuda_test::half_ulp_rel;
using cuda_test::to_bits;
using cuda_test::upload;

using cuda_test::kAbsSlack;
using cuda_test::kFp32Slack;

std::vector<float> random_normal(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// Rounds through the dtype: the values the device sees.
std::vector<float> rounded(const std::vector<float>& v, DType dtype) {
  return from_bits(to_bits(v, dtype), dtype);
}

void expect_close(const std::vector<uint16_t>& device, const std::vector<float>& ref, DType dtype,
                  double extra_rel = 0.0) {
  ASSERT_GE(device.size(), ref.size());
  int num_bad = 0;
  for (size_t i = 0; i < ref.size() && num_bad < 5; ++i) {
    const double got = from_bits(device[i], dtype);
    const double tol =
        (half_ulp_rel(dtype) + kFp32Slack + extra_rel) * std::fabs(ref[i]) + kAbsSlack;
    if (!(std::fabs(got - ref[i]) <= tol)) {
      ++num_bad;
      ADD_FAILURE() << "element " << i << ": device " << got << " reference " << ref[i]
                    << " tolerance " << tol;
    }
  }
}

// ---- validation: no device needed --------------------------------------------

TEST(CudaOpsValidation, BadShapesAreRejectedBeforeAnyCudaCall) {
  // Fake non-null pointers: a launcher that got past validation would touch
  // CUDA and, without a device, return something else than InvalidValue.
  void* fake = reinterpret_cast<void*>(uintptr_t{256});
  RmsNormParams norm{fake, nullptr, fake, fake, 4, 0, 1e-5f, DType::kBF16};
  EXPECT_EQ(pvllm_cuda_rmsnorm(norm, nullptr), cudaErrorInvalidValue);  // hidden 0
  norm.hidden = 64;
  norm.dtype = static_cast<DType>(7);
  EXPECT_EQ(pvllm_cuda_rmsnorm(norm, nullptr), cudaErrorInvalidValue);  // no such dtype
  norm.dtype = DType::kF16;
  norm.weight = nullptr;
  EXPECT_EQ(pvllm_cuda_rmsnorm(norm, nullptr), cudaErrorInvalidValue);
  norm.weight = fake;
  norm.num_tokens = -1;
  EXPECT_EQ(pvllm_cuda_rmsnorm(norm, nullptr), cudaErrorInvalidValue);

  SiluMulParams act{fake, fake, 2, 0, DType::kBF16};
  EXPECT_EQ(pvllm_cuda_silu_mul(act, nullptr), cudaErrorInvalidValue);
  act.intermediate = 16;
  act.in = nullptr;
  EXPECT_EQ(pvllm_cuda_silu_mul(act, nullptr), cudaErrorInvalidValue);

  EmbeddingParams emb{static_cast<const int32_t*>(fake), fake, fake, 2, 64, 0, DType::kF16};
  EXPECT_EQ(pvllm_cuda_embedding(emb, nullptr), cudaErrorInvalidValue);  // vocab 0
  emb.vocab = 10;
  emb.hidden = -8;
  EXPECT_EQ(pvllm_cuda_embedding(emb, nullptr), cudaErrorInvalidValue);

  RopeParams rope;
  rope.q = fake;
  rope.k = fake;
  rope.positions = static_cast<const int32_t*>(fake);
  rope.inv_freq = static_cast<const float*>(fake);
  rope.num_tokens = 3;
  rope.num_heads = 4;
  rope.num_kv_heads = 2;
  rope.head_dim = 24;  // not in the supported list
  EXPECT_EQ(pvllm_cuda_rope(rope, nullptr), cudaErrorInvalidValue);
  rope.num_tokens = 0;  // unsupported even with nothing to do
  EXPECT_EQ(pvllm_cuda_rope(rope, nullptr), cudaErrorInvalidValue);
  // The query the CUDA backend asks before it accepts a model: the same list.
  EXPECT_FALSE(pvllm_cuda_rope_serves_head_dim(24));
  EXPECT_FALSE(pvllm_cuda_rope_serves_head_dim(0));
  for (int32_t d : {8, 64, 96, 128, 256}) EXPECT_TRUE(pvllm_cuda_rope_serves_head_dim(d)) << d;
  rope.num_tokens = 3;
  rope.head_dim = 64;
  rope.q_token_stride = 100;  // shorter than a token's 4 * 64 elements
  EXPECT_EQ(pvllm_cuda_rope(rope, nullptr), cudaErrorInvalidValue);
  rope.q_token_stride = 0;
  rope.k = nullptr;
  EXPECT_EQ(pvllm_cuda_rope(rope, nullptr), cudaErrorInvalidValue);
}

TEST(CudaOpsValidation, EmptyBatchesSucceedWithoutLaunching) {
  void* fake = reinterpret_cast<void*>(uintptr_t{256});
  EXPECT_EQ(pvllm_cuda_rmsnorm(RmsNormParams{fake, nullptr, fake, fake, 0, 64, 1e-5f, DType::kBF16},
                               nullptr),
            cudaSuccess);
  EXPECT_EQ(pvllm_cuda_silu_mul(SiluMulParams{fake, fake, 0, 64, DType::kF16}, nullptr),
            cudaSuccess);
}

// ---- RMSNorm -------------------------------------------------------------------

struct NormCase {
  DType dtype;
  int32_t hidden;
  bool with_residual;
};

class CudaRmsNormTest : public ::testing::TestWithParam<NormCase> {};

TEST_P(CudaRmsNormTest, MatchesCpuReference) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const auto [dtype, hidden, with_residual] = GetParam();
  const int32_t num_tokens = 7;
  const size_t count = size_t{7} * hidden;
  const float eps = 1e-5f;
  const std::vector<float> x = rounded(random_normal(count, 1), dtype);
  const std::vector<float> residual = rounded(random_normal(count, 2, 2.0f), dtype);
  std::vector<float> weight = random_normal(hidden, 3, 0.3f);
  for (float& w : weight) w += 1.0f;
  weight = rounded(weight, dtype);

  // Reference: the new residual rounded to dtype (that is what the device
  // stores and then normalises), then the CPU rmsnorm.
  std::vector<uint16_t> new_residual_bits(count);
  std::vector<float> normed_input = x;
  if (with_residual) {
    for (size_t i = 0; i < count; ++i) {
      new_residual_bits[i] = to_bits(x[i] + residual[i], dtype);
      normed_input[i] = from_bits(new_residual_bits[i], dtype);
    }
  }
  std::vector<float> ref(count);
  cpu::rmsnorm(normed_input.data(), weight.data(), num_tokens, hidden, eps, ref.data());

  DeviceBuffer d_x, d_res, d_w, d_out;
  ASSERT_TRUE(upload(d_x, to_bits(x, dtype)));
  ASSERT_TRUE(upload(d_res, to_bits(residual, dtype)));
  ASSERT_TRUE(upload(d_w, to_bits(weight, dtype)));
  ASSERT_TRUE(cuda_test::allocate(d_out, count * sizeof(uint16_t)));
  const RmsNormParams params{d_x.get(),  with_residual ? d_res.get() : nullptr,
                             d_w.get(),  d_out.get(),
                             num_tokens, hidden,
                             eps,        dtype};
  ASSERT_EQ(pvllm_cuda_rmsnorm(params, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<uint16_t> out, res;
  ASSERT_TRUE(download(d_out, count, &out));
  ASSERT_TRUE(download(d_res, count, &res));
  expect_close(out, ref, dtype);
  if (with_residual) {
    EXPECT_EQ(res, new_residual_bits) << "residual must be round(x + residual)";
  } else {
    EXPECT_EQ(res, to_bits(residual, dtype)) << "residual must be untouched";
  }
}

TEST(CudaRmsNorm, InPlaceOnMisalignedRowsMatchesAlignedResult) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  // hidden % 8 == 0 but every pointer off by one element: the scalar path.
  const DType dtype = DType::kBF16;
  const int32_t hidden = 256;
  const int32_t num_tokens = 3;
  const size_t count = size_t{3} * hidden;
  const std::vector<float> x = rounded(random_normal(count, 11), dtype);
  const std::vector<float> weight = rounded(random_normal(hidden, 12, 1.0f), dtype);
  std::vector<float> ref(count);
  cpu::rmsnorm(x.data(), weight.data(), num_tokens, hidden, 1e-6f, ref.data());

  std::vector<uint16_t> x_bits = to_bits(x, dtype);
  x_bits.insert(x_bits.begin(), 0);
  std::vector<uint16_t> w_bits = to_bits(weight, dtype);
  w_bits.insert(w_bits.begin(), 0);
  DeviceBuffer d_x, d_w;
  ASSERT_TRUE(upload(d_x, x_bits));
  ASSERT_TRUE(upload(d_w, w_bits));
  // out aliases x: in place.
  uint16_t* x_dev = d_x.as<uint16_t>() + 1;
  const RmsNormParams params{x_dev, nullptr, d_w.as<uint16_t>() + 1, x_dev, num_tokens, hidden,
                             1e-6f, dtype};
  ASSERT_EQ(pvllm_cuda_rmsnorm(params, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> out;
  ASSERT_TRUE(download(d_x, x_bits.size(), &out));
  out.erase(out.begin());
  expect_close(out, ref, dtype);
}

std::vector<NormCase> norm_cases() {
  std::vector<NormCase> cases;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    // Multiples of 8 (vector path) and not (1, 13, 100: scalar path).
    for (int32_t hidden : {1, 8, 13, 64, 100, 2048, 4096, 5120}) {
      for (bool with_residual : {false, true}) cases.push_back({dtype, hidden, with_residual});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CudaRmsNormTest, ::testing::ValuesIn(norm_cases()),
                         [](const auto& info) {
                           return std::string(cuda_test::dtype_label(info.param.dtype)) + "_h" +
                                  std::to_string(info.param.hidden) +
                                  (info.param.with_residual ? "_residual" : "_plain");
                         });

// ---- SiLU x mul --------------------------------------------------------------

struct ActCase {
  DType dtype;
  int32_t intermediate;
};

class CudaSiluMulTest : public ::testing::TestWithParam<ActCase> {};

TEST_P(CudaSiluMulTest, MatchesCpuReference) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const auto [dtype, intermediate] = GetParam();
  const int32_t num_tokens = 5;
  const std::vector<float> in =
      rounded(random_normal(size_t{5} * 2 * intermediate, 21, 3.0f), dtype);
  std::vector<float> ref(size_t{5} * intermediate);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* row = in.data() + size_t(t) * 2 * intermediate;
    cpu::silu_mul(row, row + intermediate, intermediate, ref.data() + size_t(t) * intermediate);
  }
  DeviceBuffer d_in, d_out;
  ASSERT_TRUE(upload(d_in, to_bits(in, dtype)));
  ASSERT_TRUE(cuda_test::allocate(d_out, ref.size() * sizeof(uint16_t)));
  ASSERT_EQ(pvllm_cuda_silu_mul(
                SiluMulParams{d_in.get(), d_out.get(), num_tokens, intermediate, dtype}, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> out;
  ASSERT_TRUE(download(d_out, ref.size(), &out));
  expect_close(out, ref, dtype);
}

std::vector<ActCase> act_cases() {
  std::vector<ActCase> cases;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (int32_t inter : {1, 7, 8, 100, 688, 11008, 14336}) cases.push_back({dtype, inter});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CudaSiluMulTest, ::testing::ValuesIn(act_cases()),
                         [](const auto& info) {
                           return std::string(cuda_test::dtype_label(info.param.dtype)) + "_i" +
                                  std::to_string(info.param.intermediate);
                         });

// ---- embedding -----------------------------------------------------------------

class CudaEmbeddingTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(CudaEmbeddingTest, GathersRowsAndZeroesOutOfRangeIds) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const int32_t hidden = GetParam();
  const int32_t vocab = 50;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const std::vector<float> table = rounded(random_normal(size_t{50} * hidden, 31), dtype);
    const std::vector<int32_t> ids = {0, 49, 7, -1, 50, 7, 1000000, 23, -2147483647 - 1};
    const auto num_tokens = static_cast<int32_t>(ids.size());

    // Reference: cpu::embedding for the valid ids, zeros for the rest.
    Tensor t;
    t.dtype = dtype;
    t.shape = {vocab, hidden};
    const std::vector<uint16_t> table_bits = to_bits(table, dtype);
    t.data = table_bits.data();
    std::vector<uint16_t> expected(size_t(num_tokens) * hidden, 0);
    for (int32_t i = 0; i < num_tokens; ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) continue;
      std::vector<float> row(hidden);
      cpu::embedding(t, &ids[i], 1, hidden, row.data());
      for (int32_t j = 0; j < hidden; ++j)
        expected[size_t(i) * hidden + j] = to_bits(row[j], dtype);
    }

    DeviceBuffer d_ids, d_table, d_out;
    ASSERT_TRUE(upload(d_ids, ids));
    ASSERT_TRUE(upload(d_table, table_bits));
    // Poison the output so that "zeros" must be written, not inherited.
    ASSERT_TRUE(upload(d_out, std::vector<uint16_t>(expected.size(), 0x7777)));
    ASSERT_EQ(pvllm_cuda_embedding(EmbeddingParams{d_ids.as<int32_t>(), d_table.get(), d_out.get(),
                                                   num_tokens, hidden, vocab, dtype},
                                   nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> out;
    ASSERT_TRUE(download(d_out, expected.size(), &out));
    EXPECT_EQ(out, expected) << cuda_test::dtype_label(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Hidden, CudaEmbeddingTest, ::testing::Values(1, 5, 8, 64, 100, 4096));

// ---- RoPE ------------------------------------------------------------------------

struct RopeCase {
  DType dtype;
  RopeStyle style;
  int32_t head_dim;
  bool fused_qkv;  // q and k are strided views into one [tokens, q | k | v] buffer
  bool llama3;     // llama3 scaling of inv_freq
  // Dynamic scaling: tokens of three sequences of different lengths, each
  // with its own row of frequencies (RopeParams::freq_rows).
  bool dynamic = false;
};

class CudaRopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CudaRopeTest, MatchesCpuReference) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const auto [dtype, style, head_dim, fused_qkv, llama3, dynamic] = GetParam();
  const int32_t num_tokens = 9;
  const int32_t num_heads = 4;
  const int32_t num_kv_heads = 2;
  const int32_t half = head_dim / 2;
  ModelConfig config;
  config.head_dim = head_dim;
  config.rope_theta = 500000.0f;
  if (llama3) {
    config.rope_scaling.type = RopeScaling::Type::kLlama3;
    config.rope_scaling.factor = 8.0f;
  }
  const std::vector<int32_t> positions = {0, 1, 2, 17, 255, 1000, 4095, 30000, 65535};
  // inv_freq [rows, half] and each token's row: one row, or with dynamic
  // scaling the table of sequences of lengths 100 (the base frequencies),
  // 5000 and 65536, with the tokens of each in turn.
  std::vector<float> inv_freq = rope_inv_freq(config);
  std::vector<int32_t> freq_rows(num_tokens, 0);
  if (dynamic) {
    config.rope_scaling.type = RopeScaling::Type::kDynamic;
    config.rope_scaling.factor = 4.0f;
    config.rope_scaling.original_max_position_embeddings = 4096;
    inv_freq.clear();
    for (int64_t seq_len : {100, 5000, 65536}) {
      const std::vector<float> f = rope_inv_freq(config, seq_len);
      inv_freq.insert(inv_freq.end(), f.begin(), f.end());
    }
    freq_rows = {0, 0, 0, 1, 1, 1, 1, 2, 2};
    // The rows differ, so a kernel reading only row 0 cannot pass.
    ASSERT_NE(inv_freq[half + 1], inv_freq[1]);
    ASSERT_NE(inv_freq[2 * half + 1], inv_freq[half + 1]);
  }

  const int64_t q_row = int64_t{num_heads} * head_dim;
  const int64_t k_row = int64_t{num_kv_heads} * head_dim;
  const int64_t row = fused_qkv ? q_row + 2 * k_row : 0;  // 0: separate packed buffers
  const std::vector<float> q = rounded(random_normal(size_t(num_tokens) * q_row, 41), dtype);
  const std::vector<float> k = rounded(random_normal(size_t(num_tokens) * k_row, 42), dtype);
  const std::vector<float> v = rounded(random_normal(size_t(num_tokens) * k_row, 43), dtype);

  std::vector<float> cos(size_t(num_tokens) * half);
  std::vector<float> sin(cos.size());
  for (int32_t t = 0; t < num_tokens; ++t) {
    cpu::rope_cos_sin(&positions[t], 1, inv_freq.data() + size_t(freq_rows[t]) * half, half,
                      cos.data() + size_t(t) * half, sin.data() + size_t(t) * half);
  }
  std::vector<float> q_ref = q;
  std::vector<float> k_ref = k;
  cpu::rope(q_ref.data(), num_tokens, num_heads, head_dim, cos.data(), sin.data(), style);
  cpu::rope(k_ref.data(), num_tokens, num_kv_heads, head_dim, cos.data(), sin.data(), style);

  // Device buffers: either one fused [tokens, q | k | v] or q and k apart.
  std::vector<uint16_t> fused;
  if (fused_qkv) {
    for (int32_t t = 0; t < num_tokens; ++t) {
      for (int64_t i = 0; i < q_row; ++i) fused.push_back(to_bits(q[t * q_row + i], dtype));
      for (int64_t i = 0; i < k_row; ++i) fused.push_back(to_bits(k[t * k_row + i], dtype));
      for (int64_t i = 0; i < k_row; ++i) fused.push_back(to_bits(v[t * k_row + i], dtype));
    }
  }
  DeviceBuffer d_fused, d_q, d_k, d_pos, d_inv, d_rows;
  ASSERT_TRUE(upload(d_fused, fused_qkv ? fused : std::vector<uint16_t>(1)));
  ASSERT_TRUE(upload(d_q, to_bits(q, dtype)));
  ASSERT_TRUE(upload(d_k, to_bits(k, dtype)));
  ASSERT_TRUE(upload(d_pos, positions));
  ASSERT_TRUE(upload(d_inv, inv_freq));
  ASSERT_TRUE(upload(d_rows, freq_rows));
  RopeParams params;
  params.q = fused_qkv ? d_fused.get() : d_q.get();
  params.k = fused_qkv ? static_cast<void*>(d_fused.as<uint16_t>() + q_row) : d_k.get();
  params.positions = d_pos.as<int32_t>();
  params.inv_freq = d_inv.as<float>();
  params.freq_rows = dynamic ? d_rows.as<int32_t>() : nullptr;
  params.num_tokens = num_tokens;
  params.num_heads = num_heads;
  params.num_kv_heads = num_kv_heads;
  params.head_dim = head_dim;
  params.q_token_stride = row;
  params.k_token_stride = row;
  params.style = style;
  params.dtype = dtype;
  ASSERT_EQ(pvllm_cuda_rope(params, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<uint16_t> q_dev;
  std::vector<uint16_t> k_dev;
  if (fused_qkv) {
    std::vector<uint16_t> out;
    ASSERT_TRUE(download(d_fused, fused.size(), &out));
    for (int32_t t = 0; t < num_tokens; ++t) {
      const uint16_t* r = out.data() + t * row;
      q_dev.insert(q_dev.end(), r, r + q_row);
      k_dev.insert(k_dev.end(), r + q_row, r + q_row + k_row);
      for (int64_t i = 0; i < k_row; ++i) {
        ASSERT_EQ(r[q_row + k_row + i], to_bits(v[t * k_row + i], dtype)) << "v must be untouched";
      }
    }
  } else {
    ASSERT_TRUE(download(d_q, q.size(), &q_dev));
    ASSERT_TRUE(download(d_k, k.size(), &k_dev));
  }

  // Per pair (a, b) -> rotated: half a dtype ulp of the result, plus the
  // angle error times |a| + |b| (the derivative of the rotation is bounded
  // by that): the fp32 angle is off by <= pos * 2^-24 (rope.h), sincosf and
  // the products by a few fp32 ulp (2^-20 covers them).
  auto check = [&](const std::vector<float>& in, const std::vector<float>& ref,
                   const std::vector<uint16_t>& dev, int32_t heads, const char* what) {
    int num_bad = 0;
    for (int32_t t = 0; t < num_tokens && num_bad < 5; ++t) {
      const double angle_err = positions[t] * 0x1p-24 + 0x1p-20;
      for (int32_t h = 0; h < heads; ++h) {
        const size_t base = (size_t(t) * heads + h) * head_dim;
        for (int32_t j = 0; j < half; ++j) {
          const size_t i0 = base + (style == RopeStyle::kInterleaved ? 2 * j : j);
          const size_t i1 = base + (style == RopeStyle::kInterleaved ? 2 * j + 1 : j + half);
          const double mag = std::fabs(in[i0]) + std::fabs(in[i1]);
          for (size_t i : {i0, i1}) {
            const double got = from_bits(dev[i], dtype);
            // The rounding of the device's (already perturbed) value adds
            // half an ulp of it: hence the factor on the angle term.
            const double tol = half_ulp_rel(dtype) * std::fabs(ref[i]) +
                               mag * angle_err * (1.0 + half_ulp_rel(dtype)) + kAbsSlack;
            if (!(std::fabs(got - ref[i]) <= tol) && num_bad++ < 5) {
              ADD_FAILURE() << what << " token " << t << " head " << h << " pair " << j
                            << ": device " << got << " reference " << ref[i] << " tol " << tol;
            }
          }
        }
      }
    }
  };
  check(q, q_ref, q_dev, num_heads, "q");
  check(k, k_ref, k_dev, num_kv_heads, "k");
}

std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> cases;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kRotateHalf}) {
      for (int32_t head_dim : {8, 64, 128}) {
        cases.push_back({dtype, style, head_dim, false, false});
      }
      cases.push_back({dtype, style, 128, true, false});
      cases.push_back({dtype, style, 128, false, true});
      cases.push_back({dtype, style, 128, true, false, true});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaRopeTest, ::testing::ValuesIn(rope_cases()),
                         [](const auto& info) {
                           const RopeCase& c = info.param;
                           return std::string(cuda_test::dtype_label(c.dtype)) +
                                  (c.style == RopeStyle::kInterleaved ? "_interleaved"
                                                                      : "_rotate_half") +
                                  "_d" + std::to_string(c.head_dim) +
                                  (c.fused_qkv ? "_fused_qkv" : "") + (c.llama3 ? "_llama3" : "") +
                                  (c.dynamic ? "_dynamic" : "");
                         });

}  // namespace
}  // namespace pvllm
