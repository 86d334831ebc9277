// The CPU backend's ops, thread pool and whole forward pass: against double
// references, and bit-for-bit invariance under batching, chunking and
// thread count (the engine's tests depend on it).
#include "kernels/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>
#include <vector>

#include "core/backend/registry.h"
#include "core/model/model.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/shared_paths.h"

namespace pvllm {
namespace {

using cpu::ThreadPool;

// ---------------------------------------------------------------- helpers

// Stores `values` as `dtype` in a buffer owned by `model` and returns a
// Tensor viewing it.
Tensor add_tensor(Model* model, const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? float_to_fp16(values[i]) : float_to_bf16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  model->owned_buffers.push_back(std::move(bytes));
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = model->owned_buffers.back().data();
  return t;
}

std::vector<float> random_values(std::mt19937* rng, size_t n, float mean, float stddev) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

// hidden 40 and intermediate 52 are not multiples of 16, so the dot
// products' 8-wide and tail steps run too.
ModelConfig tiny_config(RopeStyle style) {
  ModelConfig c;
  c.hidden_size = 40;
  c.intermediate_size = 52;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 64;
  c.max_position_embeddings = 128;
  c.rope_style = style;
  return c;
}

std::unique_ptr<Model> random_model(const ModelConfig& c, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  auto m = std::make_unique<Model>();
  m->config = c;
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t f = c.intermediate_size;
  auto mat = [&](const char* name, int64_t rows, int64_t cols) {
    return add_tensor(m.get(), name, dtype, {rows, cols},
                      random_values(&rng, rows * cols, 0.0f, 1.0f / std::sqrt(float(cols))));
  };
  auto norm = [&](const char* name) {
    return add_tensor(m.get(), name, dtype, {h}, random_values(&rng, h, 1.0f, 0.1f));
  };
  m->weights.embed = mat("embed", c.vocab_size, h);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    LayerWeights lw;
    lw.attn_norm = norm("attn_norm");
    lw.wq = mat("wq", q, h);
    lw.wk = mat("wk", kv, h);
    lw.wv = mat("wv", kv, h);
    lw.wo = mat("wo", h, q);
    lw.ffn_norm = norm("ffn_norm");
    lw.w_gate = mat("w_gate", f, h);
    lw.w_up = mat("w_up", f, h);
    lw.w_down = mat("w_down", h, f);
    m->weights.layers.push_back(lw);
  }
  m->weights.final_norm = norm("final_norm");
  m->weights.lm_head = mat("lm_head", c.vocab_size, h);
  return m;
}

std::unique_ptr<Backend> make_backend(const Model& model, int32_t num_blocks, int32_t block_size,
                                      int32_t num_threads = 2) {
  BackendOptions o;
  o.num_blocks = num_blocks;
  o.block_size = block_size;
  o.num_threads = num_threads;
  std::unique_ptr<Backend> b;
  const Status s = create_cpu_backend(model, o, &b);
  EXPECT_TRUE(s.ok()) << s.message();
  return b;
}

// A sequence as the engine would track it: its blocks and how many of its
// tokens already have K/V in the cache.
struct TestSeq {
  std::vector<int32_t> blocks;
  int32_t num_computed = 0;
};

// Builds the metadata for one step that feeds each (seq, chunk) pair, taking
// new blocks from *next_block as needed; every row returns logits.
BatchMetadata make_step(std::vector<std::pair<TestSeq*, std::vector<int32_t>>> chunks,
                        int32_t block_size, int32_t* next_block) {
  BatchMetadata md;
  md.num_seqs = static_cast<int32_t>(chunks.size());
  md.query_start.push_back(0);
  for (auto& [seq, tokens] : chunks) {
    const int32_t ctx = seq->num_computed + static_cast<int32_t>(tokens.size());
    while (static_cast<int32_t>(seq->blocks.size()) * block_size < ctx) {
      seq->blocks.push_back((*next_block)++);
    }
    for (size_t j = 0; j < tokens.size(); ++j) {
      const int32_t pos = seq->num_computed + static_cast<int32_t>(j);
      md.logits_rows.push_back(md.num_tokens++);
      md.input_ids.push_back(tokens[j]);
      md.positions.push_back(pos);
      md.slot_mapping.push_back(int64_t{seq->blocks[pos / block_size]} * block_size +
                                pos % block_size);
    }
    md.query_start.push_back(md.num_tokens);
    md.context_lens.push_back(ctx);
    md.max_blocks_per_seq = std::max(md.max_blocks_per_seq, int32_t(seq->blocks.size()));
    seq->num_computed = ctx;
  }
  md.block_tables.assign(size_t(md.num_seqs) * md.max_blocks_per_seq, -1);
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    std::copy(chunks[s].first->blocks.begin(), chunks[s].first->blocks.end(),
              md.block_tables.begin() + size_t(s) * md.max_blocks_per_seq);
  }
  return md;
}

