#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "core/base/fault_injection.h"
#include "kernels/cpu/isa.h"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "core/backend/batch_check.h"
#include "core/backend/registry.h"
#include "core/quant/dequantize.h"
#include "kernels/cpu/host_buffer.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm {
namespace {

Status check_shape(const Tensor& t, std::vector<int64_t> shape, const std::string& what,
                   Layout layout = Layout::kRowMajor) {
  if (t.empty() || t.shape != shape || t.layout != layout) {
    std::string want;
    for (int64_t d : shape) {
      if (!want.empty()) want += "x";
      want += std::to_string(d);
    }
    return CorruptModel("cpu backend: weight " + what + " (" + t.name + ") is missing or not " +
                        want + (layout == Layout::kPanels16 ? " in panels" : ""));
  }
  return Status::Ok();
}

Status check_model(const Model& model) {
  const ModelConfig& c = model.config;
  if (c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.head_dim <= 0 || c.vocab_size <= 0 ||
      c.num_heads % c.num_kv_heads != 0 || c.head_dim % 2 != 0) {
    return CorruptModel(
        "cpu backend: model config has non-positive sizes, kv heads that do "
        "not divide heads, or an odd head_dim");
  }
  const ModelWeights& w = model.weights;
  if (static_cast<int32_t>(w.layers.size()) != c.num_layers) {
    return CorruptModel("cpu backend: model has " + std::to_string(w.layers.size()) +
                        " layers of weights, config says " + std::to_string(c.num_layers));
  }
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  const int64_t inter = c.intermediate_size;
  PVLLM_RETURN_IF_ERROR(check_shape(w.embed, {c.vocab_size, hidden}, "embed"));
  PVLLM_RETURN_IF_ERROR(check_shape(w.final_norm, {hidden}, "final_norm"));
  if (!w.lm_head.empty()) {
    PVLLM_RETURN_IF_ERROR(check_shape(w.lm_head, {c.vocab_size, hidden}, "lm_head"));
  }
  const bool packed = w.is_packed();
  if (packed) {
    if (static_cast<int32_t>(w.packed.size()) != c.num_layers) {
      return CorruptModel("cpu backend: model has " + std::to_string(w.packed.size()) +
                          " layers of packed weights, config says " + std::to_string(c.num_layers));
    }
    constexpr Layout kP = Layout::kPanels16;
    PVLLM_RETURN_IF_ERROR(check_shape(w.packed_lm_head, {c.vocab_size, hidden}, "lm_head", kP));
  }
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    const std::string at = " of layer " + std::to_string(l);
    PVLLM_RETURN_IF_ERROR(check_shape(lw.attn_norm, {hidden}, "attn_norm" + at));
    PVLLM_RETURN_IF_ERROR(check_shape(lw.ffn_norm, {hidden}, "ffn_norm" + at));
    if (packed) {
      constexpr Layout kP = Layout::kPanels16;
      const PackedLayerWeights& pw = w.packed[l];
      PVLLM_RETURN_IF_ERROR(check_shape(pw.qkv, {q_dim + 2 * kv_dim, hidden}, "qkv" + at, kP));
      PVLLM_RETURN_IF_ERROR(check_shape(pw.wo, {hidden, q_dim}, "wo" + at, kP));
      PVLLM_RETURN_IF_ERROR(check_shape(pw.gate_up, {2 * inter, hidden}, "gate_up" + at, kP));
      PVLLM_RETURN_IF_ERROR(check_shape(pw.down, {hidden, inter}, "down" + at, kP));
    } else {
      PVLLM_RETURN_IF_ERROR(check_shape(lw.wq, {q_dim, hidden}, "wq" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.wk, {kv_dim, hidden}, "wk" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.wv, {kv_dim, hidden}, "wv" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.wo, {hidden, q_dim}, "wo" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.w_gate, {inter, hidden}, "w_gate" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.w_up, {inter, hidden}, "w_up" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.w_down, {hidden, inter}, "w_down" + at));
    }
    if (c.qkv_bias) {
      PVLLM_RETURN_IF_ERROR(check_shape(lw.bq, {q_dim}, "bq" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.bk, {kv_dim}, "bk" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.bv, {kv_dim}, "bv" + at));
    }
    if (c.o_bias) PVLLM_RETURN_IF_ERROR(check_shape(lw.bo, {hidden}, "bo" + at));
    if (c.qk_norm) {
      PVLLM_RETURN_IF_ERROR(check_shape(lw.q_norm, {c.head_dim}, "q_norm" + at));
      PVLLM_RETURN_IF_ERROR(check_shape(lw.k_norm, {c.head_dim}, "k_norm" + at));
    }
  }
  return Status::Ok();
}

