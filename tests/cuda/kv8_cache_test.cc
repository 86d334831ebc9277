// The CUDA backend's 8-bit KV cache (int8 and fp8 e4m3 codes with one fp16
// scale per token row; kernels/cuda/common/paged_kv.h):
//  - without a GPU: the host fp8 e4m3 reference (kv8_reference.h) against
//    cuda_fp8.h's own conversions run on the host, and the layout's byte
//    offsets against the sizing rule every pool and estimate uses
//    (kv_head_block_bytes);
//  - with a GPU: the KV write stores the reference encoder's bytes (int8:
//    the CPU backend's kv_encode), and decode and prefill attention over an
//    8-bit cache match a reference that reads the same bytes.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/tensor.h"
#include "core/kv/kv_cache_dtype.h"
#include "kernels/cuda/common/device_buffer.h"
#include "kernels/cuda/common/paged_kv.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/prefill_attention.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/kv8_reference.h"
#include "tests/cuda/paged_cache_util.h"

namespace pvllm {
namespace {

using cuda_test::fp8_e4m3_from_float;
using cuda_test::fp8_e4m3_to_float;
using cuda_test::Kv8Pool;

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

uint8_t cuda_fp8(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// ---- host checks: no GPU needed ------------------------------------------------

TEST(Kv8Fp8Reference, DecodesEveryCodeAsCudaDoes) {
  for (int c = 0; c < 256; ++c) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
    const float want = fp16_to_float(h.x);
    const float got = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(got, want) << "code " << c;
    }
  }
}

TEST(Kv8Fp8Reference, EncodesAsCudasSaturatingConversion) {
  std::vector<float> xs = {0.0f, -0.0f,   448.0f,  449.0f,   463.9f,   464.0f,   480.0f,
                           1e9f, 0x1p-6f, 0x1p-9f, 0x1p-10f, 0x3p-11f, 0x1p-20f, INFINITY};
  // Every code's value and the midpoints between neighbours (exact ties,
  // which must go to the even code), both signs.
  for (int c = 0; c < 0x7e; ++c) {
    const float a = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    const float b = fp8_e4m3_to_float(static_cast<uint8_t>(c + 1));
    xs.push_back(a);
    xs.push_back(0.5f * (a + b));
    xs.push_back(std::nextafter(0.5f * (a + b), 0.0f));
    xs.push_back(std::nextafter(0.5f * (a + b), 1e9f));
  }
  // A sweep over the float bit patterns of every binade.
  for (uint32_t b = 0; b < 0x7f800000u; b += 0x1357u) xs.push_back(bits_to_float(b));
  const size_t n = xs.size();
  for (size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  int64_t num_bad = 0;
  for (float x : xs) {
    const uint8_t want = cuda_fp8(x);
    const uint8_t got = fp8_e4m3_from_float(x);
    if (got != want && num_bad++ < 5) {
      ADD_FAILURE() << "x = " << x << ": reference 0x" << std::hex << int{got} << ", cuda_fp8.h 0x"
                    << int{want};
    }
  }
  EXPECT_EQ(num_bad, 0) << "of " << xs.size() << " values";
}

TEST(Kv8Fp8Reference, RowsKeepEachValueWithinHalfAStep) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(128);
  for (float& v : x) v = dist(rng);
  x[5] = 0.0f;
  std::vector<uint8_t> codes(x.size());
  uint16_t scale = 0;
  cuda_test::encode_kv8_row(KvCacheDtype::kFp8E4M3, x.data(), 128, codes.data(), &scale);
  const float d = fp16_to_float(scale);
  float absmax = 0.0f;
  for (float v : x) absmax = std::max(absmax, std::fabs(v));
  EXPECT_NEAR(d, absmax / 448.0f, absmax / 448.0f * 0x1p-11f);
  for (size_t i = 0; i < x.size(); ++i) {
    const float back = fp8_e4m3_to_float(codes[i]) * d;
    // 3 mantissa bits: half a step is 2^-4 of the value (normal codes), or
    // 2^-10 * d below the smallest normal; plus the scale's own rounding.
    EXPECT_LE(std::fabs(back - x[i]), std::fabs(x[i]) * 0x1.2p-4f + d * 0x1p-10f) << i;
  }
  EXPECT_EQ(codes[5], 0);
}

// The kernels' byte offsets cover each (block, kv head) exactly once and
// add up to the sizing rule the pool, the block copies and the memory
// estimate use, for every block size the engine takes.
TEST(Kv8Layout, OffsetsTileTheBlocksOfTheSizingRule) {
  for (KvCacheDtype dtype : {KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3}) {
    for (int32_t block_size : {8, 16, 32, 64, 128, 256}) {
      for (int32_t head_dim : {8, 16, 32, 64, 80, 96, 112, 128, 192, 256}) {
        const int64_t head_bytes =
            static_cast<int64_t>(kv_head_block_bytes(dtype, block_size, head_dim));
        ASSERT_EQ(kv8_head_bytes(block_size, head_dim), head_bytes);
        const int64_t num_chunks = 3;
        std::vector<int> seen(static_cast<size_t>(num_chunks * head_bytes), 0);
        for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
          for (int32_t o = 0; o < block_size; ++o) {
            const int64_t code = kv8_code_offset(chunk, o, block_size, head_dim);
            for (int32_t d = 0; d < head_dim; ++d) ++seen[static_cast<size_t>(code + d)];
            const int64_t scale = kv8_scale_offset(chunk, o, block_size, head_dim);
            ASSERT_EQ(scale % 2, 0) << "an fp16 scale must be 2-byte aligned";
            ++seen[static_cast<size_t>(scale)];
            ++seen[static_cast<size_t>(scale + 1)];
          }
        }
        for (size_t i = 0; i < seen.size(); ++i) {
          ASSERT_EQ(seen[i], 1) << "byte " << i << " of block_size " << block_size << " head_dim "
                                << head_dim;
        }
        // Block copies and swaps move whole 16-byte vectors of a block.
        EXPECT_EQ(head_bytes % 16, 0) << block_size << " x " << head_dim;
      }
    }
  }
}