std::vector<float> run(Backend* b, const BatchMetadata& md, int32_t vocab) {
  std::vector<float> logits(md.logits_rows.size() * vocab, NAN);
  const Status s = b->forward(md, logits.data());
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

bool bits_equal(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Naive double-precision Llama forward over one sequence at positions
// 0..n-1; returns logits [n, vocab].
std::vector<double> reference_forward(const Model& m, const std::vector<int32_t>& ids) {
  const ModelConfig& c = m.config;
  const int64_t n = ids.size(), h = c.hidden_size, hd = c.head_dim, f = c.intermediate_size;
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads;
  const std::vector<float> inv_freq = rope_inv_freq(c);
  auto w = [](const Tensor& t, int64_t i) { return double(load_as_float(t.dtype, t.data, i)); };
  auto linear = [&](const std::vector<double>& x, const Tensor& t, int64_t in, int64_t out) {
    std::vector<double> y(n * out, 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) y[r * out + o] += x[r * in + i] * w(t, o * in + i);
    return y;
  };
  auto rmsnorm = [&](const std::vector<double>& x, const Tensor& g) {
    std::vector<double> y(x.size());
    for (int64_t r = 0; r < int64_t(x.size() / h); ++r) {
      double ss = 0;
      for (int64_t i = 0; i < h; ++i) ss += x[r * h + i] * x[r * h + i];
      const double inv = 1.0 / std::sqrt(ss / h + c.rms_norm_eps);
      for (int64_t i = 0; i < h; ++i) y[r * h + i] = x[r * h + i] * inv * w(g, i);
    }
    return y;
  };
  auto rope = [&](std::vector<double>* x, int64_t heads) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t hh = 0; hh < heads; ++hh)
        for (int64_t j = 0; j < hd / 2; ++j) {
          double* head = x->data() + (r * heads + hh) * hd;
          const int64_t i0 = c.rope_style == RopeStyle::kInterleaved ? 2 * j : j;
          const int64_t i1 = c.rope_style == RopeStyle::kInterleaved ? 2 * j + 1 : j + hd / 2;
          const double a = double(r) * inv_freq[j], x0 = head[i0], x1 = head[i1];
          head[i0] = x0 * std::cos(a) - x1 * std::sin(a);
          head[i1] = x0 * std::sin(a) + x1 * std::cos(a);
        }
  };
  std::vector<double> x(n * h);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < h; ++i) x[r * h + i] = w(m.weights.embed, ids[r] * h + i);
  for (const LayerWeights& lw : m.weights.layers) {
    std::vector<double> xn = rmsnorm(x, lw.attn_norm);
    std::vector<double> q = linear(xn, lw.wq, h, nh * hd);
    std::vector<double> k = linear(xn, lw.wk, h, nkv * hd);
    std::vector<double> v = linear(xn, lw.wv, h, nkv * hd);
    rope(&q, nh);
    rope(&k, nkv);
    std::vector<double> att(n * nh * hd, 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t hh = 0; hh < nh; ++hh) {
        const int64_t kvh = hh / (nh / nkv);
        std::vector<double> s(r + 1);
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t <= r; ++t) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i)
            d += q[(r * nh + hh) * hd + i] * k[(t * nkv + kvh) * hd + i];
          s[t] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[t]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t t = 0; t <= r; ++t)
          for (int64_t i = 0; i < hd; ++i)
            att[(r * nh + hh) * hd + i] += s[t] / sum * v[(t * nkv + kvh) * hd + i];
      }
    std::vector<double> o = linear(att, lw.wo, nh * hd, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    xn = rmsnorm(x, lw.ffn_norm);
    std::vector<double> g = linear(xn, lw.w_gate, h, f);
    const std::vector<double> u = linear(xn, lw.w_up, h, f);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    o = linear(g, lw.w_down, f, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }
  return linear(rmsnorm(x, m.weights.final_norm), m.weights.lm_head, h, c.vocab_size);
}

// ---------------------------------------------------------------- thread pool

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int32_t threads : {1, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 5, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallel_for(8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.parallel_for(10, [&](int64_t b, int64_t e) { total += e - b; });
    }
  });
  EXPECT_EQ(total.load(), 80);
}

// ---------------------------------------------------------------- ops

class MatmulTest : public ::testing::TestWithParam<DType> {};

