// Shared by the paged-attention suites (attention_test.cc,
// window_attention_test.cc): tolerances, a paged pool and its block tables
// on the host, one layer's K/V pools filled with rounded random values (NaN
// in every slot the test does not fill), their device copy as a PagedKv,
// strided q rows, and the kernel configurations the suites run over.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/tensor.h"
#include "kernels/cuda/common/device_buffer.h"
#include "kernels/cuda/common/paged_kv.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/prefill_attention.h"
#include "tests/cuda/cuda_test_util.h"

namespace pvllm::cuda_test {

inline constexpr int32_t kNumKvHeads = 2;

// Tolerances, absolute, on outputs whose magnitude is at most max|V| = 1
// (every output is a convex combination of V rows in [-1, 1]):
//  - the kernel rounds its fp32 result to the output type: at most half an
//    ulp, 2^-9 for bf16 and 2^-12 for fp16 below 1;
//  - fp32 accumulation in another order (and expf vs std::exp) adds ~1e-6;
//  - prefill also rounds the softmax probabilities to the input type before
//    the P.V product on tensor cores: each p moves by at most the unit
//    roundoff, 2^-8 (bf16, 8 significant bits) / 2^-11 (fp16, 11) relative,
//    so the output moves by at most that times max|V|, while the row sum
//    stays in fp32.
// Decode: worst case 2^-9 / 2^-12, bound 2^-8 / 2^-11 (twice). Prefill: worst
// case 3 * 2^-9 / 3 * 2^-12 (fp16 subnormal p add < 1e-4), bound 2^-7 /
// 2^-10 (about 1.3x; random data stays far below the worst case). A wrong
// mask, block or scale (errors of order 0.1) cannot pass.
inline float decode_tolerance(DType dtype) { return dtype == DType::kBF16 ? 0x1p-8f : 0x1p-11f; }
inline float prefill_tolerance(DType dtype) { return dtype == DType::kBF16 ? 0x1p-7f : 0x1p-10f; }

// Every prefill kernel, each checked against the same reference.
inline constexpr PrefillVariant kPrefillVariants[] = {PrefillVariant::kMma, PrefillVariant::kWmma};
inline std::string variant_name(PrefillVariant v) {
  return v == PrefillVariant::kMma ? "mma" : "wmma";
}

// Compares the device output (bits) with the reference, reporting the first
// few mismatches. NaN anywhere fails (stray reads hit NaN-filled slots).
inline void expect_close(DType dtype, const std::vector<uint16_t>& got_bits,
                         const std::vector<float>& expected, float tol, const std::string& what) {
  ASSERT_EQ(got_bits.size(), expected.size());
  int64_t num_bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const float got = from_bits(got_bits[i], dtype);
    if (!(std::fabs(got - expected[i]) <= tol)) {
      if (num_bad < 5) {
        ADD_FAILURE() << what << ": element " << i << " got " << got << " expected " << expected[i]
                      << " (tolerance " << tol << ")";
      }
      ++num_bad;
    }
  }
  EXPECT_EQ(num_bad, 0) << what << ": " << num_bad << " of " << expected.size() << " elements off";
}

// A paged pool and block tables for a batch: every sequence gets its own
// blocks in shuffled order, except that the first `num_shared_blocks` block
// ids of sequences 0 and 1 are the same (a prefix-cache hit). Spare blocks
// nobody owns are left in the pool.
struct PagedLayout {
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq]

  int64_t slot(int32_t seq, int32_t pos) const {
    return static_cast<int64_t>(block_tables[seq * max_blocks_per_seq + pos / block_size]) *
               block_size +
           pos % block_size;
  }
};

inline PagedLayout make_layout(const std::vector<int32_t>& context_lens, int32_t block_size,
                               int32_t num_shared_blocks, std::mt19937& rng) {
  PagedLayout layout;
  layout.block_size = block_size;
  int32_t max_blocks = 1;
  int32_t total = 0;
  for (int32_t len : context_lens) {
    const int32_t n = (len + block_size - 1) / block_size;
    max_blocks = std::max(max_blocks, n);
    total += n;
  }
  layout.max_blocks_per_seq = max_blocks;
  layout.num_blocks = total + 3;  // spares, NaN-filled
  std::vector<int32_t> ids(layout.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  layout.block_tables.assign(context_lens.size() * max_blocks, 0);
  size_t next = 0;
  for (size_t s = 0; s < context_lens.size(); ++s) {
    const int32_t n = (context_lens[s] + block_size - 1) / block_size;
    for (int32_t b = 0; b < n; ++b) {
      const bool shared = s == 1 && b < num_shared_blocks;
      layout.block_tables[s * max_blocks + b] = shared ? layout.block_tables[b] : ids[next++];
    }
  }
  return layout;
}

// One layer's K and V pools, [num_blocks, num_kv_heads, block_size, head_dim],
// random where `filled` says so and NaN elsewhere.
struct HostCache {
  RoundedValues k;
  RoundedValues v;
};

inline HostCache make_cache(DType dtype, const PagedLayout& layout, int32_t head_dim,
                            const std::set<int64_t>& filled_slots, std::mt19937& rng) {
  const size_t n =
      static_cast<size_t>(layout.num_blocks) * kNumKvHeads * layout.block_size * head_dim;
  HostCache cache{random_rounded(dtype, n, -1.0f, 1.0f, rng),
                  random_rounded(dtype, n, -1.0f, 1.0f, rng)};
  for (int64_t slot = 0; slot < static_cast<int64_t>(layout.num_blocks) * layout.block_size;
       ++slot) {
    if (filled_slots.count(slot) != 0) continue;
    const int64_t block = slot / layout.block_size;
    const int64_t offset = slot % layout.block_size;
    for (int32_t h = 0; h < kNumKvHeads; ++h) {
      const int64_t base = ((block * kNumKvHeads + h) * layout.block_size + offset) * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) {
        for (RoundedValues* pool : {&cache.k, &cache.v}) {
          pool->bits[base + d] = cuda_test::nan_bits(dtype);
          pool->values[base + d] = NAN;
        }
      }
    }
  }
  return cache;
}

