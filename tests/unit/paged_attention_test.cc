// Paged attention and the K/V write against a plain contiguous reference.
#include "kernels/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu {
namespace {

struct SeqSpec {
  int32_t context_len;  // tokens in context after this step
  int32_t q_len;        // query rows this step (1 = decode)
};

// One batch: contiguous K/V per sequence (the reference's view) scattered
// into a paged cache through shuffled block tables (the kernel's view).
struct PagedBatch {
  int32_t num_heads, num_kv_heads, head_dim, block_size;
  std::vector<SeqSpec> seqs;
  int32_t num_blocks = 0;
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> query_start, context_lens, block_tables;
  std::vector<float> q;                  // [num_tokens, num_heads, head_dim]
  std::vector<std::vector<float>> k, v;  // per seq [context_len, num_kv_heads, head_dim]
  std::vector<float> k_cache, v_cache;   // [num_blocks, num_kv_heads, block_size, head_dim]

  int32_t num_tokens() const { return query_start.back(); }
};

PagedBatch make_batch(int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, int32_t block_size,
                      std::vector<SeqSpec> seqs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  PagedBatch b;
  b.num_heads = num_heads;
  b.num_kv_heads = num_kv_heads;
  b.head_dim = head_dim;
  b.block_size = block_size;
  b.seqs = std::move(seqs);
  b.query_start.push_back(0);
  int32_t total_blocks = 0;
  for (const SeqSpec& s : b.seqs) {
    b.query_start.push_back(b.query_start.back() + s.q_len);
    b.context_lens.push_back(s.context_len);
    const int32_t nb = (s.context_len + block_size - 1) / block_size;
    total_blocks += nb;
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, nb);
  }
  // Spare blocks filled with garbage so a wrong index reads wrong data.
  b.num_blocks = total_blocks + 3;
  std::vector<int32_t> ids(b.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);

  const int64_t block_floats = static_cast<int64_t>(num_kv_heads) * block_size * head_dim;
  b.k_cache.resize(b.num_blocks * block_floats);
  b.v_cache.resize(b.num_blocks * block_floats);
  for (float& x : b.k_cache) x = 100.0f * uni(rng);
  for (float& x : b.v_cache) x = 100.0f * uni(rng);

  b.block_tables.assign(b.seqs.size() * b.max_blocks_per_seq, -1);
  size_t next_id = 0;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int32_t ctx = b.seqs[s].context_len;
    int32_t* table = b.block_tables.data() + s * b.max_blocks_per_seq;
    for (int32_t i = 0; i < (ctx + block_size - 1) / block_size; ++i) table[i] = ids[next_id++];
    b.k.emplace_back(static_cast<size_t>(ctx) * num_kv_heads * head_dim);
    b.v.emplace_back(static_cast<size_t>(ctx) * num_kv_heads * head_dim);
    for (float& x : b.k.back()) x = uni(rng);
    for (float& x : b.v.back()) x = uni(rng);
    for (int32_t pos = 0; pos < ctx; ++pos) {
      for (int32_t h = 0; h < num_kv_heads; ++h) {
        for (int32_t d = 0; d < head_dim; ++d) {
          const int64_t src = (static_cast<int64_t>(pos) * num_kv_heads + h) * head_dim + d;
          const int64_t dst = table[pos / block_size] * block_floats +
                              (static_cast<int64_t>(h) * block_size + pos % block_size) * head_dim +
                              d;
          b.k_cache[dst] = b.k.back()[src];
          b.v_cache[dst] = b.v.back()[src];
        }
      }
    }
  }
  b.q.resize(static_cast<size_t>(b.num_tokens()) * num_heads * head_dim);
  for (float& x : b.q) x = uni(rng);
  return b;
}