cpu::PackedMatrix packed(const Tensor& w) {
  cpu::PackedMatrix m;
  const Status s = cpu::PackedMatrix::pack(w, nullptr, &m);
  EXPECT_TRUE(s.ok()) << s.message();
  return m;
}

// The GEMM's contract (gemm.cc): every output is one fused multiply-add
// chain over the inputs in order, from zero.
float fma_chain(const float* x, const Tensor& w, int64_t row, int64_t in) {
  float acc = 0.0f;
  for (int64_t i = 0; i < in; ++i)
    acc = std::fma(x[i], load_as_float(w.dtype, w.data, row * in + i), acc);
  return acc;
}

TEST_P(MatmulTest, MatchesDoubleReference) {
  const DType dtype = GetParam();
  const int64_t in = 77, out = 37, n = 6;
  std::mt19937 rng(3);
  Model holder;
  const Tensor w =
      add_tensor(&holder, "w", dtype, {out, in}, random_values(&rng, out * in, 0.0f, 1.0f));
  const std::vector<float> x = random_values(&rng, n * in, 0.0f, 1.0f);
  std::vector<float> y(n * out);
  ThreadPool pool(2);
  cpu::matmul(&pool, x.data(), n, packed(w), y.data());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double want = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < in; ++i) {
        const double p = double(x[r * in + i]) * load_as_float(dtype, w.data, o * in + i);
        want += p;
        magnitude += std::fabs(p);
      }
      // fp32 accumulation of 77 products: error <= ~in * 2^-24 * sum|x w|
      // (4.6e-6 relative to that sum); the weights are compared as stored,
      // so f16/bf16 conversion must be exact to pass.
      EXPECT_NEAR(y[r * out + o], want, 1e-5 * magnitude) << "row " << r << " out " << o;
    }
  }
}

// Every batch size from 1 to 14 (the small-batch tiles, whole tiles of six
// and their remainders), outputs that end inside a panel and inside a group
// of panels, one to three threads, and the sixteen-lane tiles: each output
// is bit for bit the reference chain, so a row alone equals the same row in
// any batch.
TEST_P(MatmulTest, EveryOutputIsTheFmaChainWhateverTheBatchThreadsOrTiles) {
  const DType dtype = GetParam();
  std::mt19937 rng(4);
  ThreadPool one(1), three(3);
  for (int64_t out : {int64_t{5}, int64_t{71}, int64_t{200}}) {
    const int64_t in = 100;
    Model holder;
    const Tensor w =
        add_tensor(&holder, "w", dtype, {out, in}, random_values(&rng, out * in, 0.0f, 1.0f));
    const cpu::PackedMatrix m = packed(w);
    const std::vector<float> x = random_values(&rng, 14 * in, 0.0f, 1.0f);
    for (int64_t n = 1; n <= 14; ++n) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &one, &three}) {
        std::vector<float> y(n * out, -1.0f), wide(n * out, -1.0f);
        cpu::matmul(pool, x.data(), n, m, y.data());
        cpu::matmul_wide(pool, x.data(), n, m, wide.data());
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t o = 0; o < out; ++o) {
            const float want = fma_chain(x.data() + r * in, w, o, in);
            ASSERT_TRUE(bits_equal(&y[r * out + o], &want, 1))
                << "out " << out << " n " << n << " row " << r << " output " << o << ": "
                << y[r * out + o] << " vs " << want;
            ASSERT_TRUE(bits_equal(&wide[r * out + o], &want, 1))
                << "wide tiles, out " << out << " n " << n << " row " << r << " output " << o;
          }
        }
      }
    }
  }
}