// Bytes of RAM on this host; the address-space size where that is unknown.
uint64_t physical_memory_bytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
#endif
  return std::numeric_limits<size_t>::max();
}

// A K or V pool of one layer, or the swap space, as bytes (allocate_host
// aligns it to 64).
uint8_t* kv_bytes(const cpu::HostBuffer& b) { return reinterpret_cast<uint8_t*>(b.get()); }

// The tensor's values as fp32; empty for an absent (optional) tensor.
std::vector<float> to_floats(const Tensor& t) {
  if (t.empty()) return {};
  std::vector<float> out(static_cast<size_t>(t.numel()));
  quant::tensor_to_floats(t, 0, t.numel(), out.data());
  return out;
}

// forward() reuses member scratch buffers and the K/V pool, so one thread
// at a time drives a backend (the engine's step loop does).
class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const BackendOptions& options)
      : model_(model),
        config_(model.config),
        num_blocks_(options.num_blocks),
        block_size_(options.block_size),
        kv_dtype_(options.kv_cache_dtype),
        pool_(options.num_threads) {}

  // Allocates the K/V pool and converts the norm weights; OutOfMemory if
  // the pool does not fit.
  Status init();

  // "cpu (avx2)": the kernels' instruction-set variant shows in the stats.
  std::string name() const override {
    return std::string("cpu (") + cpu::cpu_isa_name(cpu::active_cpu_isa()) + ")";
  }
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override;
  Status forward(const BatchMetadata& md, float* logits) override;
  Status copy_blocks(const std::vector<BlockCopy>& copies) override;
  Status reserve_swap_space(int64_t bytes, int32_t* num_blocks) override;
  Status swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection direction) override;
  PreemptionCosts preemption_costs() const override;
  int32_t num_blocks() const override { return num_blocks_; }
  int32_t block_size() const override { return block_size_; }

 private:
  Status pack_matrices();
  void release_copied(const cpu::Linear& l) const;
  Status validate(const BatchMetadata& md, const float* logits) const;
  Status run_layer(int32_t layer, const BatchMetadata& md);
  void embed(const BatchMetadata& md);
  // fn(t0, t1) over ranges of [0, n) tokens, on the pool when each token
  // carries enough work (work_per_token: element operations).
  template <typename Fn>
  void per_tokens(int64_t n, int64_t work_per_token, Fn&& fn);
  void fill_rope_tables(const BatchMetadata& md);

  const Model& model_;
  const ModelConfig& config_;
  int32_t num_blocks_;
  int32_t block_size_;
  KvCacheDtype kv_dtype_;  // resolved by create_cpu_backend: kF32, kF16, kBF16 or kInt8
  cpu::ThreadPool pool_;

  std::vector<float> inv_freq_;                // [head_dim / 2]
  std::vector<std::vector<float>> attn_norm_;  // [num_layers][hidden]
  std::vector<std::vector<float>> ffn_norm_;   // [num_layers][hidden]
  // Optional per-layer vectors, empty unless the config asks for them.
  struct LayerExtras {
    std::vector<float> bq, bk, bv, bo;  // projection biases
    std::vector<float> q_norm, k_norm;  // [head_dim] per-head RMSNorm weights
  };
  std::vector<LayerExtras> extras_;  // [num_layers]
  std::vector<float> final_norm_;    // [hidden]
  // The projections as the GEMMs read them (linear.h): plain weights
  // repacked into panels, quantized ones in place; q/k/v and gate/up each
  // stacked into one matrix.
  struct LayerMatrices {
    cpu::Linear qkv;      // [q_dim + 2 * kv_dim, hidden]
    cpu::Linear wo;       // [hidden, q_dim]
    cpu::Linear gate_up;  // [2 * intermediate, hidden]
    cpu::Linear down;     // [hidden, intermediate]
  };
  std::vector<LayerMatrices> matrices_;  // [num_layers]
  cpu::Linear lm_head_;                  // from embed when tied and no lm_head is given

  size_t block_bytes_ = 0;  // bytes of one block of one layer's K (or V)
  // Per layer: [num_blocks][block_bytes_] as paged_attention.h lays them out.
  std::vector<cpu::HostBuffer> k_cache_;
  std::vector<cpu::HostBuffer> v_cache_;
  // The swap space: [num_swap_blocks][num_layers][K, V][block_bytes_], the
  // blocks as stored.
  cpu::HostBuffer swap_;
  int32_t num_swap_blocks_ = 0;

  // Scratch for one forward, n = md.num_tokens rows each.
  std::vector<float> x_;        // [n, hidden] residual stream
  std::vector<float> xb_;       // [n, hidden]
  std::vector<float> qkv_;      // [n, (num_heads + 2 * num_kv_heads) * head_dim]
  std::vector<float> q_;        // [n, num_heads * head_dim]
  std::vector<float> k_;        // [n, num_kv_heads * head_dim]
  std::vector<float> v_;        // [n, num_kv_heads * head_dim]
  std::vector<float> att_;      // [n, num_heads * head_dim]
  std::vector<float> gate_up_;  // [n, 2 * intermediate]
  std::vector<float> gate_;     // [n, intermediate]
  std::vector<float> cos_;      // [n, head_dim / 2]
  std::vector<float> sin_;      // [n, head_dim / 2]
  std::vector<float> final_;    // [num_logits, hidden]
  std::vector<float> logits_;   // [num_logits, vocab] for forward_sample
};

