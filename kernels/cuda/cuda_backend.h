// The CUDA backend: a Llama forward pass over the paged KV cache on one GPU,
// built as its own module (libpvllm_cuda.so) so that libpvllm.so never
// links the CUDA runtime; core/backend/backend_loader.cc dlopens it when the device
// is "cuda", "cuda:N" or "auto". Only the extern "C" functions of module.cc
// leave the module.
//
// Per step: the host packs the batch metadata into one pinned buffer, one
// copy moves it to the device, then every layer runs
//   rmsnorm(+residual) → QKV GEMM (+bias) → q/k norm → RoPE → kv_write
//   → attention → O GEMM (+bias) → rmsnorm(+residual) → gate/up GEMM
//   → silu_mul → down GEMM
// (the bias adds and the q/k norm only for models that have them).
// and the final norm and lm_head run only over the rows whose logits are
// wanted. Pure-decode steps replay a CUDA graph captured once per batch-size
// bucket over static input buffers.
//
// This header is private to kernels/cuda (nothing else includes it): the
// CudaBackend class and what its files share. Each file holds one concern:
//   module.cc       the module's exports, device probing, creating and
//                   checking the backend (init)
//   weights.cc      uploading the weights in the backend's dtype
//   layers.cc       the forward pass: embedding, attention and MLP blocks,
//                   final logits, the GEMM
//   step_inputs.cc  the activation and metadata buffers, and staging a
//                   step's inputs on the device (eager steps)
//   graphs.cc       decode CUDA graphs: capture and their static inputs
//   step.cc         a step: forward / forward_sample, graph or eager, the
//                   logits copy and device sampling
//   kv_pool.cc      the KV pool, block copies and the swap space
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda_module_interface.h"
#include "core/model/model.h"
#include "kernels/cuda/common/device_buffer.h"
#include "kernels/cuda/common/paged_kv.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/sampling_plan.h"

namespace pvllm::cuda {

// Decode batch sizes that get a CUDA graph; a batch is padded up to the
// next one.
inline constexpr std::array<int32_t, 9> kGraphBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};