TEST(PackedMatrix, FusedPartsAreTheirRowsInOrderAndMixedDtypesBecomeF32) {
  std::mt19937 rng(9);
  Model holder;
  const Tensor a = add_tensor(&holder, "a", DType::kBF16, {3, 20}, random_values(&rng, 60, 0, 1));
  const Tensor b = add_tensor(&holder, "b", DType::kF32, {18, 20}, random_values(&rng, 360, 0, 1));
  const Tensor c = add_tensor(&holder, "c", DType::kF32, {2, 21}, random_values(&rng, 42, 0, 1));
  const Tensor* parts[] = {&a, &b};
  cpu::PackedMatrix m;
  ASSERT_TRUE(cpu::PackedMatrix::pack(parts, nullptr, &m).ok());
  EXPECT_EQ(m.rows(), 21);
  EXPECT_EQ(m.cols(), 20);
  EXPECT_EQ(m.num_panels(), 2);
  EXPECT_EQ(m.dtype(), DType::kF32);
  const std::vector<float> x = random_values(&rng, 20, 0, 1);
  std::vector<float> y(21);
  cpu::matmul(nullptr, x.data(), 1, m, y.data());
  for (int64_t r = 0; r < 21; ++r) {
    const float want = r < 3 ? fma_chain(x.data(), a, r, 20) : fma_chain(x.data(), b, r - 3, 20);
    EXPECT_TRUE(bits_equal(&y[r], &want, 1)) << "row " << r;
  }
  const Tensor* mismatched[] = {&a, &c};
  const Status s = cpu::PackedMatrix::pack(mismatched, nullptr, &m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("columns"), std::string::npos) << s.message();
  EXPECT_EQ(cpu::PackedMatrix::pack(Tensor{}, nullptr, &m).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Ops, RopeMatchesDirectFormulaForBothStyles) {
  const int64_t n = 3, heads = 2, hd = 16, half = hd / 2;
  const std::vector<int32_t> positions = {0, 7, 300};
  std::vector<float> inv_freq(half);
  for (int64_t j = 0; j < half; ++j) inv_freq[j] = float(std::pow(10000.0, -2.0 * j / hd));
  std::vector<float> cos(n * half), sin(n * half);
  cpu::rope_cos_sin(positions.data(), n, inv_freq.data(), half, cos.data(), sin.data());
  std::mt19937 rng(5);
  const std::vector<float> x = random_values(&rng, n * heads * hd, 0.0f, 1.0f);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kRotateHalf}) {
    std::vector<float> y = x;
    cpu::rope(y.data(), n, heads, hd, cos.data(), sin.data(), style);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const float* a = x.data() + (t * heads + h) * hd;
        const float* b = y.data() + (t * heads + h) * hd;
        for (int64_t j = 0; j < half; ++j) {
          const int64_t i0 = style == RopeStyle::kInterleaved ? 2 * j : j;
          const int64_t i1 = style == RopeStyle::kInterleaved ? 2 * j + 1 : j + half;
          const double angle = double(positions[t]) * inv_freq[j];
          // Inputs ~N(0,1); two fp32 products and a sum: ~1e-7 error.
          EXPECT_NEAR(b[i0], a[i0] * std::cos(angle) - a[i1] * std::sin(angle), 1e-5);
          EXPECT_NEAR(b[i1], a[i0] * std::sin(angle) + a[i1] * std::cos(angle), 1e-5);
        }
      }
    }
  }
}

// Attention batches its dot products and V accumulation per KV block; the
// batched forms must give exactly the single calls' bits, or batching would
// change tokens.
TEST(Ops, DotManyAndAxpyManyEqualSingleCallsBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t n : {1, 7, 8, 16, 19, 64, 128}) {
    for (int64_t rows : {1, 3, 4, 5, 16}) {
      std::vector<float> a(n), m(rows * n), alpha(rows), y0(n);
      for (float& v : a) v = normal(rng);
      for (float& v : m) v = normal(rng);
      for (float& v : alpha) v = normal(rng);
      for (float& v : y0) v = normal(rng);

      std::vector<float> many(rows);
      pvllm::cpu::dot_many(a.data(), m.data(), rows, n, many.data());
      std::vector<float> y_many = y0, y_single = y0;
      pvllm::cpu::axpy_many(alpha.data(), m.data(), rows, n, y_many.data());
      for (int64_t t = 0; t < rows; ++t) {
        const float single = pvllm::cpu::dot(a.data(), m.data() + t * n, n);
        EXPECT_EQ(std::memcmp(&many[t], &single, sizeof(float)), 0)
            << "dot row " << t << " of " << rows << ", n " << n;
        pvllm::cpu::axpy(alpha[t], m.data() + t * n, y_single.data(), n);
      }
      EXPECT_EQ(std::memcmp(y_many.data(), y_single.data(), n * sizeof(float)), 0)
          << "axpy over " << rows << " rows, n " << n;
    }
  }
}