// Slot s's (block, kv head) holds the CPU backend's int8 row bytes (the
// reference pool's int8 path is kernels/cpu/kv_encode.h).
TEST(Kv8Layout, Int8RowsAreTheCpuEncodersBytes) {
  const int32_t block_size = 16, head_dim = 64, num_kv_heads = 2;
  Kv8Pool pool(KvCacheDtype::kInt8, 4, num_kv_heads, block_size, head_dim, 0);
  std::vector<float> row(head_dim);
  for (int32_t d = 0; d < head_dim; ++d) row[d] = std::sin(0.37f * d) * 3.0f;
  pool.write(/*slot=*/2 * block_size + 5, /*h=*/1, row.data());
  std::vector<int8_t> codes(head_dim);
  uint16_t scale = 0;
  cpu::encode_kv_row(KvCacheDtype::kInt8, row.data(), head_dim, codes.data(), &scale);
  const int64_t chunk = 2 * num_kv_heads + 1;
  EXPECT_EQ(std::memcmp(pool.bytes.data() + chunk * pool.block_size * (head_dim + 2) + 5 * head_dim,
                        codes.data(), head_dim),
            0);
  EXPECT_EQ(pool.scale(2 * block_size + 5, 1), fp16_to_float(scale));
  for (int32_t d = 0; d < head_dim; ++d) {
    EXPECT_EQ(pool.value(2 * block_size + 5, 1, d),
              cpu::decode_kv_value(KvCacheDtype::kInt8, codes.data(), d, scale));
  }
}

// ---- device checks -------------------------------------------------------------

const char* cache_name(KvCacheDtype d) { return d == KvCacheDtype::kInt8 ? "int8" : "fp8"; }

