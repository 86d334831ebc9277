// The K/V cache in f16, bf16 and int8 (kernels/cpu/kv_encode.h): what a row
// stores, and paged attention over such a cache against a double-precision
// reference over the values the cache holds, on every ISA variant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/base/tensor.h"
#include "core/kv/kv_cache_dtype.h"
#include "kernels/cpu/kv_encode.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/cpu_variants.h"

namespace pvllm::cpu {
namespace {

std::vector<float> random_row(int32_t n, float amplitude, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-amplitude, amplitude);
  std::vector<float> x(n);
  for (float& v : x) v = uni(rng);
  return x;
}

struct Encoded {
  std::vector<uint8_t> bytes;
  uint16_t scale = 0;
};

Encoded encode(KvCacheDtype dtype, const std::vector<float>& x) {
  Encoded e;
  e.bytes.resize(x.size() * 4);
  encode_kv_row(dtype, x.data(), static_cast<int32_t>(x.size()), e.bytes.data(), &e.scale);
  return e;
}

// The values f16 and bf16 can hold next to x: the stored one must be the
// nearest (ties to even), which the float's neighbours in that format show.
TEST(KvEncode, HalfFormatsRoundToNearest) {
  const std::vector<float> x = random_row(1000, 50.0f, 1);
  for (KvCacheDtype dtype : {KvCacheDtype::kF16, KvCacheDtype::kBF16}) {
    const Encoded e = encode(dtype, x);
    for (size_t i = 0; i < x.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, e.bytes.data() + 2 * i, 2);
      const float got = decode_kv_value(dtype, e.bytes.data(), static_cast<int32_t>(i), 0);
      const auto as_float = [dtype](uint16_t b) {
        return dtype == KvCacheDtype::kF16 ? fp16_to_float(b) : bf16_to_float(b);
      };
      // Neighbours one code up and down (same sign): neither is closer.
      const float up = as_float(static_cast<uint16_t>(bits + 1));
      const float down = as_float(static_cast<uint16_t>(bits - 1));
      ASSERT_LE(std::fabs(got - x[i]), std::fabs(up - x[i])) << kv_cache_dtype_name(dtype) << i;
      ASSERT_LE(std::fabs(got - x[i]), std::fabs(down - x[i])) << kv_cache_dtype_name(dtype) << i;
    }
  }
}

// int8: the scale is the fp16 nearest absmax / 127, the largest magnitude
// gets code +-127, and every value is within half a step of code * scale.
TEST(KvEncode, Int8RowsKeepEachValueWithinHalfAStep) {
  for (float amplitude : {1e-3f, 0.5f, 30.0f, 2000.0f}) {
    std::vector<float> x = random_row(64, amplitude, 2);
    x[17] = -1.5f * amplitude;  // the absmax, negative
    const Encoded e = encode(KvCacheDtype::kInt8, x);
    EXPECT_EQ(e.scale, float_to_fp16(1.5f * amplitude / 127.0f)) << amplitude;
    const float d = fp16_to_float(e.scale);
    EXPECT_EQ(static_cast<int8_t>(e.bytes[17]), -127) << amplitude;
    for (int32_t i = 0; i < 64; ++i) {
      const float got = decode_kv_value(KvCacheDtype::kInt8, e.bytes.data(), i, e.scale);
      // Half a step, and the clamp at 127 when the fp16 scale rounded down.
      const float bound = 0.5f * d + std::max(0.0f, 1.5f * amplitude - 127.0f * d);
      ASSERT_LE(std::fabs(got - x[i]), bound * (1.0f + 1e-6f)) << amplitude << " " << i;
    }
  }
}