TEST(Ops, RmsnormSiluAndEmbeddingMatchDefinitions) {
  std::mt19937 rng(6);
  const int64_t n = 2, dim = 21;
  const std::vector<float> x = random_values(&rng, n * dim, 0.0f, 2.0f);
  const std::vector<float> g = random_values(&rng, dim, 1.0f, 0.1f);
  std::vector<float> y(n * dim);
  cpu::rmsnorm(x.data(), g.data(), n, dim, 1e-5f, y.data());
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i)
      EXPECT_NEAR(y[r * dim + i], x[r * dim + i] * inv * g[i], 1e-5);
  }

  std::vector<float> s(dim);
  cpu::silu_mul(x.data(), g.data(), dim, s.data());
  for (int64_t i = 0; i < dim; ++i) {
    EXPECT_NEAR(s[i], x[i] / (1.0 + std::exp(-double(x[i]))) * g[i], 1e-5);
  }

  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    Model holder;
    const Tensor table =
        add_tensor(&holder, "e", dtype, {5, dim}, random_values(&rng, 5 * dim, 0, 1));
    const std::vector<int32_t> ids = {4, 0, 4};
    std::vector<float> e(ids.size() * dim);
    cpu::embedding(table, ids.data(), ids.size(), dim, e.data());
    for (size_t t = 0; t < ids.size(); ++t)
      for (int64_t i = 0; i < dim; ++i)
        EXPECT_EQ(e[t * dim + i], load_as_float(dtype, table.data, ids[t] * dim + i));
  }
}

// ---------------------------------------------------------------- backend

class ForwardTest : public ::testing::TestWithParam<std::tuple<RopeStyle, DType>> {};

TEST_P(ForwardTest, PrefillMatchesNaiveReference) {
  const auto [style, dtype] = GetParam();
  const auto model = random_model(tiny_config(style), dtype, 11);
  auto backend = make_backend(*model, 8, 4);
  const std::vector<int32_t> ids = {1, 17, 63, 5, 5, 40, 2, 33, 9};
  TestSeq seq;
  int32_t next_block = 0;
  const std::vector<float> got = run(backend.get(), make_step({{&seq, ids}}, 4, &next_block), 64);
  const std::vector<double> want = reference_forward(*model, ids);
  // Logits are O(1) sums over 2 layers of fp32 math with reductions of <= 52
  // terms; observed differences are ~1e-6. 1e-4 catches any wrong
  // convention (rope pairing, GQA mapping, mask), which move logits by ~0.1.
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
}

INSTANTIATE_TEST_SUITE_P(StylesAndDtypes, ForwardTest,
                         ::testing::Combine(::testing::Values(RopeStyle::kInterleaved,
                                                              RopeStyle::kRotateHalf),
                                            ::testing::Values(DType::kF32, DType::kBF16)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == RopeStyle::kInterleaved
                                                  ? "Interleaved"
                                                  : "RotateHalf") +
                                  "_" + dtype_name(std::get<1>(info.param));
                         });

TEST(CpuBackend, BatchedSequencesMatchEachAloneBitForBit) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF16, 12);
  const int32_t bs = 4;
  const std::vector<std::vector<int32_t>> prompts = {
      {3, 9, 27, 1, 60}, {8}, {12, 12, 50, 7, 7, 31, 2, 44, 0, 19}};
  const std::vector<int32_t> next = {21, 22, 23};

  // Alone: each sequence prefilled then decoded once, in its own backend.
  std::vector<std::vector<float>> alone_prefill, alone_decode;
  for (size_t s = 0; s < prompts.size(); ++s) {
    auto b = make_backend(*model, 16, bs, 1);
    TestSeq seq;
    int32_t next_block = 0;
    alone_prefill.push_back(run(b.get(), make_step({{&seq, prompts[s]}}, bs, &next_block), 64));
    alone_decode.push_back(run(b.get(), make_step({{&seq, {next[s]}}}, bs, &next_block), 64));
  }

  // Together: one prefill step for all three, then one decode step for all.
  auto b = make_backend(*model, 16, bs, 3);
  TestSeq seqs[3];
  int32_t next_block = 0;
  const std::vector<float> prefill =
      run(b.get(),
          make_step({{&seqs[0], prompts[0]}, {&seqs[1], prompts[1]}, {&seqs[2], prompts[2]}}, bs,
                    &next_block),
          64);
  const std::vector<float> decode =
      run(b.get(),
          make_step({{&seqs[0], {next[0]}}, {&seqs[1], {next[1]}}, {&seqs[2], {next[2]}}}, bs,
                    &next_block),
          64);
  size_t row = 0;
  for (size_t s = 0; s < prompts.size(); ++s) {
    EXPECT_TRUE(
        bits_equal(alone_prefill[s].data(), prefill.data() + row * 64, prompts[s].size() * 64))
        << "prefill of sequence " << s;
    row += prompts[s].size();
    EXPECT_TRUE(bits_equal(alone_decode[s].data(), decode.data() + s * 64, 64))
        << "decode of sequence " << s;
  }
}

