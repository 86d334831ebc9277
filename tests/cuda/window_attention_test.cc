// Sliding-window attention (Mistral) in the CUDA decode and prefill kernels
// against a naive CPU reference written here: a query at position p attends
// to the keys at positions max(0, p - W + 1) .. p. The block tables hold -1
// for every block wholly before the window of a sequence's first query row
// (the KV manager frees those blocks), and every slot before that window
// holds NaN: a kernel that reads a block-table entry or a key it must not
// cannot pass. Windows shorter than a block, equal to one, across block
// boundaries and longer than every context are run; the decode kernel on its
// single-pass and split-KV paths. Every test skips where no device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "kernels/cuda/common/device_buffer.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/prefill_attention.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/paged_cache_util.h"

namespace pvllm {
namespace {

using cuda_test::download;
using cuda_test::HostCache;
using cuda_test::KernelConfig;
using cuda_test::kNumKvHeads;
using cuda_test::PagedLayout;
using cuda_test::random_rounded;
using cuda_test::RoundedValues;
using cuda_test::upload;

// One sequence of a batch: `num_prior` tokens already in the cache, then
// `q_len` query rows (1 for decode) whose K/V are in the cache as well.
struct Chunk {
  int32_t num_prior;
  int32_t q_len;
};

// A batch as the kernels see it with a sliding window: positions before the
// window of each sequence's first query row are NaN in the pools and their
// whole blocks are -1 in the block tables.
struct WindowBatch {
  PagedLayout layout;
  HostCache cache;
  std::vector<int32_t> query_start{0};
  std::vector<int32_t> context_lens;
  RoundedValues q;  // [num_tokens, num_heads, head_dim]
  int32_t num_dropped_blocks = 0;
};

WindowBatch make_window_batch(DType dtype, int32_t head_dim, int32_t block_size, int32_t num_heads,
                              int32_t window, const std::vector<Chunk>& chunks, std::mt19937& rng) {
  WindowBatch b;
  for (const Chunk& c : chunks) {
    b.context_lens.push_back(c.num_prior + c.q_len);
    b.query_start.push_back(b.query_start.back() + c.q_len);
  }
  b.layout = cuda_test::make_layout(b.context_lens, block_size, 0, rng);
  std::set<int64_t> filled;
  for (size_t s = 0; s < chunks.size(); ++s) {
    const int32_t start = std::max(0, chunks[s].num_prior - window + 1);
    for (int32_t pos = start; pos < b.context_lens[s]; ++pos) {
      filled.insert(b.layout.slot(static_cast<int32_t>(s), pos));
    }
    for (int32_t blk = 0; (blk + 1) * block_size <= start; ++blk) {
      b.layout.block_tables[s * b.layout.max_blocks_per_seq + blk] = -1;
      ++b.num_dropped_blocks;
    }
  }
  b.cache = cuda_test::make_cache(dtype, b.layout, head_dim, filled, rng);
  const size_t q_elems = static_cast<size_t>(b.query_start.back()) * num_heads * head_dim;
  b.q = random_rounded(dtype, q_elems, -2.0f, 2.0f, rng);
  return b;
}

// The naive reference: for every query row and head, softmax(scale * q.k)
// over the window's keys, then the weighted sum of their V rows, in double.
std::vector<float> window_reference(const WindowBatch& b, int32_t num_heads, int32_t head_dim,
                                    float scale, int32_t window) {
  const PagedLayout& l = b.layout;
  const int32_t group = num_heads / kNumKvHeads;
  std::vector<float> out(b.q.values.size(), 0.0f);
  for (size_t s = 0; s + 1 < b.query_start.size(); ++s) {
    const int32_t q_len = b.query_start[s + 1] - b.query_start[s];
    for (int32_t j = 0; j < q_len; ++j) {
      const int32_t pos = b.context_lens[s] - q_len + j;
      const int32_t lo = std::max(0, pos - window + 1);
      const size_t token = static_cast<size_t>(b.query_start[s]) + j;
      for (int32_t h = 0; h < num_heads; ++h) {
        const float* qh = b.q.values.data() + (token * num_heads + h) * head_dim;
        std::vector<size_t> rows;  // element offset of each key's row
        std::vector<double> w;
        double max_score = -INFINITY;
        for (int32_t key = lo; key <= pos; ++key) {
          const int64_t blk = l.block_tables[s * l.max_blocks_per_seq + key / l.block_size];
          EXPECT_GE(blk, 0) << "the test dropped a block inside the window";
          rows.push_back(static_cast<size_t>(
              ((blk * kNumKvHeads + h / group) * l.block_size + key % l.block_size) * head_dim));
          double dot = 0.0;
          for (int32_t d = 0; d < head_dim; ++d)
            dot += double{qh[d]} * b.cache.k.values[rows.back() + d];
          w.push_back(dot * scale);
          max_score = std::max(max_score, w.back());
        }
        double sum = 0.0;
        for (double& x : w) sum += (x = std::exp(x - max_score));
        for (int32_t d = 0; d < head_dim; ++d) {
          double acc = 0.0;
          for (size_t i = 0; i < rows.size(); ++i) acc += w[i] * b.cache.v.values[rows[i] + d];
          out[(token * num_heads + h) * head_dim + d] = static_cast<float>(acc / sum);
        }
      }
    }
  }
  return out;
}

class WindowAttentionTest : public ::testing::TestWithParam<KernelConfig> {
 protected:
  int32_t num_heads() const { return kNumKvHeads * std::get<3>(GetParam()); }
  int32_t block_size() const { return std::get<2>(GetParam()); }