Status CpuBackend::init() {
  const ModelConfig& c = config_;
  inv_freq_ = rope_inv_freq(c);
  if (static_cast<int32_t>(inv_freq_.size()) != c.head_dim / 2) {
    return Internal("cpu backend: rope_inv_freq returned " + std::to_string(inv_freq_.size()) +
                    " frequencies for head_dim " + std::to_string(c.head_dim));
  }
  for (const LayerWeights& lw : model_.weights.layers) {
    attn_norm_.push_back(to_floats(lw.attn_norm));
    ffn_norm_.push_back(to_floats(lw.ffn_norm));
    LayerExtras e;
    if (c.qkv_bias) {
      e.bq = to_floats(lw.bq);
      e.bk = to_floats(lw.bk);
      e.bv = to_floats(lw.bv);
    }
    if (c.o_bias) e.bo = to_floats(lw.bo);
    if (c.qk_norm) {
      e.q_norm = to_floats(lw.q_norm);
      e.k_norm = to_floats(lw.k_norm);
    }
    extras_.push_back(std::move(e));
  }
  final_norm_ = to_floats(model_.weights.final_norm);
  PVLLM_RETURN_IF_ERROR(pack_matrices());

  block_bytes_ =
      static_cast<size_t>(c.num_kv_heads) * kv_head_block_bytes(kv_dtype_, block_size_, c.head_dim);
  // The whole pool is used sooner or later, so one larger than the host's
  // memory is refused now rather than left to overcommit and the OOM killer.
  const uint64_t block_bytes = kv_bytes_per_block(c, block_size_, kv_dtype_);
  const uint64_t limit =
      std::min<uint64_t>(physical_memory_bytes(), std::numeric_limits<size_t>::max() / 2);
  if (static_cast<uint64_t>(num_blocks_) > limit / block_bytes) {
    return OutOfMemory("cpu backend: a K/V pool of " + std::to_string(num_blocks_) + " blocks (" +
                       std::to_string(block_bytes) + " bytes each) exceeds this host's memory");
  }
  const size_t layer_bytes = static_cast<size_t>(num_blocks_) * block_bytes_;
  // Reserved, not touched: attention only reads slots written before, so a
  // block's pages arrive when its first token is written (startup does not
  // pay for the whole pool).
  bool allocated = true;
  for (int32_t l = 0; l < c.num_layers && allocated; ++l) {
    k_cache_.push_back(cpu::allocate_host(layer_bytes));
    v_cache_.push_back(cpu::allocate_host(layer_bytes));
    allocated = k_cache_.back() != nullptr && v_cache_.back() != nullptr;
  }
  if (!allocated) {
    k_cache_.clear();
    v_cache_.clear();
    return OutOfMemory("cpu backend: cannot allocate the K/V pool (" +
                       std::to_string(kv_bytes_per_block(c, block_size_, kv_dtype_) * num_blocks_) +
                       " bytes for " + std::to_string(num_blocks_) + " blocks)");
  }
  return Status::Ok();
}