inline Status cublas_status(cublasStatus_t s, const std::string& what) {
  const std::string msg = what + ": cuBLAS status " + std::to_string(static_cast<int>(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return OutOfMemory("cuBLAS out of memory: " + msg);
  return Internal(msg);
}

#define PVLLM_CUDA_TRY(expr, what)                                       \
  do {                                                                   \
    const cudaError_t pvllm_err_ = (expr);                               \
    if (pvllm_err_ != cudaSuccess) return cuda_status(pvllm_err_, what); \
  } while (0)

// A launcher's int result is a cudaError_t value.
#define PVLLM_KERNEL_TRY(expr, what) PVLLM_CUDA_TRY(static_cast<cudaError_t>(expr), what)

// Offsets of the per-step arrays inside the metadata buffers (host staging
// and device copy share one layout).
struct MetaLayout {
  size_t input_ids = 0;     // int32 [num_tokens]
  size_t positions = 0;     // int32 [num_tokens]
  size_t slots = 0;         // int64 [num_tokens]
  size_t context_lens = 0;  // int32 [num_seqs]
  // Dynamic RoPE only (empty otherwise): each token's row of the table, and
  // the table, row 0 the base frequencies. Before the block tables, so the
  // graph inputs' first copy carries them.
  size_t freq_rows = 0;     // int32 [num_tokens]
  size_t freq_table = 0;    // fp32 [num_seqs + 1, head_dim / 2]
  size_t block_tables = 0;  // int32 [num_seqs, max_blocks_per_seq]
  size_t prefill_qs = 0;    // int32 [num_prefill_seqs + 1], rebased to 0
  size_t work_items = 0;    // int32 [num_work_items, 2]
  size_t logits_rows = 0;   // int32 [num_logits]
  size_t total = 0;
};

// Device pointers of one step, eager or captured.
struct StepArgs {
  const int32_t* input_ids = nullptr;     // [num_tokens]
  const int32_t* positions = nullptr;     // [num_tokens]
  const int64_t* slots = nullptr;         // [num_tokens]
  const int32_t* context_lens = nullptr;  // [num_seqs]
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  // RoPE frequencies: the constant table and no rows, or (dynamic scaling)
  // this step's per-sequence table and each token's row of it.
  const float* inv_freq = nullptr;
  const int32_t* freq_rows = nullptr;
  int32_t max_blocks_per_seq = 0;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  // Sequences [0, num_decode) have one query row each (rows [0, num_decode))
  // and use the decode kernel; the rest are prefill chunks.
  int32_t num_decode = 0;
  int32_t decode_max_context = 0;
  const int32_t* prefill_qs = nullptr;  // [num_seqs - num_decode + 1], rows after the decodes
  const int32_t* work_items = nullptr;  // [num_work_items, 2]
  int32_t num_work_items = 0;
  const int32_t* logits_rows = nullptr;  // [num_logits]; nullptr: rows [0, num_logits)
  int32_t num_logits = 0;
};

// The per-token and per-sequence inputs of a step, inside a device buffer
// laid out by `layout` (the eager metadata buffer or a graph's static one).
// In step_inputs.cc.
StepArgs step_inputs(const unsigned char* dev, const MetaLayout& layout);

// The decode batch-size bucket of `num_seqs` sequences: the smallest that
// holds them. In graphs.cc.
int32_t graph_bucket(int32_t num_seqs);

struct DeviceLayer {
  DeviceBuffer attn_norm;  // [hidden]
  DeviceBuffer wqkv;       // [(H + 2 KV) * D, hidden]: q rows, then k, then v
  DeviceBuffer bqkv;       // [(H + 2 KV) * D]: bq, bk, bv (config.qkv_bias only)
  DeviceBuffer q_norm;     // [D] (config.qk_norm only)
  DeviceBuffer k_norm;     // [D] (config.qk_norm only)
  DeviceBuffer wo;         // [hidden, H * D]
  DeviceBuffer bo;         // [hidden] (config.o_bias only)
  DeviceBuffer ffn_norm;   // [hidden]
  DeviceBuffer w_gate_up;  // [2 I, hidden]: gate rows, then up
  DeviceBuffer w_down;     // [hidden, I]
};

// A decode batch-size bucket's graph. A bucket whose capture failed runs
// eagerly from then on.
struct DecodeGraph {
  cudaGraphExec_t exec = nullptr;
  bool failed = false;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const CudaBackendOptions& opt)
      : model_(model), cfg_(model.config), opt_(opt) {}
  ~CudaBackend() override;

  Status init();

  std::string name() const override { return "cuda:" + std::to_string(opt_.device_index); }
  Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                        std::vector<SampleResult>* out) override;
  Status forward(const BatchMetadata& md, float* logits) override;
  Status copy_blocks(const std::vector<BlockCopy>& copies) override;
  Status reserve_swap_space(int64_t bytes, int32_t* num_blocks) override;
  Status swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection direction) override;
  PreemptionCosts preemption_costs() const override;
  // The device sampler applies SampleRow::allowed (sampling_plan.h).
  int32_t num_blocks() const override { return num_blocks_; }
  int32_t block_size() const override { return opt_.block_size; }

 private:
  size_t elem() const { return dtype_ == DType::kF32 ? 4 : 2; }
  // What the KV pool stores (cuda_kv_cache_dtype: the activation dtype,
  // int8 or fp8 e4m3), resolved at create.
  KvCacheDtype kv_dtype() const { return kv_dtype_; }
  Status check_shapes() const;
  Status check_features() const;
  Status upload(const Tensor& t, void* dst, size_t numel, const char* what);
  Status upload_weights();
  Status allocate_buffers();
  Status allocate_kv();
  Status gemm(const void* x, const void* w, void* y, int32_t m, int32_t n, int32_t k, bool out_f32);
  // The forward pass, in the order run_model enqueues it.
  Status run_model(const StepArgs& a);
  Status embed(const StepArgs& a);
  Status attention_block(int32_t layer, const StepArgs& a);
  Status paged_attention(int32_t layer, const StepArgs& a, const unsigned char* q);
  Status add_bias(void* x, const DeviceBuffer& bias, int32_t rows, int32_t cols, const char* what);
  // Dynamic RoPE: sizes of the per-step tables, and filling them.
  size_t freq_floats() const { return dynamic_rope_ ? static_cast<size_t>(cfg_.head_dim / 2) : 0; }
  void fill_freq_tables(const BatchMetadata& md, int32_t padded_tokens, int32_t* rows,
                        float* table) const;
  void bind_rope(const unsigned char* dev, const MetaLayout& layout, StepArgs* a) const;
  Status mlp(int32_t layer, const StepArgs& a);
  Status final_logits(const StepArgs& a);
  Status rmsnorm(const void* x, void* residual, const void* weight, int32_t num_tokens,
                 const char* what);
  PagedKv paged_kv(int32_t layer, const StepArgs& a) const;
  Status check_batch_fits(const BatchMetadata& md) const;
  Status enqueue_forward(const BatchMetadata& md);
  Status enqueue_eager(const BatchMetadata& md, int32_t num_decode);
  Status stage_graph_inputs(const BatchMetadata& md, int32_t batch);
  Status capture(int32_t batch, DecodeGraph* g);
  Status sample(std::span<const SampleRow> rows, std::vector<SampleResult>* out);
  Status copy_logits(const BatchMetadata& md, float* logits);
  Status finish_step(Status st);
  void* k_layer(int32_t layer) const {
    return k_cache_.as<unsigned char>() + static_cast<size_t>(layer) * kv_layer_bytes_;
  }
  void* v_layer(int32_t layer) const {
    return v_cache_.as<unsigned char>() + static_cast<size_t>(layer) * kv_layer_bytes_;
  }

  const Model& model_;
  const ModelConfig& cfg_;
  CudaBackendOptions opt_;
  DType dtype_ = DType::kBF16;
  KvCacheDtype kv_dtype_ = KvCacheDtype::kBF16;  // what the KV pool stores
  // The prefill attention kernel: kMma unless PVLLM_CUDA_PREFILL_KERNEL=wmma
  // names the first one (kept until a GPU has measured both; a GPU run can
  // then check the engine on each without a rebuild).
  PrefillVariant prefill_variant_ = PrefillVariant::kMma;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  // Weights in dtype_.
  DeviceBuffer embed_;                     // [vocab, hidden]
  std::unique_ptr<DeviceLayer[]> layers_;  // [num_layers]
  DeviceBuffer final_norm_;                // [hidden]
  DeviceBuffer lm_head_;                   // [vocab, hidden]; unused when tied
  const void* lm_head_ptr_ = nullptr;
  DeviceBuffer inv_freq_;  // fp32 [head_dim / 2]
  // Dynamic RoPE scaling: the frequencies depend on each sequence's length,
  // so every step ships a table (MetaLayout::freq_table) instead.
  bool dynamic_rope_ = false;
  std::vector<float> base_inv_freq_;  // rope_inv_freq(cfg_) on the host

  // Activations, dtype_, sized for max_tokens_ rows.
  int32_t max_tokens_ = 0;
  int32_t max_seqs_ = 0;
  int32_t max_logits_ = 0;
  int32_t max_blocks_ = 0;  // block-table width of the graphs: max_model_len / block_size
  DeviceBuffer hidden_;     // [T, hidden] the residual stream
  DeviceBuffer normed_;     // [T, hidden]
  DeviceBuffer tmp_;        // [T, hidden] O and down projections
  // [T, (H + 2 KV) * D]: q, k, v of a token side by side; RoPE, the KV
  // write and attention read them there, strided.
  DeviceBuffer qkv_;
  DeviceBuffer attn_;       // [T, H * D]
  DeviceBuffer gate_up_;    // [T, 2 I]
  DeviceBuffer act_;        // [T, I]
  DeviceBuffer gather_x_;   // [L, hidden]
  DeviceBuffer gather_r_;   // [L, hidden]
  DeviceBuffer logits_;     // fp32 [L, vocab]
  DeviceBuffer decode_ws_;  // split-KV scratch
  DeviceBuffer cublas_ws_;

  // Eager metadata.
  PinnedBuffer meta_host_;
  DeviceBuffer meta_dev_;
  // Graph inputs: fixed layout for the largest bucket.
  int32_t graph_max_batch_ = 0;
  MetaLayout graph_layout_;
  PinnedBuffer graph_host_;
  DeviceBuffer graph_dev_;
  std::map<int32_t, DecodeGraph> graphs_;
  DeviceBuffer copy_pairs_;  // int32 [max copies, 2]
  size_t max_copies_ = 0;

  // Where this step's logits are: row logits_row_of_[i] of logits_ holds
  // md.logits_rows[i] (eager steps compute only those rows, graphs every
  // row of the bucket).
  std::vector<int32_t> logits_row_of_;
  // Device sampling: the plan's inputs go over in one copy, the tokens and
  // asked-for logprobs come back in one.
  SamplingPlan plan_;
  PinnedBuffer sample_in_host_;
  DeviceBuffer sample_in_dev_;
  DeviceBuffer sample_out_dev_;
  PinnedBuffer sample_out_host_;
  DeviceBuffer sample_ws_;  // penalized logits, fp32 [penalized rows, vocab]

  // KV pool: [num_layers, num_blocks, num_kv_heads, block_size, head_dim] each.
  int32_t num_blocks_ = 0;
  size_t kv_layer_bytes_ = 0;
  DeviceBuffer k_cache_;
  DeviceBuffer v_cache_;
  // The swap space, page-locked: [num_swap_blocks_][K, V][num_layers][block bytes].
  PinnedBuffer swap_;
  int32_t num_swap_blocks_ = 0;
};

}  // namespace pvllm::cuda