const char* act_name(DType d) {
  return d == DType::kF32 ? "f32" : d == DType::kF16 ? "f16" : "bf16";
}

// Activation rows of `dtype` on the host: the bytes for the device and the
// floats they hold.
struct ActRows {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

ActRows random_rows(DType dtype, size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  ActRows r;
  r.values.resize(n);
  const size_t elem = dtype == DType::kF32 ? 4 : 2;
  r.bytes.resize(n * elem);
  for (size_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    if (dtype == DType::kF32) {
      r.values[i] = v;
      std::memcpy(r.bytes.data() + i * 4, &v, 4);
    } else {
      const uint16_t b = cuda_test::to_bits(v, dtype);
      r.values[i] = cuda_test::from_bits(b, dtype);
      std::memcpy(r.bytes.data() + i * 2, &b, 2);
    }
  }
  return r;
}

// Cache dtype, activation dtype, head dim.
using WriteConfig = std::tuple<KvCacheDtype, DType, int32_t>;

class Kv8WriteTest : public testing::TestWithParam<WriteConfig> {
 protected:
  void SetUp() override { PVLLM_CUDA_DEVICE_OR_SKIP(); }
};

// K and V rows as views into a fused QKV row (stride wider than the row),
// slots scattered over the pool with a padding row (-1): the device writes
// exactly the reference's bytes and touches nothing else.
TEST_P(Kv8WriteTest, StoresTheReferenceEncodersBytes) {
  const auto [cache_dtype, dtype, head_dim] = GetParam();
  const int32_t num_kv_heads = 2, block_size = 16, num_blocks = 5, num_tokens = 7;
  std::mt19937 rng(11 + head_dim);
  const int64_t row = static_cast<int64_t>(num_kv_heads) * head_dim;
  const int64_t stride = row * 3;  // q, k and v side by side, roughly
  ActRows k = random_rows(dtype, static_cast<size_t>(num_tokens * stride), -4.0f, 4.0f, rng);
  ActRows v = random_rows(dtype, static_cast<size_t>(num_tokens * stride), -0.01f, 0.01f, rng);
  // An all-zero row (scale 0, codes 0) and one spike.
  for (int32_t d = 0; d < head_dim; ++d) k.values[1 * stride + d] = 0.0f;
  std::memset(k.bytes.data() + 1 * stride * (dtype == DType::kF32 ? 4 : 2), 0,
              head_dim * (dtype == DType::kF32 ? 4 : 2));
  const std::vector<int64_t> slots = {3, 17, -1, 79, 40, 41, 64};

  const uint8_t fill = 0xA5;
  Kv8Pool k_ref(cache_dtype, num_blocks, num_kv_heads, block_size, head_dim, fill);
  Kv8Pool v_ref(cache_dtype, num_blocks, num_kv_heads, block_size, head_dim, fill);
  for (int32_t t = 0; t < num_tokens; ++t) {
    if (slots[t] < 0) continue;
    for (int32_t h = 0; h < num_kv_heads; ++h) {
      k_ref.write(slots[t], h, k.values.data() + t * stride + h * head_dim);
      v_ref.write(slots[t], h, v.values.data() + t * stride + h * head_dim);
    }
  }

  DeviceBuffer d_k, d_v, d_kc, d_vc, d_slots;
  ASSERT_TRUE(cuda_test::upload(d_k, k.bytes));
  ASSERT_TRUE(cuda_test::upload(d_v, v.bytes));
  ASSERT_TRUE(cuda_test::upload(d_kc, std::vector<uint8_t>(k_ref.bytes.size(), fill)));
  ASSERT_TRUE(cuda_test::upload(d_vc, std::vector<uint8_t>(v_ref.bytes.size(), fill)));
  ASSERT_TRUE(cuda_test::upload(d_slots, slots));
  KvWriteParams w;
  w.k = d_k.get();
  w.v = d_v.get();
  w.k_token_stride = stride;
  w.v_token_stride = stride;
  w.paged_kv.k_cache = d_kc.get();
  w.paged_kv.v_cache = d_vc.get();
  w.paged_kv.block_size = block_size;
  w.paged_kv.num_kv_heads = num_kv_heads;
  w.paged_kv.head_dim = head_dim;
  w.paged_kv.cache_dtype = cache_dtype;
  w.slot_mapping = d_slots.as<int64_t>();
  w.dtype = dtype;
  w.num_tokens = num_tokens;
  PVLLM_CUDA_OK(pvllm_cuda_write_kv(w, nullptr));
  PVLLM_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> got_k, got_v;
  ASSERT_TRUE(cuda_test::download(d_kc, k_ref.bytes.size(), &got_k));
  ASSERT_TRUE(cuda_test::download(d_vc, v_ref.bytes.size(), &got_v));
  for (int which = 0; which < 2; ++which) {
    const std::vector<uint8_t>& got = which == 0 ? got_k : got_v;
    const std::vector<uint8_t>& want = which == 0 ? k_ref.bytes : v_ref.bytes;
    int64_t num_bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i] && num_bad++ < 5) {
        ADD_FAILURE() << (which == 0 ? "K" : "V") << " byte " << i << ": got " << int{got[i]}
                      << ", reference " << int{want[i]};
      }
    }
    EXPECT_EQ(num_bad, 0) << (which == 0 ? "K" : "V");
  }
}