// From a packed .pvllm file the matrices are views of its mapping;
// otherwise packed here, once.
Status CpuBackend::pack_matrices() {
  using cpu::Linear;
  const ModelWeights& w = model_.weights;
  if (w.is_packed()) {
    for (const PackedLayerWeights& pw : w.packed) {
      LayerMatrices m;
      PVLLM_RETURN_IF_ERROR(Linear::view_packed(pw.qkv, &m.qkv));
      PVLLM_RETURN_IF_ERROR(Linear::view_packed(pw.wo, &m.wo));
      PVLLM_RETURN_IF_ERROR(Linear::view_packed(pw.gate_up, &m.gate_up));
      PVLLM_RETURN_IF_ERROR(Linear::view_packed(pw.down, &m.down));
      matrices_.push_back(std::move(m));
    }
    return Linear::view_packed(w.packed_lm_head, &lm_head_);
  }
  for (const LayerWeights& lw : model_.weights.layers) {
    LayerMatrices m;
    const Tensor* qkv[] = {&lw.wq, &lw.wk, &lw.wv};
    const Tensor* wo[] = {&lw.wo};
    const Tensor* gate_up[] = {&lw.w_gate, &lw.w_up};
    const Tensor* down[] = {&lw.w_down};
    PVLLM_RETURN_IF_ERROR(Linear::make(qkv, &pool_, &m.qkv));
    PVLLM_RETURN_IF_ERROR(Linear::make(wo, &pool_, &m.wo));
    PVLLM_RETURN_IF_ERROR(Linear::make(gate_up, &pool_, &m.gate_up));
    PVLLM_RETURN_IF_ERROR(Linear::make(down, &pool_, &m.down));
    for (const Linear* l : {&m.qkv, &m.wo, &m.gate_up, &m.down}) release_copied(*l);
    matrices_.push_back(std::move(m));
  }
  const Tensor* lm_head[] = {w.lm_head.empty() ? &w.embed : &w.lm_head};
  PVLLM_RETURN_IF_ERROR(Linear::make(lm_head, &pool_, &lm_head_));
  release_copied(lm_head_);
  return Status::Ok();
}

// The file pages of what was copied leave this process, so weights are
// resident once (a tied embedding's rows come back one by one as the
// lookups read them).
void CpuBackend::release_copied(const cpu::Linear& l) const {
  for (const Tensor* t : l.copied()) model_.release_pages(*t);
}

Status CpuBackend::validate(const BatchMetadata& md, const float* logits) const {
  PVLLM_RETURN_IF_ERROR(check_batch(
      md, BatchLimits{num_blocks_, block_size_, config_.vocab_size, config_.sliding_window}));
  if (logits == nullptr && !md.logits_rows.empty()) {
    return InvalidArgument("forward: logits is NULL but logits_rows is not empty");
  }
  return Status::Ok();
}

template <typename Fn>
void CpuBackend::per_tokens(int64_t n, int64_t work_per_token, Fn&& fn) {
  // Enough element operations per thread that sharing the rows pays;
  // decode steps of one or a few tokens run inline.
  constexpr int64_t kMinWorkPerThread = int64_t{1} << 14;
  pool_.parallel_for(
      n, fn, std::max<int64_t>(1, kMinWorkPerThread / std::max<int64_t>(1, work_per_token)));
}