TEST(KvEncode, Int8EdgeRowsStayFinite) {
  // Zeros: scale 0, codes 0, zeros back.
  const Encoded zeros = encode(KvCacheDtype::kInt8, std::vector<float>(16, 0.0f));
  EXPECT_EQ(zeros.scale, 0);
  for (int32_t i = 0; i < 16; ++i) {
    EXPECT_EQ(decode_kv_value(KvCacheDtype::kInt8, zeros.bytes.data(), i, zeros.scale), 0.0f);
  }
  // Past fp16's range: the scale saturates at 65504 and the values at
  // +-127 * 65504, finite.
  std::vector<float> huge(16, 1e9f);
  huge[3] = -std::numeric_limits<float>::infinity();
  huge[5] = std::numeric_limits<float>::quiet_NaN();
  const Encoded h = encode(KvCacheDtype::kInt8, huge);
  EXPECT_EQ(fp16_to_float(h.scale), 65504.0f);
  EXPECT_EQ(decode_kv_value(KvCacheDtype::kInt8, h.bytes.data(), 0, h.scale), 127.0f * 65504.0f);
  EXPECT_EQ(decode_kv_value(KvCacheDtype::kInt8, h.bytes.data(), 3, h.scale), -127.0f * 65504.0f);
  EXPECT_EQ(decode_kv_value(KvCacheDtype::kInt8, h.bytes.data(), 5, h.scale), 0.0f);
}

// Every variant's write_kv stores the bytes of the scalar encoders, edge
// values included (ties, subnormals, infinities, NaN, -0), for head dims
// with and without a tail past the last eight lanes.
TEST(KvEncode, EveryVariantWritesTheScalarEncodersBytes) {
  for (int32_t head_dim : {8, 20, 64}) {
    const int32_t num_kv_heads = 2, block_size = 8, tokens = 5;
    std::vector<float> k = random_row(tokens * num_kv_heads * head_dim, 3.0f, head_dim);
    std::vector<float> v = random_row(tokens * num_kv_heads * head_dim, 1e-6f, head_dim + 1);
    const float edge[] = {0.5f,
                          -0.0f,
                          1.0f + 0x1p-11f,  // an f16 tie
                          1.0f + 0x1p-8f,   // a bf16 tie
                          0x1p-20f,         // f16 subnormal
                          6e-8f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          65519.0f,
                          3e38f};
    for (size_t i = 0; i < std::size(edge); ++i) k[(i * 7) % k.size()] = edge[i];
    k[head_dim + 3] = 127.5f;  // a row whose codes tie
    const std::vector<int64_t> slots = {9, 0, 15, 3, 8};
    for (KvCacheDtype dtype :
         {KvCacheDtype::kF32, KvCacheDtype::kF16, KvCacheDtype::kBF16, KvCacheDtype::kInt8}) {
      const size_t head_bytes = kv_head_block_bytes(dtype, block_size, head_dim);
      const size_t pool = 2 * num_kv_heads * head_bytes;
      // The reference: encode_kv_row into each slot by the layout.
      std::vector<uint8_t> want_k(pool, 0xab), want_v(pool, 0xab);
      const size_t elem = dtype == KvCacheDtype::kInt8 ? 1 : (dtype == KvCacheDtype::kF32 ? 4 : 2);
      for (int32_t t = 0; t < tokens; ++t) {
        for (int32_t h = 0; h < num_kv_heads; ++h) {
          const size_t head = (slots[t] / block_size * num_kv_heads + h) * head_bytes;
          const size_t row = slots[t] % block_size;
          const size_t scale = head + size_t{block_size} * head_dim + 2 * row;
          const size_t src = (t * num_kv_heads + h) * head_dim;
          uint16_t sk = 0, sv = 0;
          encode_kv_row(dtype, &k[src], head_dim, &want_k[head + row * head_dim * elem], &sk);
          encode_kv_row(dtype, &v[src], head_dim, &want_v[head + row * head_dim * elem], &sv);
          if (dtype == KvCacheDtype::kInt8) {
            std::memcpy(&want_k[scale], &sk, 2);
            std::memcpy(&want_v[scale], &sv, 2);
          }
        }
      }
      for (const testing::Variant& var : testing::variants()) {
        if (!var.runs_here) continue;
        std::vector<uint8_t> got_k(pool, 0xab), got_v(pool, 0xab);
        WriteKvParams w;
        w.k = k.data();
        w.v = v.data();
        w.slot_mapping = slots.data();
        w.k_cache = got_k.data();
        w.v_cache = got_v.data();
        w.kv_dtype = dtype;
        w.num_tokens = tokens;
        w.num_kv_heads = num_kv_heads;
        w.head_dim = head_dim;
        w.block_size = block_size;
        var.table->write_kv(w);
        EXPECT_EQ(got_k, want_k) << var.name << " " << kv_cache_dtype_name(dtype) << " K, head_dim "
                                 << head_dim;
        EXPECT_EQ(got_v, want_v) << var.name << " " << kv_cache_dtype_name(dtype) << " V, head_dim "
                                 << head_dim;
      }
    }
  }
}