TEST(CpuBackend, ChunkedPrefillMatchesOneChunkBitForBit) {
  const auto model = random_model(tiny_config(RopeStyle::kInterleaved), DType::kF32, 13);
  const int32_t bs = 4;
  const std::vector<int32_t> prompt = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41};

  auto whole = make_backend(*model, 8, bs);
  TestSeq a;
  int32_t next_a = 0;
  const std::vector<float> one = run(whole.get(), make_step({{&a, prompt}}, bs, &next_a), 64);

  // Chunks of 3, 5 and 3: boundaries inside and at the ends of blocks.
  auto chunked = make_backend(*model, 8, bs);
  TestSeq b;
  int32_t next_b = 5;  // different physical blocks too
  std::vector<float> pieces;
  for (auto [begin, end] : {std::pair{0, 3}, std::pair{3, 8}, std::pair{8, 11}}) {
    const std::vector<int32_t> chunk(prompt.begin() + begin, prompt.begin() + end);
    const std::vector<float> l = run(chunked.get(), make_step({{&b, chunk}}, bs, &next_b), 64);
    pieces.insert(pieces.end(), l.begin(), l.end());
  }
  ASSERT_EQ(pieces.size(), one.size());
  EXPECT_TRUE(bits_equal(pieces.data(), one.data(), one.size()));
}

TEST(CpuBackend, LogitsDoNotDependOnThreadCount) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kBF16, 14);
  const std::vector<int32_t> prompt = {4, 8, 15, 16, 23, 42};
  std::vector<std::vector<float>> results;
  for (int32_t threads : {1, 2, 5}) {
    auto b = make_backend(*model, 4, 8, threads);
    TestSeq seq;
    int32_t next_block = 0;
    results.push_back(run(b.get(), make_step({{&seq, prompt}}, 8, &next_block), 64));
  }
  EXPECT_TRUE(bits_equal(results[0].data(), results[1].data(), results[0].size()));
  EXPECT_TRUE(bits_equal(results[0].data(), results[2].data(), results[0].size()));
}

TEST(CpuBackend, OnlyRequestedRowsGetLogits) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 15);
  auto b = make_backend(*model, 4, 4);
  TestSeq s1, s2;
  int32_t next_block = 0;
  BatchMetadata md = make_step({{&s1, {1, 2, 3}}}, 4, &next_block);
  const std::vector<float> all = run(b.get(), md, 64);
  md.logits_rows = {2, 0};
  next_block = 0;
  BatchMetadata md2 = make_step({{&s2, {1, 2, 3}}}, 4, &next_block);
  md2.logits_rows = {2, 0};
  const std::vector<float> some = run(b.get(), md2, 64);
  EXPECT_TRUE(bits_equal(some.data(), all.data() + 2 * 64, 64));
  EXPECT_TRUE(bits_equal(some.data() + 64, all.data(), 64));
}

// forward_sample draws each row from its own logits exactly as the host
// sampler does on the logits forward() returns for the same batch: rows
// sharing a logits row, every filter, penalties, and logprobs only where
// asked.
TEST(CpuBackend, ForwardSampleDrawsEachRowAsTheHostSamplerOnItsLogits) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 21);
  auto with_logits = make_backend(*model, 8, 4);
  auto sampling = make_backend(*model, 8, 4);
  TestSeq a1, b1, a2, b2;
  int32_t next_block = 0;
  const BatchMetadata md = make_step({{&a1, {3, 1, 4}}, {&b1, {1, 5, 9, 2}}}, 4, &next_block);
  next_block = 0;
  ASSERT_EQ(make_step({{&a2, {3, 1, 4}}, {&b2, {1, 5, 9, 2}}}, 4, &next_block).input_ids,
            md.input_ids);
  const std::vector<float> logits = run(with_logits.get(), md, 64);

  std::vector<SamplingParams> params(6);
  params[0].temperature = 0.0f;
  params[1].temperature = 0.9f;
  params[1].top_p = 0.8f;
  params[1].logprobs = 3;
  params[2].temperature = 0.7f;
  params[2].top_k = 5;
  params[2].repetition_penalty = 1.5f;
  params[2].presence_penalty = 0.3f;
  params[2].frequency_penalty = 0.2f;
  params[3].min_p = 0.1f;
  params[3].logprobs = 0;
  params[4].temperature = 0.0f;
  params[4].repetition_penalty = 2.0f;
  params[5].temperature = 1.2f;
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  const std::vector<int32_t> output = {9, 2, 6, 9};
  std::vector<SampleRow> rows;
  for (int32_t i = 0; i < 8; ++i) {
    SampleRow r;
    r.logits_index = (i * 5) % 7;  // 7 logits rows, some read twice
    r.params = &params[i % params.size()];
    r.seed = 77;
    r.sample_index = i;  // rows reading one logits row still differ
    r.step = i % 3;
    r.prompt_ids = prompt;
    r.output_ids = std::span<const int32_t>(output).first(i % 5);
    rows.push_back(r);
  }
  std::vector<SampleResult> out;
  const Status st = sampling->forward_sample(md, rows, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(out.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleResult want = sample_row(logits.data(), 64, rows[i]);
    EXPECT_EQ(out[i].token_id, want.token_id) << "row " << i;
    EXPECT_EQ(out[i].logprob, want.logprob) << "row " << i;
    ASSERT_EQ(out[i].top_logprobs.size(), want.top_logprobs.size()) << "row " << i;
    for (size_t j = 0; j < want.top_logprobs.size(); ++j) {
      EXPECT_EQ(out[i].top_logprobs[j].token_id, want.top_logprobs[j].token_id);
      EXPECT_EQ(out[i].top_logprobs[j].logprob, want.top_logprobs[j].logprob);
    }
    if (rows[i].params->logprobs < 0) {
      EXPECT_EQ(out[i].logprob, 0.0f) << "row " << i << " did not ask for logprobs";
    }
  }
  EXPECT_EQ(out[1].top_logprobs.size(), 3u);
}