Status CpuBackend::run_layer(int32_t layer, const BatchMetadata& md) {
  const ModelConfig& c = config_;
  const int64_t n = md.num_tokens;
  const int64_t hidden = c.hidden_size;
  const int64_t head_dim = c.head_dim;
  const int64_t half = head_dim / 2;
  const float eps = c.rms_norm_eps;

  const LayerMatrices& m = matrices_[layer];
  const LayerExtras& e = extras_[layer];
  const int64_t q_dim = int64_t{c.num_heads} * head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  const int64_t inter = c.intermediate_size;

  // Between the GEMMs, the row-wise steps run over ranges of tokens.
  per_tokens(n, hidden, [&](int64_t t0, int64_t t1) {
    cpu::rmsnorm(x_.data() + t0 * hidden, attn_norm_[layer].data(), t1 - t0, hidden, eps,
                 xb_.data() + t0 * hidden);
  });
  PVLLM_RETURN_IF_ERROR(m.qkv.apply(&pool_, xb_.data(), n, qkv_.data()));
  per_tokens(n, 2 * qkv_dim, [&](int64_t t0, int64_t t1) {
    const int64_t rows = t1 - t0;
    float* q = q_.data() + t0 * q_dim;
    float* k = k_.data() + t0 * kv_dim;
    float* v = v_.data() + t0 * kv_dim;
    for (int64_t t = 0; t < rows; ++t) {
      const float* row = qkv_.data() + (t0 + t) * qkv_dim;
      std::memcpy(q + t * q_dim, row, q_dim * sizeof(float));
      std::memcpy(k + t * kv_dim, row + q_dim, kv_dim * sizeof(float));
      std::memcpy(v + t * kv_dim, row + q_dim + kv_dim, kv_dim * sizeof(float));
    }
    if (c.qkv_bias) {
      cpu::add_bias(q, rows, q_dim, e.bq.data());
      cpu::add_bias(k, rows, kv_dim, e.bk.data());
      cpu::add_bias(v, rows, kv_dim, e.bv.data());
    }
    if (c.qk_norm) {  // each head of q and k normalised on its own, before RoPE
      cpu::rmsnorm(q, e.q_norm.data(), rows * c.num_heads, head_dim, eps, q);
      cpu::rmsnorm(k, e.k_norm.data(), rows * c.num_kv_heads, head_dim, eps, k);
    }
    const float* cos = cos_.data() + t0 * half;
    const float* sin = sin_.data() + t0 * half;
    cpu::rope(q, rows, c.num_heads, head_dim, cos, sin, c.rope_style);
    cpu::rope(k, rows, c.num_kv_heads, head_dim, cos, sin, c.rope_style);

    cpu::WriteKvParams w;  // each row its own slot: ranges write disjoint slots
    w.k = k;
    w.v = v;
    w.slot_mapping = md.slot_mapping.data() + t0;
    w.k_cache = kv_bytes(k_cache_[layer]);
    w.v_cache = kv_bytes(v_cache_[layer]);
    w.kv_dtype = kv_dtype_;
    w.num_tokens = static_cast<int32_t>(rows);
    w.num_kv_heads = c.num_kv_heads;
    w.head_dim = c.head_dim;
    w.block_size = block_size_;
    cpu::write_kv(w);
  });

  cpu::PagedAttentionParams a;
  a.q = q_.data();
  a.out = att_.data();
  a.k_cache = kv_bytes(k_cache_[layer]);
  a.v_cache = kv_bytes(v_cache_[layer]);
  a.kv_dtype = kv_dtype_;
  a.query_start = md.query_start.data();
  a.context_lens = md.context_lens.data();
  a.block_tables = md.block_tables.data();
  a.num_tokens = md.num_tokens;
  a.num_seqs = md.num_seqs;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim;
  a.block_size = block_size_;
  a.max_blocks_per_seq = md.max_blocks_per_seq;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  a.sliding_window = c.sliding_window;
  cpu::paged_attention(a, &pool_);

  PVLLM_RETURN_IF_ERROR(m.wo.apply(&pool_, att_.data(), n, xb_.data()));
  per_tokens(n, 3 * hidden, [&](int64_t t0, int64_t t1) {
    float* x = x_.data() + t0 * hidden;
    float* xb = xb_.data() + t0 * hidden;
    if (c.o_bias) cpu::add_bias(xb, t1 - t0, hidden, e.bo.data());
    for (int64_t i = 0; i < (t1 - t0) * hidden; ++i) x[i] += xb[i];
    cpu::rmsnorm(x, ffn_norm_[layer].data(), t1 - t0, hidden, eps, xb);
  });
  PVLLM_RETURN_IF_ERROR(m.gate_up.apply(&pool_, xb_.data(), n, gate_up_.data()));
  per_tokens(n, 8 * inter, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* row = gate_up_.data() + t * 2 * inter;
      cpu::silu_mul(row, row + inter, inter, gate_.data() + t * inter);
    }
  });
  PVLLM_RETURN_IF_ERROR(m.down.apply(&pool_, gate_.data(), n, xb_.data()));
  per_tokens(n, hidden, [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * hidden; i < t1 * hidden; ++i) x_[i] += xb_[i];
  });
  return Status::Ok();
}

