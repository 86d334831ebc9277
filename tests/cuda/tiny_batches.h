// Shared by the CUDA backend suites (backend_test.cc,
// backend_features_test.cc): the two backends made for a small pool, a tiny
// scheduler that turns sequences into BatchMetadata with blocks handed out
// in order, a forward pass into host logits, and the comparisons of logits
// rows the suites make.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/backend_loader.h"
#include "core/backend/cuda_module_interface.h"
#include "core/model/model.h"
#include "kernels/cpu/cpu_backend.h"

namespace pvllm::cuda_test {

// The CPU backend over `num_blocks` blocks of `block_size`.
inline Status make_cpu_backend(const Model& model, int32_t block_size, int32_t num_blocks,
                               std::unique_ptr<Backend>* out,
                               KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto) {
  BackendOptions o;
  o.num_blocks = num_blocks;
  o.block_size = block_size;
  o.kv_cache_dtype = kv_cache_dtype;
  return create_cpu_backend(model, o, out);
}

// The CUDA backend (the module $PVLLM_CUDA_BACKEND names) in bf16 over
// `num_blocks` blocks, for batches of up to 256 tokens and 8 sequences,
// with or without decode graphs.
// dtype as CudaBackendOptions::dtype: 1 bf16 (the default here), 2 fp16, 3 fp32;
// kv_cache_dtype what the KV pool stores (auto: the activation dtype).
inline Status make_cuda_backend(const Model& model, int32_t block_size, int32_t num_blocks,
                                int32_t max_model_len, bool graphs, std::unique_ptr<Backend>* out,
                                int32_t dtype = 1,
                                KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto) {
  const CudaModule* module = nullptr;
  const Status s = CudaModule::get(&module);
  if (!s.ok()) return s;
  CudaBackendOptions o;
  o.block_size = block_size;
  o.num_blocks = num_blocks;
  o.dtype = dtype;
  o.kv_cache_dtype = static_cast<int32_t>(kv_cache_dtype);
  o.max_num_batched_tokens = 256;
  o.max_num_seqs = 8;
  o.max_model_len = max_model_len;
  o.enable_cuda_graphs = graphs ? 1 : 0;
  return module->create_backend(model, o, out);
}

// One sequence as the tiny scheduler sees it.
struct Seq {
  Seq(std::vector<int32_t> t) : tokens(std::move(t)) {}  // NOLINT: implicit, for brace lists
  std::vector<int32_t> tokens;
  int32_t num_computed = 0;
  std::vector<int32_t> blocks;
};

// n token ids in [1, vocab), fixed by seed.
inline std::vector<int32_t> prompt(int32_t n, int32_t seed, int32_t vocab) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(1 + (seed * 131 + i * 17) % (vocab - 1));
  return t;
}

// A batch feeding `num_new[i]` tokens of seqs[i] (decodes should come
// first, as the scheduler orders them). Allocates blocks from *next_block
// as needed; a row gets logits when its chunk reaches the end of its known
// tokens. With window > 0, block-table entries of blocks wholly before the
// window of a sequence's first row this step are -1, as the KV manager
// leaves them for sliding-window models.
inline BatchMetadata make_batch(std::vector<Seq*> seqs, std::vector<int32_t> num_new,
                                int32_t block_size, int32_t* next_block, int32_t window = 0) {
  BatchMetadata md;
  md.num_seqs = static_cast<int32_t>(seqs.size());
  md.query_start.push_back(0);
  std::vector<int32_t> window_start;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = *seqs[i];
    const int32_t end = s.num_computed + num_new[i];
    while (static_cast<int32_t>(s.blocks.size()) * block_size < end) {
      s.blocks.push_back((*next_block)++);
    }
    for (int32_t p = s.num_computed; p < end; ++p) {
      md.input_ids.push_back(s.tokens[p]);
      md.positions.push_back(p);
      md.slot_mapping.push_back(int64_t{s.blocks[p / block_size]} * block_size + p % block_size);
    }
    window_start.push_back(window > 0 ? std::max(0, s.num_computed - window + 1) : 0);
    md.query_start.push_back(static_cast<int32_t>(md.input_ids.size()));
    md.context_lens.push_back(end);
    if (end == static_cast<int32_t>(s.tokens.size())) {
      md.logits_rows.push_back(static_cast<int32_t>(md.input_ids.size()) - 1);
    }
    md.max_blocks_per_seq = std::max(md.max_blocks_per_seq, static_cast<int32_t>(s.blocks.size()));
  }
  md.num_tokens = static_cast<int32_t>(md.input_ids.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Seq* s = seqs[i];
    for (int32_t j = 0; j < md.max_blocks_per_seq; ++j) {
      const bool dropped = (j + 1) * block_size <= window_start[i];
      md.block_tables.push_back(
          j < static_cast<int32_t>(s->blocks.size()) && !dropped ? s->blocks[j] : -1);
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->num_computed += num_new[i];
  return md;
}

// The logits of md's logits rows, [num_logits, vocab].
inline std::vector<float> run(Backend* b, const BatchMetadata& md, int32_t vocab) {
  std::vector<float> logits(md.logits_rows.size() * static_cast<size_t>(vocab));
  const Status s = b->forward(md, logits.data());
  EXPECT_TRUE(s.ok()) << b->name() << ": " << s.message();
  return logits;
}

// Row-wise: |a - b| relative to max|ref| of the row; returns the worst ratio.
inline float max_rel_error(const std::vector<float>& ref, const std::vector<float>& got,
                           int32_t vocab) {
  EXPECT_EQ(ref.size(), got.size());
  float worst = 0.0f;
  for (size_t r = 0; r * vocab < ref.size(); ++r) {
    float scale = 0.0f, err = 0.0f;
    for (int32_t v = 0; v < vocab; ++v) {
      const size_t i = r * vocab + v;
      EXPECT_TRUE(std::isfinite(got[i])) << "row " << r << " token " << v;
      scale = std::max(scale, std::fabs(ref[i]));
      err = std::max(err, std::fabs(ref[i] - got[i]));
    }
    worst = std::max(worst, err / std::max(scale, 1e-6f));
  }
  return worst;
}

// argmax of row r, and its gap to the runner-up relative to the row's
// largest |logit|.
inline std::pair<int32_t, float> top(const std::vector<float>& logits, size_t r, int32_t vocab) {
  const float* row = logits.data() + r * vocab;
  int32_t best = 0;
  float scale = 0.0f;
  for (int32_t v = 0; v < vocab; ++v) {
    if (row[v] > row[best]) best = v;
    scale = std::max(scale, std::fabs(row[v]));
  }
  float second = -INFINITY;
  for (int32_t v = 0; v < vocab; ++v) {
    if (v != best) second = std::max(second, row[v]);
  }
  return {best, (row[best] - second) / std::max(scale, 1e-6f)};
}

}  // namespace pvllm::cuda_test