// A batch's paged cache on the device, as one layer's PagedKv sees it.
struct DeviceCache {
  DeviceBuffer k;             // [num_blocks, kNumKvHeads, block_size, head_dim]
  DeviceBuffer v;             // [num_blocks, kNumKvHeads, block_size, head_dim]
  DeviceBuffer block_tables;  // [num_seqs, max_blocks_per_seq]
  DeviceBuffer context_lens;  // [num_seqs]
  PagedKv paged_kv;
};

// Uploads `cache`, the layout's block tables and `context_lens` into `dev`
// and points dev->paged_kv at them.
inline ::testing::AssertionResult upload_cache(const HostCache& cache, const PagedLayout& layout,
                                               const std::vector<int32_t>& context_lens,
                                               int32_t head_dim, DeviceCache* dev) {
  ::testing::AssertionResult r = upload(dev->k, cache.k.bits);
  if (r) r = upload(dev->v, cache.v.bits);
  if (r) r = upload(dev->block_tables, layout.block_tables);
  if (r) r = upload(dev->context_lens, context_lens);
  if (!r) return r;
  dev->paged_kv.k_cache = dev->k.get();
  dev->paged_kv.v_cache = dev->v.get();
  dev->paged_kv.block_tables = dev->block_tables.as<int32_t>();
  dev->paged_kv.max_blocks_per_seq = layout.max_blocks_per_seq;
  dev->paged_kv.block_size = layout.block_size;
  dev->paged_kv.num_kv_heads = kNumKvHeads;
  dev->paged_kv.head_dim = head_dim;
  return ::testing::AssertionSuccess();
}

// Decode attention over `dev` for one q row per sequence into `out`; the
// caller sets the split override, stride, window and workspace.
inline DecodeAttentionParams decode_params(const DeviceCache& dev, const void* q, void* out,
                                           DType dtype, int32_t num_seqs, int32_t num_heads,
                                           int32_t max_context_len, float scale) {
  DecodeAttentionParams p;
  p.q = q;
  p.out = out;
  p.paged_kv = dev.paged_kv;
  p.context_lens = dev.context_lens.as<int32_t>();
  p.dtype = dtype;
  p.num_seqs = num_seqs;
  p.num_heads = num_heads;
  p.max_context_len = max_context_len;
  p.scale = scale;
  return p;
}

// Prefill attention over `dev` for the chunks `query_start` (device,
// [num_seqs + 1]) describes, with the plan `items` (device, num_items
// pairs); the caller sets the stride and window.
inline PrefillAttentionParams prefill_params(const DeviceCache& dev, const void* q, void* out,
                                             const DeviceBuffer& query_start,
                                             const DeviceBuffer& items, int32_t num_items,
                                             DType dtype, int32_t num_seqs, int32_t num_heads,
                                             float scale) {
  PrefillAttentionParams p;
  p.q = q;
  p.out = out;
  p.paged_kv = dev.paged_kv;
  p.query_start = query_start.as<int32_t>();
  p.context_lens = dev.context_lens.as<int32_t>();
  p.work_items = items.as<int32_t>();
  p.dtype = dtype;
  p.num_work_items = num_items;
  p.num_seqs = num_seqs;
  p.num_heads = num_heads;
  p.scale = scale;
  return p;
}

// Rows of `row` elements laid `stride` apart, as a view into a fused QKV
// GEMM output; the gaps hold NaN, so a kernel that reads them cannot pass.
inline std::vector<uint16_t> widen_rows(const std::vector<uint16_t>& bits, size_t row,
                                        size_t stride) {
  const size_t num_rows = bits.size() / row;
  std::vector<uint16_t> wide(num_rows * stride, 0x7FFF);  // NaN in fp16 and bf16
  for (size_t r = 0; r < num_rows; ++r) {
    std::copy_n(bits.begin() + r * row, row, wide.begin() + r * stride);
  }
  return wide;
}

// Dtype, head dim, block size, GQA group (query heads per kv head).
using KernelConfig = std::tuple<DType, int32_t, int32_t, int32_t>;

inline std::string config_name(const ::testing::TestParamInfo<KernelConfig>& info) {
  const auto [dtype, head_dim, block_size, group] = info.param;
  return std::string(dtype == DType::kBF16 ? "bf16" : "fp16") + "_d" + std::to_string(head_dim) +
         "_b" + std::to_string(block_size) + "_g" + std::to_string(group);
}

}  // namespace pvllm::cuda_test