// The rows of the embedding table; a quantized table a row at a time.
void CpuBackend::embed(const BatchMetadata& md) {
  const Tensor& table = model_.weights.embed;
  const int64_t hidden = config_.hidden_size;
  const int64_t n = md.num_tokens;
  if (!dtype_is_quantized(table.dtype)) {
    cpu::embedding(table, md.input_ids.data(), n, hidden, x_.data());
    return;
  }
  per_tokens(n, 4 * hidden, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      quant::tensor_to_floats(table, int64_t{md.input_ids[t]} * hidden, hidden,
                              x_.data() + t * hidden);
    }
  });
}

Status CpuBackend::forward(const BatchMetadata& md, float* logits) {
  PVLLM_RETURN_IF_ERROR(validate(md, logits));
  const ModelConfig& c = config_;
  const int64_t n = md.num_tokens;
  const int64_t num_logits = static_cast<int64_t>(md.logits_rows.size());
  const int64_t hidden = c.hidden_size;
  const int64_t half = c.head_dim / 2;
  if (n == 0) return Status::Ok();
  try {
    if (fault::should_fail(fault::Site::kHostAlloc)) throw std::bad_alloc();
    x_.resize(n * hidden);
    xb_.resize(n * hidden);
    qkv_.resize(n * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim);
    q_.resize(n * c.num_heads * c.head_dim);
    k_.resize(n * c.num_kv_heads * c.head_dim);
    v_.resize(n * c.num_kv_heads * c.head_dim);
    att_.resize(n * c.num_heads * c.head_dim);
    gate_up_.resize(n * 2 * c.intermediate_size);
    gate_.resize(n * c.intermediate_size);
    cos_.resize(n * half);
    sin_.resize(n * half);
    final_.resize(num_logits * hidden);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("cpu backend: cannot allocate activations for " + std::to_string(n) +
                       " tokens");
  }

  embed(md);
  fill_rope_tables(md);
  for (int32_t l = 0; l < c.num_layers; ++l) PVLLM_RETURN_IF_ERROR(run_layer(l, md));

  // Only the rows that sample need the final norm and the vocabulary projection.
  for (int64_t i = 0; i < num_logits; ++i) {
    std::memcpy(final_.data() + i * hidden, x_.data() + md.logits_rows[i] * hidden,
                hidden * sizeof(float));
  }
  cpu::rmsnorm(final_.data(), final_norm_.data(), num_logits, hidden, c.rms_norm_eps,
               final_.data());
  return lm_head_.apply(&pool_, final_.data(), num_logits, logits);
}

