#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/base/tensor.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

// Compiled once per ISA variant (see isa.h), calling its own variant's
// reductions.
namespace pvllm::cpu::PVLLM_CPU_VARIANT {

void axpy_many(const float* alpha, const float* rows, int64_t num_rows, int64_t n, float* y);
void dot_grid(const float* q, int64_t num_q, const float* rows, int64_t num_rows, int64_t n,
              float* out, int64_t out_stride);

namespace {

// One unit of work: `num_rows` consecutive query rows of one sequence
// against one kv head, i.e. num_rows x group query vectors that share every
// K and V row they read.
struct Item {
  int32_t seq;
  int32_t row0;  // first query row (index into q)
  int32_t num_rows;
  int32_t kv_head;
};

// Per-thread scratch, grown once and reused.
struct Scratch {
  std::vector<float> q;       // [num_q, head_dim] the item's query vectors, gathered
  std::vector<float> scores;  // [num_q, num_keys] of the item's key range
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Query rows per item: enough query vectors (rows x group) to reuse each K
// row loaded several times, few enough that the keys a tile computes past
// its earlier rows' positions (later masked) stay a small share.
int32_t rows_per_item(int32_t group) { return std::max(1, 8 / group); }

// The rows of one (block, kv head) as attention reads them, one reader per
// dtype the CPU stores: load() widens eight consecutive elements to fp32
// (exactly), value() one; scaled rows carry one fp16 factor per row.
struct F32Rows {
  using Elem = float;
  static constexpr bool kScaled = false;
  static V8 load(const Elem* p) { return V8::load(p); }
  static float value(const Elem* p) { return *p; }
};
struct F16Rows {
  using Elem = uint16_t;
  static constexpr bool kScaled = false;
  static V8 load(const Elem* p) { return V8::load_f16(p); }
  static float value(const Elem* p) { return fp16_to_float(*p); }
};
struct BF16Rows {
  using Elem = uint16_t;
  static constexpr bool kScaled = false;
  static V8 load(const Elem* p) { return V8::load_bf16(p); }
  static float value(const Elem* p) { return bf16_to_float(*p); }
};
struct Int8Rows {
  using Elem = int8_t;
  static constexpr bool kScaled = true;
  static V8 load(const Elem* p) { return V8::load_i8(p); }
  static float value(const Elem* p) { return static_cast<float>(*p); }
};

// Elements [i, i + 8) of a row, those at or past n zero.
template <class R>
inline V8 load_row_padded(const typename R::Elem* row, int64_t i, int64_t n) {
  if (i + 8 <= n) return R::load(row + i);
  float tmp[8] = {};
  for (int64_t k = i; k < n; ++k) tmp[k - i] = R::value(row + k);
  return V8::load(tmp);
}

// A run of consecutive positions inside one block of one kv head.
template <class R>
struct Run {
  const typename R::Elem* k;  // the run's first K row
  const typename R::Elem* v;  // the run's first V row
  const uint16_t* k_scale;    // the run's first K scale (scaled rows only)
  const uint16_t* v_scale;
};

// Calls fn(position, run, count) for each run of positions [a, b] that lies
// in one block, in position order.
template <class R, typename Fn>
void for_each_run(const PagedAttentionParams& p, const int32_t* table, int32_t kv_head, int32_t a,
                  int32_t b, Fn&& fn) {
  using Elem = typename R::Elem;
  const int64_t head_dim = p.head_dim;
  const auto head_bytes =
      static_cast<int64_t>(kv_head_block_bytes(p.kv_dtype, p.block_size, p.head_dim));
  const int64_t block_bytes = head_bytes * p.num_kv_heads;
  const int64_t scales_at = static_cast<int64_t>(p.block_size) * head_dim;  // bytes, int8
  const auto* k_base = static_cast<const uint8_t*>(p.k_cache) + kv_head * head_bytes;
  const auto* v_base = static_cast<const uint8_t*>(p.v_cache) + kv_head * head_bytes;
  for (int32_t j = a; j <= b;) {
    const int32_t in_block = j % p.block_size;
    const int32_t n = std::min(b + 1 - j, p.block_size - in_block);
    const int64_t at = table[j / p.block_size] * block_bytes;
    Run<R> run;
    run.k = reinterpret_cast<const Elem*>(k_base + at) + in_block * head_dim;
    run.v = reinterpret_cast<const Elem*>(v_base + at) + in_block * head_dim;
    run.k_scale = reinterpret_cast<const uint16_t*>(k_base + at + scales_at) + in_block;
    run.v_scale = reinterpret_cast<const uint16_t*>(v_base + at + scales_at) + in_block;
    fn(j, run, n);
    j += n;
  }
}

// out[t * out_stride + r] = score of query t against row r, for t < num_q
// and r < num_rows: fp32 rows through dot_grid, the others eight rows at a
// time widened in registers, each lane a fused multiply-add chain as
// dot_many's, times the row's scale for int8.
template <class R>
void dot_rows(const float* q, int64_t num_q, const typename R::Elem* rows, const uint16_t* scales,
              int64_t num_rows, int64_t n, float* out, int64_t out_stride) {
  if constexpr (std::is_same_v<R, F32Rows>) {
    dot_grid(q, num_q, rows, num_rows, n, out, out_stride);
  } else {
    for (int64_t t = 0; t < num_q; ++t) {
      const float* a = q + t * n;
      for (int64_t r = 0; r < num_rows; r += 8) {
        const int64_t here = std::min<int64_t>(8, num_rows - r);
        const typename R::Elem* block = rows + r * n;
        V8 acc[8];
        for (V8& x : acc) x = V8::zero();
        for (int64_t i = 0; i < n; i += 8) {
          const V8 x = i + 8 <= n ? V8::load(a + i) : load_row_padded<F32Rows>(a, i, n);
          if (here == 8 && i + 8 <= n) {
            for (int k = 0; k < 8; ++k) acc[k] = V8::fma(x, R::load(block + k * n + i), acc[k]);
          } else {
            for (int64_t k = 0; k < here; ++k) {
              acc[k] = V8::fma(x, load_row_padded<R>(block + k * n, i, n), acc[k]);
            }
          }
        }
        float sums[8];
        V8::hsum8(acc).store(sums);
        for (int64_t k = 0; k < here; ++k) {
          out[t * out_stride + r + k] =
              R::kScaled ? sums[k] * fp16_to_float(scales[r + k]) : sums[k];
        }
      }
    }
  }
}

// Lanes [i, i + 8 * C) of y += sum over rows of alpha[t] * row t.
template <class R, int C>
inline void axpy_rows_chunks(const float* alpha, const typename R::Elem* rows, int64_t num_rows,
                             int64_t n, int64_t i, float* y) {
  V8 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = V8::load(y + i + 8 * c);
  for (int64_t t = 0; t < num_rows; ++t) {
    const V8 a = V8::broadcast(alpha[t]);
    for (int c = 0; c < C; ++c) acc[c] = V8::fma(a, R::load(rows + t * n + i + 8 * c), acc[c]);
  }
  for (int c = 0; c < C; ++c) acc[c].store(y + i + 8 * c);
}

template <class R, int... Cs>
void axpy_rows_remainder(int chunks, const float* alpha, const typename R::Elem* rows,
                         int64_t num_rows, int64_t n, int64_t i, float* y,
                         std::integer_sequence<int, Cs...> /*counts*/) {
  ((chunks == Cs + 1 ? axpy_rows_chunks<R, Cs + 1>(alpha, rows, num_rows, n, i, y) : void()), ...);
}

// y += sum over rows of weight[t] * row t (times the row's scale for int8):
// fp32 rows through axpy_many, the others with axpy_many's lane order.
template <class R>
void axpy_rows(const float* weight, const typename R::Elem* rows, const uint16_t* scales,
               int64_t num_rows, int64_t n, float* y) {
  if constexpr (std::is_same_v<R, F32Rows>) {
    axpy_many(weight, rows, num_rows, n, y);
  } else {
    const float* alpha = weight;
    float scaled[256];  // a run lies in one block: at most block_size (256) rows
    if constexpr (R::kScaled) {
      for (int64_t t = 0; t < num_rows; ++t) scaled[t] = weight[t] * fp16_to_float(scales[t]);
      alpha = scaled;
    }
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) axpy_rows_chunks<R, 8>(alpha, rows, num_rows, n, i, y);
    if (const auto chunks = static_cast<int>((n - i) / 8); chunks > 0) {
      axpy_rows_remainder<R>(chunks, alpha, rows, num_rows, n, i, y,
                             std::make_integer_sequence<int, 7>{});
      i += 8 * chunks;
    }
    for (; i < n; ++i) {
      float acc = y[i];
      for (int64_t t = 0; t < num_rows; ++t)
        acc = std::fma(alpha[t], R::value(rows + t * n + i), acc);
      y[i] = acc;
    }
  }
}

// Scales the scores by `scale`, turns them into e^(s - max), and returns
// 1 / their sum. Eight lanes over the keys in order, the tail zero padded,
// the lanes summed in V8::hsum's tree: fixed by the number of keys alone.
float softmax_in_place(float* s, int32_t n, float scale) {
  float max_score = -INFINITY;
  for (int32_t j = 0; j < n; ++j) {
    s[j] *= scale;
    max_score = std::max(max_score, s[j]);
  }
  const V8 m = V8::broadcast(max_score);
  V8 sum = V8::zero();
  int32_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const V8 e = exp(V8::sub(V8::load(s + j), m));
    e.store(s + j);
    sum = V8::add(sum, e);
  }
  if (j < n) {
    float tail[8];
    for (int32_t i = 0; i < 8; ++i) tail[i] = j + i < n ? s[j + i] : max_score;
    float e[8];
    exp(V8::sub(V8::load(tail), m)).store(e);
    for (int32_t i = 0; i < 8; ++i) e[i] = j + i < n ? e[i] : 0.0f;
    std::memcpy(s + j, e, static_cast<size_t>(n - j) * sizeof(float));
    sum = V8::add(sum, V8::load(e));
  }
  return 1.0f / sum.hsum();
}

template <class R>
void attend(const PagedAttentionParams& p, const Item& it) {
  Scratch& s = scratch();
  const int32_t group = p.num_heads / p.num_kv_heads;
  const int64_t head_dim = p.head_dim;
  const int32_t num_q = it.num_rows * group;
  const int32_t q_len = p.query_start[it.seq + 1] - p.query_start[it.seq];
  // Position of the item's row r.
  const int32_t pos0 = p.context_lens[it.seq] - q_len + (it.row0 - p.query_start[it.seq]);
  auto first_key = [&](int32_t pos) {  // the whole prefix, or the window
    return p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
  };
  const int32_t key_lo = first_key(pos0);
  const int32_t key_hi = pos0 + it.num_rows - 1;
  const int32_t num_keys = key_hi - key_lo + 1;
  const int32_t* table = p.block_tables + static_cast<int64_t>(it.seq) * p.max_blocks_per_seq;

  s.q.resize(static_cast<size_t>(num_q) * head_dim);
  for (int32_t r = 0; r < it.num_rows; ++r) {
    const float* src =
        p.q + (static_cast<int64_t>(it.row0 + r) * p.num_heads + it.kv_head * group) * head_dim;
    std::memcpy(s.q.data() + r * group * head_dim, src, group * head_dim * sizeof(float));
  }
  // Every query vector against every key of the range, one block's K rows
  // (in cache) at a time; a row ignores the keys past its own position.
  s.scores.resize(static_cast<size_t>(num_q) * num_keys);
  for_each_run<R>(p, table, it.kv_head, key_lo, key_hi,
                  [&](int32_t j, const Run<R>& run, int32_t n) {
                    dot_rows<R>(s.q.data(), num_q, run.k, run.k_scale, n, head_dim,
                                s.scores.data() + (j - key_lo), num_keys);
                  });
  for (int32_t r = 0; r < it.num_rows; ++r) {
    const int32_t pos = pos0 + r;
    const int32_t first = first_key(pos);
    for (int32_t g = 0; g < group; ++g) {
      float* sc =
          s.scores.data() + static_cast<int64_t>(r * group + g) * num_keys + (first - key_lo);
      const float inv_sum = softmax_in_place(sc, pos - first + 1, p.scale);
      float* out =
          p.out +
          (static_cast<int64_t>(it.row0 + r) * p.num_heads + it.kv_head * group + g) * head_dim;
      std::fill(out, out + head_dim, 0.0f);
      for_each_run<R>(p, table, it.kv_head, first, pos,
                      [&](int32_t j, const Run<R>& run, int32_t n) {
                        axpy_rows<R>(sc + (j - first), run.v, run.v_scale, n, head_dim, out);
                      });
      for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv_sum;
    }
  }
}

// Enough multiply-adds in all that handing the items to the pool pays.
constexpr int64_t kMinParallelMacs = int64_t{1} << 15;

}  // namespace