struct SeqSpec {
  int32_t context_len;
  int32_t q_len;
};

// A batch whose K/V rows are written through write_kv into a cache of
// `dtype` at shuffled slots; `k`/`v` keep the values the cache holds
// (decoded), per sequence [context_len, num_kv_heads, head_dim].
struct TypedBatch {
  KvCacheDtype dtype;
  int32_t num_heads, num_kv_heads, head_dim, block_size, num_blocks, max_blocks_per_seq = 0;
  std::vector<SeqSpec> seqs;
  std::vector<int32_t> query_start{0}, context_lens, block_tables;
  std::vector<float> q;
  std::vector<std::vector<double>> k, v;
  std::vector<uint8_t> k_cache, v_cache;
};

TypedBatch make_typed_batch(KvCacheDtype dtype, int32_t num_heads, int32_t num_kv_heads,
                            int32_t head_dim, int32_t block_size, std::vector<SeqSpec> seqs,
                            uint32_t seed, const KernelTable* table) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  TypedBatch b;
  b.dtype = dtype;
  b.num_heads = num_heads;
  b.num_kv_heads = num_kv_heads;
  b.head_dim = head_dim;
  b.block_size = block_size;
  b.num_blocks = 0;
  b.seqs = std::move(seqs);
  int32_t total = 0;
  for (const SeqSpec& s : b.seqs) {
    b.query_start.push_back(b.query_start.back() + s.q_len);
    b.context_lens.push_back(s.context_len);
    const int32_t nb = (s.context_len + block_size - 1) / block_size;
    total += nb;
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, nb);
  }
  b.num_blocks = total + 3;
  std::vector<int32_t> ids(b.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const size_t head_bytes = kv_head_block_bytes(dtype, block_size, head_dim);
  const size_t block_bytes = head_bytes * num_kv_heads;
  // Garbage everywhere first: a wrong block, head or row reads nonsense.
  b.k_cache.resize(b.num_blocks * block_bytes);
  b.v_cache.resize(b.num_blocks * block_bytes);
  // (From a generator of its own, so that the values below do not depend
  // on the cache's size.)
  std::mt19937 garbage(seed + 1);
  for (uint8_t& x : b.k_cache) x = static_cast<uint8_t>(garbage() & 0x3f);
  for (uint8_t& x : b.v_cache) x = static_cast<uint8_t>(garbage() & 0x3f);
  b.block_tables.assign(b.seqs.size() * b.max_blocks_per_seq, -1);
  size_t next = 0;
  const int64_t row = int64_t{num_kv_heads} * head_dim;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int32_t ctx = b.seqs[s].context_len;
    int32_t* t = b.block_tables.data() + s * b.max_blocks_per_seq;
    for (int32_t i = 0; i < (ctx + block_size - 1) / block_size; ++i) t[i] = ids[next++];
    std::vector<float> k(ctx * row), v(ctx * row);
    for (float& x : k) x = 3.0f * uni(rng);
    for (float& x : v) x = uni(rng);
    std::vector<int64_t> slots(ctx);
    for (int32_t p = 0; p < ctx; ++p)
      slots[p] = int64_t{t[p / block_size]} * block_size + p % block_size;
    WriteKvParams w;
    w.k = k.data();
    w.v = v.data();
    w.slot_mapping = slots.data();
    w.k_cache = b.k_cache.data();
    w.v_cache = b.v_cache.data();
    w.kv_dtype = dtype;
    w.num_tokens = ctx;
    w.num_kv_heads = num_kv_heads;
    w.head_dim = head_dim;
    w.block_size = block_size;
    table->write_kv(w);
    // What the cache holds, read back through the layout by hand.
    std::vector<double> kd(ctx * row), vd(ctx * row);
    const size_t elem = dtype == KvCacheDtype::kInt8 ? 1 : (dtype == KvCacheDtype::kF32 ? 4 : 2);
    for (int32_t p = 0; p < ctx; ++p) {
      for (int32_t h = 0; h < num_kv_heads; ++h) {
        const size_t head = t[p / block_size] * block_bytes + h * head_bytes;
        const size_t in_block = p % block_size;
        uint16_t ks = 0, vs = 0;
        if (dtype == KvCacheDtype::kInt8) {
          const size_t at =
              head + size_t{static_cast<size_t>(block_size)} * head_dim + 2 * in_block;
          std::memcpy(&ks, &b.k_cache[at], 2);
          std::memcpy(&vs, &b.v_cache[at], 2);
        }
        const size_t r = head + in_block * head_dim * elem;
        for (int32_t d = 0; d < head_dim; ++d) {
          kd[p * row + h * head_dim + d] = decode_kv_value(dtype, &b.k_cache[r], d, ks);
          vd[p * row + h * head_dim + d] = decode_kv_value(dtype, &b.v_cache[r], d, vs);
        }
      }
    }
    b.k.push_back(std::move(kd));
    b.v.push_back(std::move(vd));
  }
  b.q.resize(static_cast<size_t>(b.query_start.back()) * num_heads * head_dim);
  for (float& x : b.q) x = uni(rng);
  return b;
}

