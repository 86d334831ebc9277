// A step's inputs on the device. allocate_buffers sizes the activation,
// metadata and sampling buffers once at init; per eager step,
// enqueue_eager packs the BatchMetadata into the pinned metadata buffer
// (laid out by layout_for), moves it over in one copy, and points the
// step's StepArgs into it. check_batch_fits guards every copy.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend/batch_check.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/sampling.h"

namespace pvllm::cuda {
namespace {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
constexpr size_t kAlign = 256;

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// `freq_floats` is head_dim / 2 with dynamic RoPE, 0 otherwise.
MetaLayout layout_for(size_t num_tokens, size_t num_seqs, size_t max_blocks, size_t num_work,
                      size_t num_logits, size_t freq_floats) {
  MetaLayout layout;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += align_up(bytes);
    return at;
  };
  layout.input_ids = take(num_tokens * 4);
  layout.positions = take(num_tokens * 4);
  layout.slots = take(num_tokens * 8);
  layout.context_lens = take(num_seqs * 4);
  layout.freq_rows = take(freq_floats > 0 ? num_tokens * 4 : 0);
  layout.freq_table = take((num_seqs + 1) * freq_floats * 4);
  layout.block_tables = take(num_seqs * max_blocks * 4);
  layout.prefill_qs = take((num_seqs + 1) * 4);
  layout.work_items = take(num_work * 8);
  layout.logits_rows = take(num_logits * 4);
  layout.total = off;
  return layout;
}

}  // namespace

// The per-token and per-sequence inputs of a step, inside a device buffer
// laid out by `layout` (the eager metadata buffer or a graph's static one).
StepArgs step_inputs(const unsigned char* dev, const MetaLayout& layout) {
  StepArgs a;
  a.input_ids = reinterpret_cast<const int32_t*>(dev + layout.input_ids);
  a.positions = reinterpret_cast<const int32_t*>(dev + layout.positions);
  a.slots = reinterpret_cast<const int64_t*>(dev + layout.slots);
  a.context_lens = reinterpret_cast<const int32_t*>(dev + layout.context_lens);
  a.block_tables = reinterpret_cast<const int32_t*>(dev + layout.block_tables);
  return a;
}

// Points the step's RoPE at the constant table, or with dynamic scaling at
// the step's per-sequence table in the metadata buffer laid out by `layout`.
void CudaBackend::bind_rope(const unsigned char* dev, const MetaLayout& layout, StepArgs* a) const {
  if (dynamic_rope_) {
    a->inv_freq = reinterpret_cast<const float*>(dev + layout.freq_table);
    a->freq_rows = reinterpret_cast<const int32_t*>(dev + layout.freq_rows);
  } else {
    a->inv_freq = inv_freq_.as<float>();
    a->freq_rows = nullptr;
  }
}

// Dynamic RoPE: row 0 of `table` ([num_seqs + 1, head_dim / 2]) gets the
// base frequencies, and each sequence longer than the original context
// (seq_len = its highest position in this step + 1) a row of
// rope_inv_freq(cfg_, seq_len); shorter ones share row 0, which is what
// rope_inv_freq gives them. rows[t] ([padded_tokens]) names token t's row;
// padding rows past md.num_tokens use row 0.
void CudaBackend::fill_freq_tables(const BatchMetadata& md, int32_t padded_tokens, int32_t* rows,
                                   float* table) const {
  const size_t half = base_inv_freq_.size();
  std::copy(base_inv_freq_.begin(), base_inv_freq_.end(), table);
  int32_t next = 1;
  for (int32_t i = 0; i < md.num_seqs; ++i) {
    const int32_t first = md.query_start[i], last = md.query_start[i + 1];
    int64_t seq_len = 0;
    for (int32_t r = first; r < last; ++r) {
      seq_len = std::max<int64_t>(seq_len, int64_t{md.positions[r]} + 1);
    }
    int32_t row = 0;
    if (seq_len > cfg_.rope_scaling.original_max_position_embeddings) {
      const std::vector<float> f = rope_inv_freq(cfg_, seq_len);
      std::copy(f.begin(), f.end(), table + static_cast<size_t>(next) * half);
      row = next++;
    }
    std::fill(rows + first, rows + last, row);
  }
  std::fill(rows + md.num_tokens, rows + padded_tokens, 0);
}