void paged_attention(const PagedAttentionParams& p, ThreadPool* pool) {
  const int32_t group = p.num_heads / p.num_kv_heads;
  const int32_t tile = rows_per_item(group);
  thread_local std::vector<Item> items;
  items.clear();
  int64_t macs = 0;
  for (int32_t s = 0; s < p.num_seqs; ++s) {
    const int32_t begin = p.query_start[s];
    const int32_t end = p.query_start[s + 1];
    for (int32_t r = begin; r < end; r += tile) {
      for (int32_t kvh = 0; kvh < p.num_kv_heads; ++kvh) {
        items.push_back({s, r, std::min(tile, end - r), kvh});
      }
    }
    macs += static_cast<int64_t>(end - begin) * p.context_lens[s] * p.num_heads * p.head_dim * 2;
  }
  // The workers see this thread's list through the pointer (each thread
  // has its own `items`).
  const Item* list = items.data();
  using AttendFn = void (*)(const PagedAttentionParams&, const Item&);
  AttendFn attend_one = &attend<F32Rows>;
  if (p.kv_dtype == KvCacheDtype::kF16) attend_one = &attend<F16Rows>;
  if (p.kv_dtype == KvCacheDtype::kBF16) attend_one = &attend<BF16Rows>;
  if (p.kv_dtype == KvCacheDtype::kInt8) attend_one = &attend<Int8Rows>;
  auto run = [&p, list, attend_one](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) attend_one(p, list[i]);
  };
  if (pool == nullptr || macs < kMinParallelMacs) {
    run(0, static_cast<int64_t>(items.size()));
  } else {
    // Items cost unequal amounts (causal prefill rows): claimed one by one.
    pool->parallel_for_dynamic(static_cast<int64_t>(items.size()), run, 1);
  }
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