std::vector<double> reference(const TypedBatch& b) {
  const int32_t group = b.num_heads / b.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(b.head_dim));
  std::vector<double> out(b.q.size(), 0.0);
  const int64_t row = int64_t{b.num_kv_heads} * b.head_dim;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    for (int32_t j = 0; j < b.seqs[s].q_len; ++j) {
      const int32_t r = b.query_start[s] + j;
      const int32_t pos = b.seqs[s].context_len - b.seqs[s].q_len + j;
      for (int32_t h = 0; h < b.num_heads; ++h) {
        const int32_t kvh = h / group;
        const float* q = b.q.data() + (int64_t{r} * b.num_heads + h) * b.head_dim;
        std::vector<double> w(pos + 1);
        double m = -INFINITY, sum = 0.0;
        for (int32_t t = 0; t <= pos; ++t) {
          double acc = 0.0;
          for (int32_t d = 0; d < b.head_dim; ++d) {
            acc += q[d] * b.k[s][t * row + kvh * b.head_dim + d];
          }
          m = std::max(m, w[t] = acc * scale);
        }
        for (double& x : w) sum += (x = std::exp(x - m));
        double* o = out.data() + (int64_t{r} * b.num_heads + h) * b.head_dim;
        for (int32_t t = 0; t <= pos; ++t) {
          for (int32_t d = 0; d < b.head_dim; ++d) {
            o[d] += w[t] / sum * b.v[s][t * row + kvh * b.head_dim + d];
          }
        }
      }
    }
  }
  return out;
}

std::vector<float> run(const TypedBatch& b, const KernelTable* table, ThreadPool* pool) {
  std::vector<float> out(b.q.size(), NAN);
  PagedAttentionParams p;
  p.q = b.q.data();
  p.out = out.data();
  p.k_cache = b.k_cache.data();
  p.v_cache = b.v_cache.data();
  p.kv_dtype = b.dtype;
  p.query_start = b.query_start.data();
  p.context_lens = b.context_lens.data();
  p.block_tables = b.block_tables.data();
  p.num_tokens = b.query_start.back();
  p.num_seqs = static_cast<int32_t>(b.seqs.size());
  p.num_heads = b.num_heads;
  p.num_kv_heads = b.num_kv_heads;
  p.head_dim = b.head_dim;
  p.block_size = b.block_size;
  p.max_blocks_per_seq = b.max_blocks_per_seq;
  p.scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  table->paged_attention(p, pool);
  return out;
}