  // Decode: one query row per sequence at position context_len - 1, once
  // per split override.
  void check_decode(const std::vector<int32_t>& context_lens, int32_t window,
                    const std::vector<int32_t>& overrides) {
    const auto [dtype, head_dim, bs, group] = GetParam();
    std::mt19937 rng(5 + head_dim + bs + group + window);
    std::vector<Chunk> chunks;
    for (int32_t len : context_lens) chunks.push_back({len - 1, 1});
    const WindowBatch b = make_window_batch(dtype, head_dim, bs, num_heads(), window, chunks, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const std::vector<float> expected = window_reference(b, num_heads(), head_dim, scale, window);

    cuda_test::DeviceCache dev;
    ASSERT_TRUE(cuda_test::upload_cache(b.cache, b.layout, b.context_lens, head_dim, &dev));
    DeviceBuffer d_q, d_out;
    ASSERT_TRUE(upload(d_q, b.q.bits));
    ASSERT_TRUE(cuda_test::allocate(d_out, b.q.bits.size() * 2));
    for (int32_t override_splits : overrides) {
      DecodeAttentionParams p = cuda_test::decode_params(
          dev, d_q.get(), d_out.get(), dtype, static_cast<int32_t>(context_lens.size()),
          num_heads(), *std::max_element(context_lens.begin(), context_lens.end()), scale);
      p.num_splits_override = override_splits;
      p.sliding_window = window;
      DeviceBuffer workspace;
      ASSERT_TRUE(cuda_test::allocate(workspace, pvllm_cuda_decode_attention_workspace_bytes(p)));
      p.workspace = workspace.get();
      PVLLM_CUDA_OK(cudaMemset(d_out.get(), 0x7F, b.q.bits.size() * 2));
      PVLLM_CUDA_OK(pvllm_cuda_decode_attention(p, nullptr));
      PVLLM_CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint16_t> got;
      ASSERT_TRUE(download(d_out, b.q.bits.size(), &got));
      cuda_test::expect_close(dtype, got, expected, cuda_test::decode_tolerance(dtype),
                              "decode, window " + std::to_string(window) + ", " +
                                  std::to_string(pvllm_cuda_decode_attention_num_splits(p)) +
                                  " splits");
    }
  }

  // Prefill: every chunk's rows over its paged context (its own K/V already
  // in the cache), with the plan made for the window.
  void check_prefill(const std::vector<Chunk>& chunks, int32_t window) {
    const auto [dtype, head_dim, bs, group] = GetParam();
    std::mt19937 rng(77 + head_dim + bs + group + window);
    const WindowBatch b = make_window_batch(dtype, head_dim, bs, num_heads(), window, chunks, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const std::vector<float> expected = window_reference(b, num_heads(), head_dim, scale, window);

    cuda_test::DeviceCache dev;
    ASSERT_TRUE(cuda_test::upload_cache(b.cache, b.layout, b.context_lens, head_dim, &dev));
    const int32_t num_seqs = static_cast<int32_t>(chunks.size());
    const std::vector<int32_t> items =
        plan_prefill_attention(b.query_start.data(), b.context_lens.data(), num_seqs, window);
    DeviceBuffer d_q, d_out, d_query_start, d_items;
    ASSERT_TRUE(upload(d_q, b.q.bits));
    ASSERT_TRUE(cuda_test::allocate(d_out, b.q.bits.size() * 2));
    ASSERT_TRUE(upload(d_query_start, b.query_start));
    ASSERT_TRUE(upload(d_items, items));
    PrefillAttentionParams p = cuda_test::prefill_params(
        dev, d_q.get(), d_out.get(), d_query_start, d_items, static_cast<int32_t>(items.size() / 2),
        dtype, num_seqs, num_heads(), scale);
    p.sliding_window = window;
    for (PrefillVariant variant : cuda_test::kPrefillVariants) {
      p.variant = variant;
      PVLLM_CUDA_OK(cudaMemset(d_out.get(), 0x7F, b.q.bits.size() * 2));
      PVLLM_CUDA_OK(pvllm_cuda_prefill_attention(p, nullptr));
      PVLLM_CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint16_t> got;
      ASSERT_TRUE(download(d_out, b.q.bits.size(), &got));
      cuda_test::expect_close(
          dtype, got, expected, cuda_test::prefill_tolerance(dtype),
          "prefill (" + cuda_test::variant_name(variant) + "), window " + std::to_string(window));
    }
  }
};

TEST_P(WindowAttentionTest, DecodeMatchesReferenceSplitAndUnsplit) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const int32_t bs = block_size();
  const std::vector<int32_t> lens = {3000, 1, 17, 3 * bs, 2 * bs + 5, 700};
  // Shorter than a block, one block, across block boundaries, and longer
  // than every context (the plain causal result); 1 = single pass, 5 =
  // split, 0 = automatic.
  for (int32_t window : {1, 7, bs, 2 * bs + 3, 4096}) check_decode(lens, window, {1, 5, 0});
}

TEST_P(WindowAttentionTest, PrefillMatchesReference) {
  PVLLM_CUDA_DEVICE_OR_SKIP();
  const int32_t bs = block_size();
  // Fresh prompts, chunks after prior context (some whose window starts
  // inside a block, some on a boundary), a one-row chunk deep in its
  // context, chunks spanning several 64-row query tiles.
  const std::vector<Chunk> chunks = {{0, 150}, {100, 77}, {300, 1}, {33, 130}, {3 * bs, 70}};
  for (int32_t window : {1, 5, bs, 64, 100, 4096}) check_prefill(chunks, window);
}

// Guards the tests above (runs without a device): their batches really
// hold -1 entries and NaN before the window, and the reference reads
// neither.
TEST(WindowAttentionSetup, BlocksBeforeTheWindowAreDropped) {
  std::mt19937 rng(3);
  const WindowBatch b =
      make_window_batch(DType::kBF16, 64, 16, 2 * kNumKvHeads, 7, {{2999, 1}, {100, 77}}, rng);
  EXPECT_EQ(b.num_dropped_blocks, 187 + 5);  // blocks before positions 2993 and 94
  const std::vector<float> ref = window_reference(b, 2 * kNumKvHeads, 64, 0.125f, 7);
  for (float v : ref) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(AllSupported, WindowAttentionTest,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(64, 128),
                                            ::testing::Values(16, 32, 256),
                                            ::testing::Values(1, 4)),
                         cuda_test::config_name);
// The generic kernel (head dims other than 64 and 128).
INSTANTIATE_TEST_SUITE_P(Generic, WindowAttentionTest,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(8, 96), ::testing::Values(8, 16),
                                            ::testing::Values(1, 4)),
                         cuda_test::config_name);

}  // namespace
}  // namespace pvllm