INSTANTIATE_TEST_SUITE_P(Kv8, Kv8WriteTest,
                         testing::Combine(testing::Values(KvCacheDtype::kInt8,
                                                          KvCacheDtype::kFp8E4M3),
                                          testing::Values(DType::kBF16, DType::kF16, DType::kF32),
                                          testing::Values(8, 64, 128, 256)),
                         [](const testing::TestParamInfo<WriteConfig>& info) {
                           return std::string(cache_name(std::get<0>(info.param))) + "_" +
                                  act_name(std::get<1>(info.param)) + "_d" +
                                  std::to_string(std::get<2>(info.param));
                         });

// The attention of q rows over an 8-bit pool, in double, reading the same
// bytes the device reads: K's scale multiplies the score, V's the weight.
// Row r of sequence s sits at position context_lens[s] - q_len[s] + r.
std::vector<float> reference_attention(const std::vector<float>& q, const Kv8Pool& k,
                                       const Kv8Pool& v, const cuda_test::PagedLayout& layout,
                                       const std::vector<int32_t>& query_start,
                                       const std::vector<int32_t>& context_lens, int32_t num_heads,
                                       int32_t head_dim, float scale) {
  const int32_t group = num_heads / k.num_kv_heads;
  std::vector<float> out(q.size(), 0.0f);
  for (size_t s = 0; s + 1 < query_start.size(); ++s) {
    const int32_t q_len = query_start[s + 1] - query_start[s];
    for (int32_t r = 0; r < q_len; ++r) {
      const int32_t pos = context_lens[s] - q_len + r;
      const int64_t token = query_start[s] + r;
      for (int32_t h = 0; h < num_heads; ++h) {
        const int32_t kvh = h / group;
        const float* qr = q.data() + (token * num_heads + h) * head_dim;
        std::vector<double> scores(pos + 1);
        double m = -INFINITY;
        for (int32_t j = 0; j <= pos; ++j) {
          const int64_t slot = layout.slot(static_cast<int32_t>(s), j);
          double dot = 0.0;
          for (int32_t d = 0; d < head_dim; ++d) {
            dot += static_cast<double>(qr[d]) * scale * k.value(slot, kvh, d);
          }
          scores[j] = dot;
          m = std::max(m, dot);
        }
        double sum = 0.0;
        for (double& sc : scores) sum += (sc = std::exp(sc - m));
        float* o = out.data() + (token * num_heads + h) * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) {
          double acc = 0.0;
          for (int32_t j = 0; j <= pos; ++j) {
            acc += scores[j] * v.value(layout.slot(static_cast<int32_t>(s), j), kvh, d);
          }
          o[d] = static_cast<float>(acc / sum);
        }
      }
    }
  }
  return out;
}