// Every dtype on every variant this CPU runs, head dims with and without a
// tail past the last eight lanes, GQA groups 1 and 4, decode and prefill
// rows: the kernel equals the reference over the stored values within fp32
// rounding, and every variant gives the same bits.
TEST(KvDtypePagedAttention, MatchesReferenceOverStoredValuesOnEveryVariant) {
  const std::vector<testing::Variant> all = testing::variants();
  ThreadPool pool(2);
  for (KvCacheDtype dtype :
       {KvCacheDtype::kF32, KvCacheDtype::kF16, KvCacheDtype::kBF16, KvCacheDtype::kInt8}) {
    for (int32_t head_dim : {8, 20, 64, 128}) {
      for (int32_t group : {1, 4}) {
        const std::vector<SeqSpec> seqs = {{1, 1}, {40, 1}, {35, 35}, {50, 9}};
        const uint32_t seed = 7u * head_dim + group;
        std::vector<float> first;
        for (const testing::Variant& v : all) {
          if (!v.runs_here) continue;
          const TypedBatch b =
              make_typed_batch(dtype, 2 * group, 2, head_dim, 16, seqs, seed, v.table);
          const std::vector<float> got = run(b, v.table, &pool);
          if (first.empty()) {
            const std::vector<double> want = reference(b);
            // As the fp32 test: outputs are convex combinations of values in
            // [-1, 1]; fp32 rounding of the dots and sums stays below ~1e-6.
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_NEAR(got[i], want[i], 1e-5)
                  << kv_cache_dtype_name(dtype) << " head_dim " << head_dim << " group " << group
                  << " element " << i;
            }
            first = got;
          } else {
            ASSERT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
                << v.name << " " << kv_cache_dtype_name(dtype) << " head_dim " << head_dim;
          }
        }
      }
    }
  }
}

// How far each dtype moves attention from the fp32 cache on the same K/V:
// a bound that catches a wrong scale or a dropped row (both move outputs by
// ~0.1) while allowing what rounding costs (f16 ~1e-3 relative, bf16 ~8e-3,
// int8 half a step of absmax / 127 per value).
TEST(KvDtypePagedAttention, StaysCloseToTheFp32Cache) {
  const std::vector<SeqSpec> seqs = {{60, 1}, {33, 33}};
  const KernelTable* table = testing::variants()[0].table;
  for (const auto& [dtype, bound] : std::vector<std::pair<KvCacheDtype, double>>{
           {KvCacheDtype::kF16, 2e-3}, {KvCacheDtype::kBF16, 2e-2}, {KvCacheDtype::kInt8, 2e-2}}) {
    const TypedBatch f32 = make_typed_batch(KvCacheDtype::kF32, 4, 2, 64, 16, seqs, 5, table);
    const TypedBatch low = make_typed_batch(dtype, 4, 2, 64, 16, seqs, 5, table);
    const std::vector<float> a = run(f32, table, nullptr);
    const std::vector<float> b = run(low, table, nullptr);
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
    EXPECT_LT(worst, bound) << kv_cache_dtype_name(dtype);
    EXPECT_GT(worst, 0.0) << kv_cache_dtype_name(dtype) << " stored the floats unrounded";
  }
}

// An int8 cache gives each row the same bits whatever the batch, thread
// count or chunking, as the fp32 one does.
TEST(KvDtypePagedAttention, Int8RowsDoNotDependOnChunkingOrThreads) {
  const KernelTable* table = testing::variants().back().runs_here ? testing::variants().back().table
                                                                  : testing::variants()[0].table;
  const int32_t len = 45;
  const TypedBatch b = make_typed_batch(KvCacheDtype::kInt8, 4, 2, 24, 16, {{len, len}}, 9, table);
  auto run_chunks = [&](int32_t chunk, ThreadPool* pool) {
    std::vector<int32_t> query_start = {0}, context_lens, tables;
    for (int32_t end = chunk; query_start.back() < len; end += chunk) {
      context_lens.push_back(std::min(end, len));
      query_start.push_back(context_lens.back());
      tables.insert(tables.end(), b.block_tables.begin(), b.block_tables.end());
    }
    TypedBatch c = b;
    c.seqs.assign(context_lens.size(), {0, 0});
    c.query_start = query_start;
    c.context_lens = context_lens;
    c.block_tables = tables;
    return run(c, table, pool);
  };
  ThreadPool three(3);
  const std::vector<float> whole = run_chunks(len, nullptr);
  for (int32_t chunk : {7, 1}) {
    const std::vector<float> got = run_chunks(chunk, &three);
    ASSERT_EQ(0, std::memcmp(whole.data(), got.data(), whole.size() * sizeof(float))) << chunk;
  }
}

}  // namespace
}  // namespace pvllm::cpu