TEST(CpuBackend, ForwardSampleRejectsRowsOutsideTheBatch) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 22);
  auto b = make_backend(*model, 4, 4);
  TestSeq seq;
  int32_t next_block = 0;
  BatchMetadata md = make_step({{&seq, {1, 2, 3}}}, 4, &next_block);
  md.logits_rows = {2};
  SamplingParams params;
  SampleRow row;
  row.params = &params;
  row.logits_index = 1;  // only one logits row exists
  std::vector<SampleResult> out;
  EXPECT_EQ(b->forward_sample(md, {&row, 1}, &out).code(), StatusCode::kInvalidArgument);
  row.logits_index = 0;
  row.params = nullptr;
  EXPECT_EQ(b->forward_sample(md, {&row, 1}, &out).code(), StatusCode::kInvalidArgument);
  row.params = &params;
  EXPECT_TRUE(b->forward_sample(md, {&row, 1}, &out).ok());
  EXPECT_EQ(out.size(), 1u);
}

TEST(BackendRegistry, CpuRegistersItselfAndUnknownNamesAreUnsupported) {
  const std::vector<std::string> names = registered_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 23);
  BackendOptions o;
  o.num_blocks = 4;
  o.block_size = 4;
  o.num_threads = 1;
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(create_backend("cpu", *model, o, &b).ok());
  EXPECT_EQ(b->name().rfind("cpu (", 0), 0u) << b->name();  // "cpu (avx2)": the kernels' ISA
  const Status s = create_backend("tpu", *model, o, &b);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("cpu"), std::string::npos) << "names the linked ones: " << s.message();
}

