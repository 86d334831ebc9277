#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/ops.h"

#ifndef PVLLM_CPU_VARIANT
#error "PVLLM_CPU_VARIANT must name the variant's namespace"
#endif

// Compiled once per ISA variant (see isa.h), calling its own variant's
// reductions.
namespace pvllm::cpu::PVLLM_CPU_VARIANT {

void dot_many(const float* a, const float* rows, int64_t num_rows, int64_t n, float* out);
void axpy_many(const float* alpha, const float* rows, int64_t num_rows, int64_t n, float* y);

namespace {

// Which sequence owns each query row, from query_start.
std::vector<int32_t> seq_of_rows(const PagedAttentionParams& p) {
  std::vector<int32_t> seq(p.num_tokens, 0);
  for (int32_t s = 0; s < p.num_seqs; ++s) {
    for (int32_t r = p.query_start[s]; r < p.query_start[s + 1]; ++r) seq[r] = s;
  }
  return seq;
}

}  // namespace

void paged_attention(const PagedAttentionParams& p, ThreadPool* pool) {
  const std::vector<int32_t> seq_of = seq_of_rows(p);
  const int32_t group = p.num_heads / p.num_kv_heads;
  const int64_t head_dim = p.head_dim;
  const int64_t block_stride = static_cast<int64_t>(p.num_kv_heads) * p.block_size * head_dim;

  // One task per (row, kv head) serves the `group` query heads that share
  // it, so each K/V row is read once per group. For every query head the
  // arithmetic is the same as attending alone: scores over keys in
  // position order, then max, exp and sum, then the weighted sum of V.
  auto tasks = [&](int64_t begin, int64_t end) {
    std::vector<float> scores;  // [group, position + 1] of the current row
    for (int64_t task = begin; task < end; ++task) {
      const int32_t row = static_cast<int32_t>(task / p.num_kv_heads);
      const int32_t kvh = static_cast<int32_t>(task % p.num_kv_heads);
      const int32_t s = seq_of[row];
      const int32_t q_len = p.query_start[s + 1] - p.query_start[s];
      const int32_t pos = p.context_lens[s] - q_len + (row - p.query_start[s]);
      // Keys at positions [first, pos]: the whole prefix, or the window.
      const int32_t first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
      const int32_t num_keys = pos + 1 - first;
      const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
      const int64_t kv_head_offset = static_cast<int64_t>(kvh) * p.block_size * head_dim;
      const int32_t h0 = kvh * group;
      const float* q = p.q + (static_cast<int64_t>(row) * p.num_heads + h0) * head_dim;
      float* out = p.out + (static_cast<int64_t>(row) * p.num_heads + h0) * head_dim;
      // Calls fn(key index, K/V row offset of that block's first attended
      // key, count) for each block's run of attended keys, in position order.
      auto for_each_run = [&](auto&& fn) {
        for (int32_t j = first; j <= pos;) {
          const int32_t in_block = j % p.block_size;
          const int32_t n = std::min(pos + 1 - j, p.block_size - in_block);
          const int64_t base = table[j / p.block_size] * block_stride + kv_head_offset +
                               static_cast<int64_t>(in_block) * head_dim;
          fn(j - first, base, n);
          j += n;
        }
      };

      scores.resize(static_cast<size_t>(group) * num_keys);
      for_each_run([&](int32_t k0, int64_t base, int32_t n) {
        for (int32_t g = 0; g < group; ++g) {
          float* sc = scores.data() + static_cast<size_t>(g) * num_keys + k0;
          dot_many(q + g * head_dim, p.k_cache + base, n, head_dim, sc);
          for (int32_t j = 0; j < n; ++j) sc[j] *= p.scale;
        }
      });
      std::vector<float> inv_sums(group);
      for (int32_t g = 0; g < group; ++g) {
        float* sc = scores.data() + static_cast<size_t>(g) * num_keys;
        float max_score = -INFINITY;
        for (int32_t j = 0; j < num_keys; ++j) max_score = std::max(max_score, sc[j]);
        float sum = 0.0f;
        for (int32_t j = 0; j < num_keys; ++j) {
          sc[j] = std::exp(sc[j] - max_score);
          sum += sc[j];
        }
        inv_sums[g] = 1.0f / sum;
      }
      std::fill(out, out + group * head_dim, 0.0f);
      for_each_run([&](int32_t k0, int64_t base, int32_t n) {
        for (int32_t g = 0; g < group; ++g) {
          axpy_many(scores.data() + static_cast<size_t>(g) * num_keys + k0, p.v_cache + base, n,
                    head_dim, out + g * head_dim);
        }
      });
      for (int32_t g = 0; g < group; ++g) {
        for (int64_t d = 0; d < head_dim; ++d) out[g * head_dim + d] *= inv_sums[g];
      }
    }
  };
  const int64_t num_tasks = static_cast<int64_t>(p.num_tokens) * p.num_kv_heads;
  if (pool == nullptr) {
    tasks(0, num_tasks);
  } else {
    pool->parallel_for(num_tasks, tasks);
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