// Naive causal softmax attention over the contiguous K/V, in double.
std::vector<double> reference_attention(const PagedBatch& b) {
  const int32_t group = b.num_heads / b.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(b.head_dim));
  std::vector<double> out(b.q.size(), 0.0);
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const SeqSpec& spec = b.seqs[s];
    for (int32_t j = 0; j < spec.q_len; ++j) {
      const int32_t row = b.query_start[s] + j;
      const int32_t pos = spec.context_len - spec.q_len + j;
      for (int32_t h = 0; h < b.num_heads; ++h) {
        const int32_t kvh = h / group;
        const float* q = b.q.data() + (static_cast<int64_t>(row) * b.num_heads + h) * b.head_dim;
        std::vector<double> w(pos + 1);
        double max_w = -INFINITY;
        for (int32_t t = 0; t <= pos; ++t) {
          const float* k =
              b.k[s].data() + (static_cast<int64_t>(t) * b.num_kv_heads + kvh) * b.head_dim;
          double acc = 0.0;
          for (int32_t d = 0; d < b.head_dim; ++d) acc += static_cast<double>(q[d]) * k[d];
          w[t] = acc * scale;
          max_w = std::max(max_w, w[t]);
        }
        double sum = 0.0;
        for (double& x : w) sum += (x = std::exp(x - max_w));
        double* o = out.data() + (static_cast<int64_t>(row) * b.num_heads + h) * b.head_dim;
        for (int32_t t = 0; t <= pos; ++t) {
          const float* v =
              b.v[s].data() + (static_cast<int64_t>(t) * b.num_kv_heads + kvh) * b.head_dim;
          for (int32_t d = 0; d < b.head_dim; ++d) o[d] += w[t] / sum * v[d];
        }
      }
    }
  }
  return out;
}

std::vector<float> run_paged(const PagedBatch& b, ThreadPool* pool) {
  std::vector<float> out(b.q.size(), NAN);
  PagedAttentionParams p;
  p.q = b.q.data();
  p.out = out.data();
  p.k_cache = b.k_cache.data();
  p.v_cache = b.v_cache.data();
  p.query_start = b.query_start.data();
  p.context_lens = b.context_lens.data();
  p.block_tables = b.block_tables.data();
  p.num_tokens = b.num_tokens();
  p.num_seqs = static_cast<int32_t>(b.seqs.size());
  p.num_heads = b.num_heads;
  p.num_kv_heads = b.num_kv_heads;
  p.head_dim = b.head_dim;
  p.block_size = b.block_size;
  p.max_blocks_per_seq = b.max_blocks_per_seq;
  p.scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  paged_attention(p, pool);
  return out;
}

// (block_size, head_dim, num_heads / num_kv_heads)
class PagedAttentionTest : public ::testing::TestWithParam<std::tuple<int32_t, int32_t, int32_t>> {
};

TEST_P(PagedAttentionTest, MatchesContiguousReference) {
  const auto [block_size, head_dim, ratio] = GetParam();
  const int32_t num_kv_heads = 2;
  // Decodes at the first position, at a block boundary and past one; a
  // whole prompt; and a prefill chunk continuing prior context across a
  // block boundary.
  const std::vector<SeqSpec> seqs = {
      {1, 1},
      {2 * block_size + 3, 1},
      {2 * block_size, 1},
      {std::min(block_size, 16) + 5, std::min(block_size, 16) + 5},
      {block_size + 11, 13},
  };
  const PagedBatch b = make_batch(num_kv_heads * ratio, num_kv_heads, head_dim, block_size, seqs,
                                  1000u * block_size + 10u * head_dim + ratio);
  ThreadPool pool(2);
  const std::vector<float> got = run_paged(b, &pool);
  const std::vector<double> want = reference_attention(b);
  // Outputs are convex combinations of V entries in [-1, 1]. The fp32 kernel
  // differs from the double reference by rounding in the q.k dot products
  // (<= head_dim * 2^-24 relative, |q.k| * scale <~ 4), which moves the
  // softmax weights by ~1e-6 relative, plus the fp32 sums over <= ~600 keys;
  // observed errors stay below 5e-7. 1e-5 absolute leaves margin and catches
  // any wrong key, block, head or mask (those move outputs by ~0.1).
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Combine(::testing::Values(8, 16, 32, 256),
                                            ::testing::Values(8, 64, 128),
                                            ::testing::Values(1, 2, 4)));

TEST(PagedAttention, ResultDoesNotDependOnBatchOrThreads) {
  const std::vector<SeqSpec> seqs = {{37, 1}, {20, 20}, {50, 7}};
  const PagedBatch all = make_batch(4, 2, 64, 16, seqs, 7);
  ThreadPool one(1);
  ThreadPool three(3);
  const std::vector<float> a = run_paged(all, &one);
  const std::vector<float> b = run_paged(all, &three);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));

  // The last sequence alone (same K/V, same q rows) gives the same bits.
  PagedBatch last = all;
  last.seqs = {seqs[2]};
  last.context_lens = {seqs[2].context_len};
  last.query_start = {0, seqs[2].q_len};
  last.block_tables.assign(all.block_tables.begin() + 2 * all.max_blocks_per_seq,
                           all.block_tables.end());
  const int64_t row_floats = 4 * 64;
  last.q.assign(all.q.begin() + all.query_start[2] * row_floats, all.q.end());
  const std::vector<float> alone = run_paged(last, nullptr);
  EXPECT_EQ(0, std::memcmp(alone.data(), a.data() + all.query_start[2] * row_floats,
                           alone.size() * sizeof(float)));
}