Status CudaBackend::allocate_buffers() {
  const size_t hidden = static_cast<size_t>(cfg_.hidden_size);
  const size_t qd = static_cast<size_t>(cfg_.num_heads) * cfg_.head_dim;
  const size_t kvd = static_cast<size_t>(cfg_.num_kv_heads) * cfg_.head_dim;
  const size_t inter = static_cast<size_t>(cfg_.intermediate_size);
  const int32_t max_model_len =
      opt_.max_model_len > 0 ? opt_.max_model_len : cfg_.max_position_embeddings;
  if (max_model_len <= 0) {
    return InvalidArgument(
        "max_model_len is unknown: set it (the config has no "
        "max_position_embeddings)");
  }
  max_blocks_ = (max_model_len + opt_.block_size - 1) / opt_.block_size;

  // Graphs cover decode batches up to the bucket holding max_num_seqs.
  graph_max_batch_ = 0;
  if (opt_.enable_cuda_graphs != 0) {
    for (int32_t b : kGraphBuckets) {
      graph_max_batch_ = b;
      if (b >= opt_.max_num_seqs) break;
    }
  }
  max_tokens_ = std::max(opt_.max_num_batched_tokens, graph_max_batch_);
  max_seqs_ = std::max(std::min(opt_.max_num_seqs, max_tokens_), graph_max_batch_);
  max_logits_ = max_seqs_;
  const size_t t = static_cast<size_t>(max_tokens_);
  const size_t e = elem();

  PVLLM_RETURN_IF_ERROR(hidden_.allocate(t * hidden * e, "hidden"));
  PVLLM_RETURN_IF_ERROR(normed_.allocate(t * hidden * e, "normed"));
  PVLLM_RETURN_IF_ERROR(tmp_.allocate(t * hidden * e, "tmp"));
  PVLLM_RETURN_IF_ERROR(qkv_.allocate(t * (qd + 2 * kvd) * e, "qkv"));
  PVLLM_RETURN_IF_ERROR(attn_.allocate(t * qd * e, "attn"));
  PVLLM_RETURN_IF_ERROR(gate_up_.allocate(t * 2 * inter * e, "gate_up"));
  PVLLM_RETURN_IF_ERROR(act_.allocate(t * inter * e, "act"));
  const size_t num_logits = static_cast<size_t>(max_logits_);
  PVLLM_RETURN_IF_ERROR(gather_x_.allocate(num_logits * hidden * e, "gather_x"));
  PVLLM_RETURN_IF_ERROR(gather_r_.allocate(num_logits * hidden * e, "gather_r"));
  PVLLM_RETURN_IF_ERROR(logits_.allocate(
      num_logits * static_cast<size_t>(cfg_.vocab_size) * sizeof(float), "logits"));

  // Split-KV scratch: the largest over every decode batch size at the
  // longest context (the split count falls as the batch grows, so the
  // product is not monotonic).
  DecodeAttentionParams dp;
  dp.dtype = dtype_;
  dp.num_heads = cfg_.num_heads;
  dp.paged_kv.num_kv_heads = cfg_.num_kv_heads;
  dp.paged_kv.head_dim = cfg_.head_dim;
  dp.paged_kv.block_size = opt_.block_size;
  dp.paged_kv.max_blocks_per_seq = max_blocks_;
  dp.paged_kv.cache_dtype = kv_dtype_;
  dp.max_context_len = max_blocks_ * opt_.block_size;  // what the graphs plan for
  dp.sliding_window = cfg_.sliding_window;
  size_t ws = 0;
  for (int32_t s = 1; s <= max_seqs_; ++s) {
    dp.num_seqs = s;
    ws = std::max(ws, pvllm_cuda_decode_attention_workspace_bytes(dp));
  }
  PVLLM_RETURN_IF_ERROR(decode_ws_.allocate(ws, "decode workspace"));
  PVLLM_RETURN_IF_ERROR(cublas_ws_.allocate(kCublasWorkspaceBytes, "cuBLAS workspace"));

  // Work items: sum over chunks of ceil(q_len / 64) <= tokens / 64 + seqs.
  const size_t max_work = t / kPrefillQueryTile + static_cast<size_t>(max_seqs_) + 1;
  const MetaLayout eager =
      layout_for(t, static_cast<size_t>(max_seqs_), static_cast<size_t>(max_blocks_), max_work,
                 num_logits, freq_floats());
  PVLLM_RETURN_IF_ERROR(meta_host_.allocate(eager.total, "metadata"));
  PVLLM_RETURN_IF_ERROR(meta_dev_.allocate(eager.total, "metadata"));
  if (graph_max_batch_ > 0) {
    const size_t b = static_cast<size_t>(graph_max_batch_);
    graph_layout_ = layout_for(b, b, static_cast<size_t>(max_blocks_), 0, 0, freq_floats());
    PVLLM_RETURN_IF_ERROR(graph_host_.allocate(graph_layout_.total, "graph inputs"));
    PVLLM_RETURN_IF_ERROR(graph_dev_.allocate(graph_layout_.total, "graph inputs"));
  }
  // Sampling buffers for a full step of plain rows with logprobs; penalty
  // tokens and the penalized rows' workspace grow on demand.
  const size_t rows = static_cast<size_t>(max_seqs_);
  const size_t in_bytes = rows * 96 + 4096;
  const size_t out_bytes =
      rows * (sizeof(int32_t) + (kDeviceMaxTopLogprobs + 1) * sizeof(DeviceTokenLogprob)) + 256;
  PVLLM_RETURN_IF_ERROR(sample_in_host_.allocate(in_bytes, "sampling inputs"));
  PVLLM_RETURN_IF_ERROR(sample_in_dev_.allocate(in_bytes, "sampling inputs"));
  PVLLM_RETURN_IF_ERROR(sample_out_dev_.allocate(out_bytes, "sampled tokens"));
  PVLLM_RETURN_IF_ERROR(sample_out_host_.allocate(out_bytes, "sampled tokens"));
  return Status::Ok();
}