TEST(CpuBackend, CopyBlocksCopiesEveryLayer) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 16);
  const int32_t bs = 4;
  auto b = make_backend(*model, 8, bs);
  // Prefill 8 tokens into blocks 0 and 1, then copy them to 2 and 3.
  TestSeq orig;
  int32_t next_block = 0;
  (void)run(b.get(), make_step({{&orig, {5, 6, 7, 8, 9, 10, 11, 12}}}, bs, &next_block), 64);
  ASSERT_TRUE(b->copy_blocks({{0, 2}, {1, 3}}).ok());

  // A decode over the copies must equal a decode over the originals; a
  // layer left uncopied would attend to uninitialised K/V.
  TestSeq copy{{2, 3}, 8};
  next_block = 4;
  const std::vector<float> from_copy =
      run(b.get(), make_step({{&copy, {13}}}, bs, &next_block), 64);
  const std::vector<float> from_orig =
      run(b.get(), make_step({{&orig, {13}}}, bs, &next_block), 64);
  EXPECT_TRUE(bits_equal(from_copy.data(), from_orig.data(), 64));

  EXPECT_EQ(b->copy_blocks({{0, 8}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b->copy_blocks({{-1, 0}}).code(), StatusCode::kInvalidArgument);
}

TEST(CpuBackend, RejectsInconsistentMetadata) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 17);
  auto b = make_backend(*model, 4, 4);
  TestSeq seq;
  int32_t next_block = 0;
  const BatchMetadata good = make_step({{&seq, {1, 2, 3, 4, 5}}}, 4, &next_block);
  std::vector<float> logits(good.logits_rows.size() * 64);
  ASSERT_TRUE(b->forward(good, logits.data()).ok());

  auto expect_invalid = [&](auto mutate, const char* what) {
    BatchMetadata md = good;
    mutate(&md);
    EXPECT_EQ(b->forward(md, logits.data()).code(), StatusCode::kInvalidArgument) << what;
  };
  expect_invalid([](BatchMetadata* m) { m->input_ids[1] = 64; }, "token id past vocab");
  expect_invalid([](BatchMetadata* m) { m->input_ids[1] = -1; }, "negative token id");
  expect_invalid([](BatchMetadata* m) { m->slot_mapping[0] = 16; }, "slot outside the pool");
  expect_invalid([](BatchMetadata* m) { m->slot_mapping[0] = 3; }, "slot not from the table");
  expect_invalid([](BatchMetadata* m) { m->positions.pop_back(); }, "positions too short");
  expect_invalid([](BatchMetadata* m) { m->positions[2] = 7; }, "position off its context");
  expect_invalid([](BatchMetadata* m) { m->block_tables[1] = 4; }, "block id outside the pool");
  expect_invalid([](BatchMetadata* m) { m->context_lens[0] = 9; }, "context past its table");
  expect_invalid([](BatchMetadata* m) { m->context_lens[0] = 4; }, "context shorter than rows");
  expect_invalid([](BatchMetadata* m) { m->query_start.back() = 4; }, "query_start not to n");
  expect_invalid([](BatchMetadata* m) { m->logits_rows.push_back(5); }, "logits row past n");
  EXPECT_EQ(b->forward(good, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(CpuBackend, PoolThatCannotBeAllocatedIsOutOfMemory) {
  const auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 18);
  BackendOptions o;
  o.num_blocks = 1 << 30;  // 2^30 blocks of 2 layers x K,V x 16 x 2 x 8 floats: 2 TiB
  o.block_size = 16;
  std::unique_ptr<Backend> b;
  EXPECT_EQ(create_cpu_backend(*model, o, &b).code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(b, nullptr);
}

TEST(CpuBackend, RejectsWeightsThatDoNotMatchTheConfig) {
  auto model = random_model(tiny_config(RopeStyle::kRotateHalf), DType::kF32, 19);
  model->weights.layers[1].wk.shape = {8, 40};
  std::unique_ptr<Backend> b;
  EXPECT_EQ(create_cpu_backend(*model, BackendOptions{4, 4, 1}, &b).code(),
            StatusCode::kCorruptModel);
}

TEST(CpuBackend, KvBytesPerBlockCountsKAndVOfEveryLayer) {
  const ModelConfig c = tiny_config(RopeStyle::kRotateHalf);
  EXPECT_EQ(kv_bytes_per_block(c, 16, KvCacheDtype::kF32), size_t{2} * 2 * 16 * 2 * 8 * 4);
}

// ---------------------------------------------------------------- real model

TEST(Stories260K, LogitsMatchReferenceForward) {
  PVLLM_SHARED_OR_SKIP(bin, "models/stories260K/stories260K.bin");
  PVLLM_SHARED_OR_SKIP(ref_path, "models/stories260K/reference_greedy.json");
  std::unique_ptr<Model> model;
  const Status loaded = load_model(bin, &model);
  ASSERT_TRUE(loaded.ok()) << loaded.message();

  std::ifstream in(ref_path);
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const nlohmann::json* values = nullptr;
  for (const auto& c : ref["cases"]) {
    if (c["prompt_ids_with_bos"].get<std::vector<int32_t>>() == prompt) {
      values = &c["logits_first_positions"]["values"];
    }
  }
  ASSERT_NE(values, nullptr) << "no case with prompt " << ::testing::PrintToString(prompt);
  ASSERT_EQ(values->size(), prompt.size());

  auto b = make_backend(*model, 4, 16);
  TestSeq seq;
  int32_t next_block = 0;
  const int32_t vocab = model->config.vocab_size;
  const std::vector<float> got = run(b.get(), make_step({{&seq, prompt}}, 16, &next_block), vocab);
  // The reference is an fp64 forward rounded to 1e-6; logits are O(10) and
  // our fp32 forward differs by ~1e-5, so 1e-4 absolute.
  double max_err = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    ASSERT_EQ((*values)[p].size(), size_t(vocab));
    for (int32_t v = 0; v < vocab; ++v) {
      const double want = (*values)[p][v].get<double>();
      max_err = std::max(max_err, std::fabs(got[p * vocab + v] - want));
      ASSERT_NEAR(got[p * vocab + v], want, 1e-4) << "position " << p << " token " << v;
    }
  }
  RecordProperty("max_abs_error", std::to_string(max_err));
}

}  // namespace
}  // namespace pvllm
