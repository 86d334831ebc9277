#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

// Calls fn(position, element offset of that position's K/V row, count) for
// each run of positions [a, b] that lies in one block, in position order.
template <typename Fn>
void for_each_run(const PagedAttentionParams& p, const int32_t* table, int32_t kv_head, int32_t a,
                  int32_t b, Fn&& fn) {
  const int64_t head_dim = p.head_dim;
  const int64_t block_stride = static_cast<int64_t>(p.num_kv_heads) * p.block_size * head_dim;
  const int64_t head_offset = static_cast<int64_t>(kv_head) * p.block_size * head_dim;
  for (int32_t j = a; j <= b;) {
    const int32_t in_block = j % p.block_size;
    const int32_t n = std::min(b + 1 - j, p.block_size - in_block);
    fn(j, table[j / p.block_size] * block_stride + head_offset + in_block * head_dim, n);
    j += n;
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
  for_each_run(p, table, it.kv_head, key_lo, key_hi, [&](int32_t j, int64_t base, int32_t n) {
    dot_grid(s.q.data(), num_q, p.k_cache + base, n, head_dim, s.scores.data() + (j - key_lo),
             num_keys);
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
      for_each_run(p, table, it.kv_head, first, pos, [&](int32_t j, int64_t base, int32_t n) {
        axpy_many(sc + (j - first), p.v_cache + base, n, head_dim, out);
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
  auto run = [&p, list](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) attend(p, list[i]);
  };
  if (pool == nullptr || macs < kMinParallelMacs) {
    run(0, static_cast<int64_t>(items.size()));
  } else {
    // Items cost unequal amounts (causal prefill rows): claimed one by one.
    pool->parallel_for_dynamic(static_cast<int64_t>(items.size()), run, 1);
  }
}

void write_kv(const WriteKvParams& p) {
  const int64_t row_floats = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  const int64_t head_bytes = static_cast<int64_t>(p.head_dim) * sizeof(float);
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    const int64_t block = p.slot_mapping[t] / p.block_size;
    const int64_t offset = p.slot_mapping[t] % p.block_size;
    for (int32_t kvh = 0; kvh < p.num_kv_heads; ++kvh) {
      const int64_t dst = ((block * p.num_kv_heads + kvh) * p.block_size + offset) * p.head_dim;
      const int64_t src = t * row_floats + static_cast<int64_t>(kvh) * p.head_dim;
      std::memcpy(p.k_cache + dst, p.k + src, head_bytes);
      std::memcpy(p.v_cache + dst, p.v + src, head_bytes);
    }
  }
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