// One 45-row prompt attended whole, in chunks of 7, and one row at a time
// (as decode steps would), with and without a sliding window, for each
// group size: every row gets the same bits however its rows are tiled.
TEST(PagedAttention, RowsDoNotDependOnChunking) {
  for (int32_t group : {1, 2, 3, 8}) {
    for (int32_t window : {0, 10}) {
      const int32_t len = 45, head_dim = 24;
      const PagedBatch b = make_batch(2 * group, 2, head_dim, 16, {{len, len}}, 90u + group);
      auto run_chunks = [&](int32_t chunk) {
        std::vector<int32_t> query_start = {0}, context_lens, tables;
        for (int32_t end = chunk; query_start.back() < len; end += chunk) {
          context_lens.push_back(std::min(end, len));
          query_start.push_back(context_lens.back());
          tables.insert(tables.end(), b.block_tables.begin(), b.block_tables.end());
        }
        std::vector<float> out(b.q.size(), NAN);
        PagedAttentionParams p;
        p.q = b.q.data();
        p.out = out.data();
        p.k_cache = b.k_cache.data();
        p.v_cache = b.v_cache.data();
        p.query_start = query_start.data();
        p.context_lens = context_lens.data();
        p.block_tables = tables.data();
        p.num_tokens = len;
        p.num_seqs = static_cast<int32_t>(context_lens.size());
        p.num_heads = b.num_heads;
        p.num_kv_heads = b.num_kv_heads;
        p.head_dim = head_dim;
        p.block_size = b.block_size;
        p.max_blocks_per_seq = b.max_blocks_per_seq;
        p.scale = 0.2f;
        p.sliding_window = window;
        ThreadPool pool(2);
        paged_attention(p, &pool);
        return out;
      };
      const std::vector<float> whole = run_chunks(len);
      for (int32_t chunk : {7, 1}) {
        const std::vector<float> chunked = run_chunks(chunk);
        ASSERT_EQ(0, std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)))
            << "group " << group << " window " << window << " chunk " << chunk;
      }
    }
  }
}

TEST(WriteKv, PlacesRowsAtTheirSlotsOnly) {
  const int32_t num_blocks = 5, block_size = 4, num_kv_heads = 3, head_dim = 8;
  const int64_t block_floats = num_kv_heads * block_size * head_dim;
  std::vector<float> k_cache(num_blocks * block_floats, -7.0f);
  std::vector<float> v_cache(num_blocks * block_floats, -7.0f);
  const std::vector<int64_t> slots = {17, 2, 8, 19};  // blocks 4, 0, 2, 4
  const int32_t n = static_cast<int32_t>(slots.size());
  std::vector<float> k(n * num_kv_heads * head_dim), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i);
    v[i] = 1000.0f + static_cast<float>(i);
  }
  WriteKvParams p;
  p.k = k.data();
  p.v = v.data();
  p.slot_mapping = slots.data();
  p.k_cache = k_cache.data();
  p.v_cache = v_cache.data();
  p.num_tokens = n;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.block_size = block_size;
  write_kv(p);

  std::vector<bool> written(k_cache.size(), false);
  for (int32_t t = 0; t < n; ++t) {
    const int64_t block = slots[t] / block_size, offset = slots[t] % block_size;
    for (int32_t h = 0; h < num_kv_heads; ++h) {
      for (int32_t d = 0; d < head_dim; ++d) {
        const int64_t at = block * block_floats + (h * block_size + offset) * head_dim + d;
        const int64_t src = (t * num_kv_heads + h) * head_dim + d;
        EXPECT_EQ(k_cache[at], k[src]);
        EXPECT_EQ(v_cache[at], v[src]);
        written[at] = true;
      }
    }
  }
  for (size_t i = 0; i < written.size(); ++i) {
    if (!written[i]) {
      ASSERT_EQ(k_cache[i], -7.0f) << i;
      ASSERT_EQ(v_cache[i], -7.0f) << i;
    }
  }
}

}  // namespace
}  // namespace pvllm::cpu