// cos/sin of every row. With dynamic scaling the frequencies depend on the
// sequence's length (its highest position in this step + 1, which is its
// context length), so each sequence's rows get their own table.
void CpuBackend::fill_rope_tables(const BatchMetadata& md) {
  const int64_t half = config_.head_dim / 2;
  if (!rope_depends_on_length(config_)) {
    cpu::rope_cos_sin(md.positions.data(), md.num_tokens, inv_freq_.data(), half, cos_.data(),
                      sin_.data());
    return;
  }
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    const int32_t begin = md.query_start[s];
    const int32_t rows = md.query_start[s + 1] - begin;
    if (rows == 0) continue;
    const std::vector<float> inv_freq = rope_inv_freq(config_, md.context_lens[s]);
    cpu::rope_cos_sin(md.positions.data() + begin, rows, inv_freq.data(), half,
                      cos_.data() + begin * half, sin_.data() + begin * half);
  }
}

Status CpuBackend::forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                                  std::vector<SampleResult>* out) {
  const auto num_logits = static_cast<int32_t>(md.logits_rows.size());
  const int32_t vocab = config_.vocab_size;
  PVLLM_RETURN_IF_ERROR(validate_sample_rows(rows, num_logits));
  try {
    if (fault::should_fail(fault::Site::kHostAlloc)) throw std::bad_alloc();
    logits_.resize(static_cast<size_t>(num_logits) * vocab);
    out->assign(rows.size(), SampleResult{});
  } catch (const std::bad_alloc&) {
    return OutOfMemory("cpu backend: cannot allocate logits for " + std::to_string(num_logits) +
                       " rows");
  }
  PVLLM_RETURN_IF_ERROR(forward(md, logits_.data()));
  // Rows are independent and a draw depends only on its own row, so they
  // spread over the pool; a chunk holds about 64k logits so that small
  // vocabularies stay on the calling thread. A worker must not throw, so an
  // allocation failure inside the sampler is caught and reported here.
  std::atomic<bool> out_of_memory{false};
  pool_.parallel_for(
      static_cast<int64_t>(rows.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          try {
            (*out)[i] = sample_row(logits_.data(), vocab, rows[i]);
          } catch (const std::bad_alloc&) {
            out_of_memory.store(true, std::memory_order_relaxed);
          }
        }
      },
      std::max<int64_t>(1, (int64_t{1} << 16) / vocab));
  if (out_of_memory.load()) return OutOfMemory("cpu backend: out of memory while sampling");
  return Status::Ok();
}

Status CpuBackend::reserve_swap_space(int64_t bytes, int32_t* out_blocks) {
  if (bytes < 0) return InvalidArgument("cpu backend: a negative swap space");
  const size_t block_bytes = kv_bytes_per_block(config_, block_size_, kv_dtype_);
  const int32_t num_blocks = swap_pool_blocks(bytes, block_bytes, num_blocks_, block_size_);
  if (static_cast<uint64_t>(num_blocks) > physical_memory_bytes() / block_bytes) {
    return OutOfMemory("cpu backend: a swap space of " + std::to_string(num_blocks) +
                       " blocks exceeds this host's memory");
  }
  // Reserved, not touched: a block's pages arrive with its first swap-out.
  swap_ = cpu::allocate_host(std::max<size_t>(1, static_cast<size_t>(num_blocks) * block_bytes));
  if (swap_ == nullptr) {
    return OutOfMemory("cpu backend: cannot allocate a swap space of " +
                       std::to_string(num_blocks) + " blocks");
  }
  num_swap_blocks_ = num_blocks;
  *out_blocks = num_blocks;
  return Status::Ok();
}

Status CpuBackend::swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection direction) {
  const bool out = direction == SwapDirection::kOut;
  for (const BlockCopy& cp : copies) {
    const int32_t pool = out ? cp.src : cp.dst;
    const int32_t swap = out ? cp.dst : cp.src;
    if (pool < 0 || pool >= num_blocks_ || swap < 0 || swap >= num_swap_blocks_) {
      return InvalidArgument("swap_blocks: block " + std::to_string(cp.src) + " -> " +
                             std::to_string(cp.dst) + " is outside the pool of " +
                             std::to_string(num_blocks_) + " or the swap space of " +
                             std::to_string(num_swap_blocks_));
    }
  }
  const size_t bytes = block_bytes_;
  uint8_t* swap_base = kv_bytes(swap_);
  for (const BlockCopy& cp : copies) {
    const auto pool = static_cast<size_t>(out ? cp.src : cp.dst);
    uint8_t* swapped = swap_base + static_cast<size_t>(out ? cp.dst : cp.src) * 2 *
                                       static_cast<size_t>(config_.num_layers) * bytes;
    for (int32_t l = 0; l < config_.num_layers; ++l) {
      uint8_t* k = kv_bytes(k_cache_[l]) + pool * bytes;
      uint8_t* v = kv_bytes(v_cache_[l]) + pool * bytes;
      uint8_t* sk = swapped + static_cast<size_t>(2 * l) * bytes;
      uint8_t* sv = sk + bytes;
      std::memcpy(out ? sk : k, out ? k : sk, bytes);
      std::memcpy(out ? sv : v, out ? v : sv, bytes);
    }
  }
  return Status::Ok();
}