// What the host copies below rely on: the batch within the buffers, and
// core/backend's check of its consistency (positions, slots, block ids,
// token ids, logits rows).
Status CudaBackend::check_batch_fits(const BatchMetadata& md) const {
  const int32_t t = md.num_tokens, s = md.num_seqs;
  if (t <= 0 || s <= 0) return InvalidArgument("empty batch");
  if (t > max_tokens_ || s > max_seqs_ ||
      static_cast<int32_t>(md.logits_rows.size()) > max_logits_) {
    return InvalidArgument("batch of " + std::to_string(t) + " tokens, " + std::to_string(s) +
                           " sequences, " + std::to_string(md.logits_rows.size()) +
                           " logits rows exceeds the CUDA backend's buffers (" +
                           std::to_string(max_tokens_) + ", " + std::to_string(max_seqs_) + ", " +
                           std::to_string(max_logits_) + ")");
  }
  if (md.max_blocks_per_seq > max_blocks_) {
    return InvalidArgument("block tables of " + std::to_string(md.max_blocks_per_seq) +
                           " blocks exceed max_model_len's " + std::to_string(max_blocks_));
  }
  return check_batch(
      md, BatchLimits{num_blocks_, opt_.block_size, cfg_.vocab_size, cfg_.sliding_window});
}

Status CudaBackend::enqueue_eager(const BatchMetadata& md, int32_t num_decode) {
  const int32_t t = md.num_tokens, s = md.num_seqs;
  const int32_t mb = std::max(md.max_blocks_per_seq, 1);
  std::vector<int32_t> work;
  std::vector<int32_t> prefill_qs;
  if (num_decode < s) {
    const int32_t base = md.query_start[num_decode];
    for (int32_t i = num_decode; i <= s; ++i) prefill_qs.push_back(md.query_start[i] - base);
    work = plan_prefill_attention(prefill_qs.data(), md.context_lens.data() + num_decode,
                                  s - num_decode, cfg_.sliding_window);
  }
  const int32_t num_work = static_cast<int32_t>(work.size() / 2);
  const int32_t num_logits = static_cast<int32_t>(md.logits_rows.size());
  const MetaLayout layout = layout_for(t, s, mb, num_work, num_logits, freq_floats());
  if (layout.total > meta_host_.bytes()) return Internal("metadata exceeds its buffer");

  auto* h = meta_host_.as<unsigned char>();
  std::memcpy(h + layout.input_ids, md.input_ids.data(), t * 4);
  std::memcpy(h + layout.positions, md.positions.data(), t * 4);
  std::memcpy(h + layout.slots, md.slot_mapping.data(), t * 8);
  std::memcpy(h + layout.context_lens, md.context_lens.data(), s * 4);
  if (dynamic_rope_) {
    fill_freq_tables(md, t, reinterpret_cast<int32_t*>(h + layout.freq_rows),
                     reinterpret_cast<float*>(h + layout.freq_table));
  }
  if (md.max_blocks_per_seq > 0) {
    std::memcpy(h + layout.block_tables, md.block_tables.data(),
                static_cast<size_t>(s) * md.max_blocks_per_seq * 4);
  }
  std::memcpy(h + layout.prefill_qs, prefill_qs.data(), prefill_qs.size() * 4);
  std::memcpy(h + layout.work_items, work.data(), work.size() * 4);
  std::memcpy(h + layout.logits_rows, md.logits_rows.data(), md.logits_rows.size() * 4);
  PVLLM_CUDA_TRY(cudaMemcpyAsync(meta_dev_.get(), h, layout.total, cudaMemcpyHostToDevice, stream_),
                 "copying batch metadata");

  const auto* dev = meta_dev_.as<unsigned char>();
  StepArgs a = step_inputs(dev, layout);
  bind_rope(dev, layout, &a);
  a.max_blocks_per_seq = mb;
  a.num_tokens = t;
  a.num_seqs = s;
  a.num_decode = num_decode;
  for (int32_t i = 0; i < num_decode; ++i) {
    a.decode_max_context = std::max(a.decode_max_context, md.context_lens[i]);
  }
  a.prefill_qs = reinterpret_cast<const int32_t*>(dev + layout.prefill_qs);
  a.work_items = reinterpret_cast<const int32_t*>(dev + layout.work_items);
  a.num_work_items = num_work;
  a.logits_rows = reinterpret_cast<const int32_t*>(dev + layout.logits_rows);
  a.num_logits = num_logits;
  // With num_logits == 0 (a middle prompt chunk) there is still K/V to write.
  return run_model(a);
}

}  // namespace pvllm::cuda