// Cache dtype, activation dtype (fp16 / bf16), head dim, block size, GQA group.
using AttentionConfig = std::tuple<KvCacheDtype, DType, int32_t, int32_t, int32_t>;

std::string attention_config_name(const testing::TestParamInfo<AttentionConfig>& info) {
  const auto [cache, dtype, head_dim, block_size, group] = info.param;
  return std::string(cache_name(cache)) + "_" + act_name(dtype) + "_d" + std::to_string(head_dim) +
         "_b" + std::to_string(block_size) + "_g" + std::to_string(group);
}

class Kv8AttentionTest : public testing::TestWithParam<AttentionConfig> {
 protected:
  void SetUp() override { PVLLM_CUDA_DEVICE_OR_SKIP(); }

  // Chunks (prior tokens, new rows) per sequence: the cache holds every
  // position (encoded on the host), q has the chunk's rows. q_len 1 for
  // every sequence also runs the decode launcher.
  void check(const std::vector<std::pair<int32_t, int32_t>>& chunks) {
    const auto [cache_dtype, dtype, head_dim, block_size, group] = GetParam();
    const int32_t num_kv_heads = cuda_test::kNumKvHeads;
    const int32_t num_heads = num_kv_heads * group;
    const int32_t num_seqs = static_cast<int32_t>(chunks.size());
    std::mt19937 rng(5 + head_dim + block_size + group);
    std::vector<int32_t> context_lens, query_start{0};
    bool decode_only = true;
    for (const auto& [prior, q_len] : chunks) {
      context_lens.push_back(prior + q_len);
      query_start.push_back(query_start.back() + q_len);
      decode_only = decode_only && q_len == 1;
    }
    const cuda_test::PagedLayout layout =
        cuda_test::make_layout(context_lens, block_size, /*num_shared_blocks=*/1, rng);
    // Unwritten rows hold 0x7f codes (127, or fp8's NaN) and NaN scales
    // (0x7f7f): a stray read turns the output into NaN.
    Kv8Pool k(cache_dtype, layout.num_blocks, num_kv_heads, block_size, head_dim, 0x7f);
    Kv8Pool v(cache_dtype, layout.num_blocks, num_kv_heads, block_size, head_dim, 0x7f);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> row(head_dim);
    for (int32_t s = 0; s < num_seqs; ++s) {
      for (int32_t pos = 0; pos < context_lens[s]; ++pos) {
        // Shared prefix blocks hold the same tokens in both sequences.
        if (s == 1 && pos < block_size) continue;
        for (int32_t h = 0; h < num_kv_heads; ++h) {
          // Rows of different magnitudes, so the scales differ row to row.
          const float mag = 0.05f + 2.0f * static_cast<float>((pos * 7 + h) % 5) / 4.0f;
          for (float& x : row) x = dist(rng) * mag;
          k.write(layout.slot(s, pos), h, row.data());
          for (float& x : row) x = dist(rng) * mag;
          v.write(layout.slot(s, pos), h, row.data());
        }
      }
    }
    const int32_t num_tokens = query_start.back();
    const cuda_test::RoundedValues q = cuda_test::random_rounded(
        dtype, static_cast<size_t>(num_tokens) * num_heads * head_dim, -2.0f, 2.0f, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const std::vector<float> expected = reference_attention(
        q.values, k, v, layout, query_start, context_lens, num_heads, head_dim, scale);
    // Outputs reach |V| up to ~2 (scaled rows): twice the fp16/bf16 bound.
    const float tol = 2.0f * cuda_test::prefill_tolerance(dtype);

    cuda_test::DeviceCache dev;
    ASSERT_TRUE(cuda_test::upload(dev.k, k.bytes));
    ASSERT_TRUE(cuda_test::upload(dev.v, v.bytes));
    ASSERT_TRUE(cuda_test::upload(dev.block_tables, layout.block_tables));
    ASSERT_TRUE(cuda_test::upload(dev.context_lens, context_lens));
    dev.paged_kv.k_cache = dev.k.get();
    dev.paged_kv.v_cache = dev.v.get();
    dev.paged_kv.block_tables = dev.block_tables.as<int32_t>();
    dev.paged_kv.max_blocks_per_seq = layout.max_blocks_per_seq;
    dev.paged_kv.block_size = block_size;
    dev.paged_kv.num_kv_heads = num_kv_heads;
    dev.paged_kv.head_dim = head_dim;
    dev.paged_kv.cache_dtype = cache_dtype;
    DeviceBuffer d_q, d_out, d_qs, d_items;
    ASSERT_TRUE(cuda_test::upload(d_q, q.bits));
    ASSERT_TRUE(cuda_test::allocate(d_out, q.bits.size() * 2));
    ASSERT_TRUE(cuda_test::upload(d_qs, query_start));
    const std::vector<int32_t> items =
        plan_prefill_attention(query_start.data(), context_lens.data(), num_seqs);
    ASSERT_TRUE(cuda_test::upload(d_items, items));

    std::vector<uint16_t> got;
    // Both prefill variants are asked for: an 8-bit cache goes to the
    // kernel that reads it whichever is named.
    for (PrefillVariant variant : cuda_test::kPrefillVariants) {
      PrefillAttentionParams p = cuda_test::prefill_params(
          dev, d_q.get(), d_out.get(), d_qs, d_items, static_cast<int32_t>(items.size() / 2), dtype,
          num_seqs, num_heads, scale);
      p.variant = variant;
      PVLLM_CUDA_OK(cudaMemset(d_out.get(), 0x7F, q.bits.size() * 2));
      PVLLM_CUDA_OK(pvllm_cuda_prefill_attention(p, nullptr));
      PVLLM_CUDA_OK(cudaDeviceSynchronize());
      ASSERT_TRUE(cuda_test::download(d_out, q.bits.size(), &got));
      cuda_test::expect_close(dtype, got, expected, tol,
                              std::string("prefill (") + cuda_test::variant_name(variant) + ")");
    }
    if (!decode_only) return;
    DecodeAttentionParams dp = cuda_test::decode_params(
        dev, d_q.get(), d_out.get(), dtype, num_seqs, num_heads,
        *std::max_element(context_lens.begin(), context_lens.end()), scale);
    EXPECT_EQ(pvllm_cuda_decode_attention_workspace_bytes(dp), 0u);
    PVLLM_CUDA_OK(cudaMemset(d_out.get(), 0x7F, q.bits.size() * 2));
    PVLLM_CUDA_OK(pvllm_cuda_decode_attention(dp, nullptr));
    PVLLM_CUDA_OK(cudaDeviceSynchronize());
    ASSERT_TRUE(cuda_test::download(d_out, q.bits.size(), &got));
    cuda_test::expect_close(dtype, got, expected, tol, "decode");
  }
};

TEST_P(Kv8AttentionTest, DecodeMatchesTheReferenceOverTheSameBytes) {
  check({{40, 1}, {17, 1}, {0, 1}, {100, 1}});
}

TEST_P(Kv8AttentionTest, PrefillChunksMatchTheReferenceOverTheSameBytes) {
  check({{0, 37}, {20, 9}, {64, 70}});
}

INSTANTIATE_TEST_SUITE_P(
    Kv8, Kv8AttentionTest,
    testing::Combine(testing::Values(KvCacheDtype::kInt8, KvCacheDtype::kFp8E4M3),
                     testing::Values(DType::kBF16, DType::kF16), testing::Values(8, 64, 128),
                     testing::Values(16, 32), testing::Values(1, 4)),
    attention_config_name);

}  // namespace
}  // namespace pvllm