// Rough figures for this host: 50 GFLOP/s for recomputing (two FLOPs per
// weight per token) and 10 GB/s for copying a block out and back.
PreemptionCosts CpuBackend::preemption_costs() const {
  const double flops_per_token = weight_flops_per_token(config_);
  const double block_bytes =
      static_cast<double>(kv_bytes_per_block(config_, block_size_, kv_dtype_));
  return {flops_per_token / 50e9, 2.0 * block_bytes / 10e9, static_cast<size_t>(block_bytes)};
}

Status CpuBackend::copy_blocks(const std::vector<BlockCopy>& copies) {
  for (const BlockCopy& cp : copies) {
    if (cp.src < 0 || cp.src >= num_blocks_ || cp.dst < 0 || cp.dst >= num_blocks_) {
      return InvalidArgument("copy_blocks: block " + std::to_string(cp.src) + " -> " +
                             std::to_string(cp.dst) + " is outside the pool of " +
                             std::to_string(num_blocks_));
    }
  }
  const size_t bytes = block_bytes_;
  for (const BlockCopy& cp : copies) {
    if (cp.src == cp.dst) continue;
    const auto src = static_cast<size_t>(cp.src) * bytes;
    const auto dst = static_cast<size_t>(cp.dst) * bytes;
    for (int32_t l = 0; l < config_.num_layers; ++l) {
      std::memcpy(kv_bytes(k_cache_[l]) + dst, kv_bytes(k_cache_[l]) + src, bytes);
      std::memcpy(kv_bytes(v_cache_[l]) + dst, kv_bytes(v_cache_[l]) + src, bytes);
    }
  }
  return Status::Ok();
}

}  // namespace

Status create_cpu_backend(const Model& model, const BackendOptions& options,
                          std::unique_ptr<Backend>* out) {
  if (out == nullptr) return InvalidArgument("create_cpu_backend: out is NULL");
  if (options.num_blocks <= 0 || options.block_size <= 0 || options.num_threads < 0) {
    return InvalidArgument(
        "create_cpu_backend: num_blocks and block_size must be positive, "
        "num_threads non-negative");
  }
  // A PVLLM_CPU_ISA this CPU cannot run, or a CPU below the oldest
  // variant, is refused here, before any kernel runs.
  PVLLM_RETURN_IF_ERROR(cpu::cpu_isa_status());
  PVLLM_RETURN_IF_ERROR(check_model(model));
  BackendOptions resolved = options;
  PVLLM_RETURN_IF_ERROR(host_kv_cache_dtype(options.kv_cache_dtype, &resolved.kv_cache_dtype));
  std::unique_ptr<CpuBackend> backend;
  try {
    backend = std::make_unique<CpuBackend>(model, resolved);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("create_cpu_backend: out of memory");
  } catch (const std::exception& e) {
    return Internal(std::string("create_cpu_backend: cannot start the thread pool: ") + e.what());
  }
  PVLLM_RETURN_IF_ERROR(backend->init());
  *out = std::move(backend);
  return Status::Ok();
}

PVLLM_REGISTER_BACKEND("cpu", create_cpu_backend);

// pvllm_cpu_isa asks the registry, which names no kernel header.
[[maybe_unused]] static const bool cpu_isa_registered =
    register_cpu_backend_isa([] { return cpu::cpu_isa_name(cpu::active_cpu_isa()); });

}  // namespace pvllm
