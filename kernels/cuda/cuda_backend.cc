// The CUDA backend: a Llama forward pass over the paged KV cache on one GPU,
// built as its own module (libpvllm_cuda.so) so that libpvllm.so never
// links the CUDA runtime; core/backend/backend_loader.cc dlopens it when the device
// is "cuda", "cuda:N" or "auto". Only the extern "C" functions at the end
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
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/batch_check.h"
#include "core/base/log.h"
#include "core/model/model.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention_generic.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/block_copy.h"
#include "kernels/cuda/common/device_buffer.h"
#include "kernels/cuda/common/paged_kv.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/head_norm.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_plan.h"

namespace pvllm {
namespace {

// Decode batch sizes that get a CUDA graph; a batch is padded up to the
// next one.
constexpr std::array<int32_t, 9> kGraphBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
constexpr size_t kAlign = 256;

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

Status cublas_status(cublasStatus_t s, const std::string& what) {
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

// Names why no device is usable: no driver, or none present.
Status device_count(int32_t* count) {
  *count = 0;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorInsufficientDriver) {
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
      return Unsupported("no CUDA driver is installed (libcuda.so.1 not found)");
    }
    return Unsupported("the CUDA driver supports CUDA " + std::to_string(driver / 1000) + "." +
                       std::to_string(driver % 1000 / 10) + ", older than the CUDA " +
                       std::to_string(CUDART_VERSION / 1000) + "." +
                       std::to_string(CUDART_VERSION % 1000 / 10) +
                       " runtime this module was built with; update the driver");
  }
  if (e == cudaErrorNoDevice) return Unsupported("no CUDA device present");
  if (e != cudaSuccess) return cuda_status(e, "cudaGetDeviceCount");
  *count = n;
  return Status::Ok();
}

// The module holds sm_90 code and compute_90 PTX: devices of compute
// capability 9.0 and newer run it; older ones would fail at the first launch.
constexpr int kMinComputeCapability = 90;

// Unsupported, naming the reason, unless `device` exists and can run the
// kernels.
Status check_device(int32_t device) {
  int32_t count = 0;
  PVLLM_RETURN_IF_ERROR(device_count(&count));
  if (device < 0 || device >= count) {
    return Unsupported("CUDA device " + std::to_string(device) + " does not exist (" +
                       std::to_string(count) + " devices)");
  }
  cudaDeviceProp prop{};
  PVLLM_CUDA_TRY(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  if (prop.major * 10 + prop.minor < kMinComputeCapability) {
    return Unsupported("CUDA device " + std::to_string(device) + " (" + prop.name +
                       ") has compute capability " + std::to_string(prop.major) + "." +
                       std::to_string(prop.minor) + "; the kernels need 9.0 or newer");
  }
  return Status::Ok();
}

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

// `freq_floats` is head_dim / 2 with dynamic RoPE, 0 otherwise.
MetaLayout layout_for(size_t num_tokens, size_t num_seqs, size_t max_blocks, size_t num_work,
                      size_t num_logits, size_t freq_floats) {
  MetaLayout l;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += align_up(bytes);
    return at;
  };
  l.input_ids = take(num_tokens * 4);
  l.positions = take(num_tokens * 4);
  l.slots = take(num_tokens * 8);
  l.context_lens = take(num_seqs * 4);
  l.freq_rows = take(freq_floats > 0 ? num_tokens * 4 : 0);
  l.freq_table = take((num_seqs + 1) * freq_floats * 4);
  l.block_tables = take(num_seqs * max_blocks * 4);
  l.prefill_qs = take((num_seqs + 1) * 4);
  l.work_items = take(num_work * 8);
  l.logits_rows = take(num_logits * 4);
  l.total = off;
  return l;
}

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
  Status attention(int32_t l, const StepArgs& a);
  Status attend(int32_t l, const StepArgs& a, const unsigned char* q);
  Status add_bias(void* x, const DeviceBuffer& bias, int32_t rows, int32_t cols, const char* what);
  // Dynamic RoPE: sizes of the per-step tables, and filling them.
  size_t freq_floats() const { return dynamic_rope_ ? static_cast<size_t>(cfg_.head_dim / 2) : 0; }
  void fill_freq_tables(const BatchMetadata& md, int32_t padded_tokens, int32_t* rows,
                        float* table) const;
  void bind_rope(const unsigned char* dev, const MetaLayout& l, StepArgs* a) const;
  Status mlp(int32_t l, const StepArgs& a);
  Status final_logits(const StepArgs& a);
  Status rmsnorm(const void* x, void* residual, const void* weight, int32_t num_tokens,
                 const char* what);
  PagedKv paged_kv(int32_t l, const StepArgs& a) const;
  Status check_batch_fits(const BatchMetadata& md) const;
  Status enqueue_forward(const BatchMetadata& md);
  Status enqueue_eager(const BatchMetadata& md, int32_t num_decode);
  Status stage_graph_inputs(const BatchMetadata& md, int32_t batch);
  Status capture(int32_t batch, DecodeGraph* g);
  Status sample(std::span<const SampleRow> rows, std::vector<SampleResult>* out);
  Status copy_logits(const BatchMetadata& md, float* logits);
  Status finish_step(Status st);
  void* k_layer(int32_t l) const {
    return k_cache_.as<unsigned char>() + static_cast<size_t>(l) * kv_layer_bytes_;
  }
  void* v_layer(int32_t l) const {
    return v_cache_.as<unsigned char>() + static_cast<size_t>(l) * kv_layer_bytes_;
  }

  const Model& model_;
  const ModelConfig& cfg_;
  CudaBackendOptions opt_;
  DType dtype_ = DType::kBF16;
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

CudaBackend::~CudaBackend() {
  cudaSetDevice(opt_.device_index);
  // Nothing may still run on the stream when its graphs, handle and
  // buffers go (every step syncs already; this covers a failed init).
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [batch, g] : graphs_) {
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  }
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// The dtype the backend runs in: the option's, or for auto bf16 (fp16 for
// fp16 checkpoints).
DType chosen_dtype(int32_t option, DType checkpoint) {
  if (option == 1) return DType::kBF16;
  if (option == 2) return DType::kF16;
  if (option == 3) return DType::kF32;
  return checkpoint == DType::kF16 ? DType::kF16 : DType::kBF16;
}

Status CudaBackend::check_shapes() const {
  if (opt_.dtype < 0 || opt_.dtype > 3) {
    return InvalidArgument("dtype must be 0 (auto), 1 (bf16), 2 (fp16) or 3 (fp32), got " +
                           std::to_string(opt_.dtype));
  }
  const int32_t d = cfg_.head_dim;
  if (!pvllm_cuda_rope_serves_head_dim(d)) {  // attention serves 1 to 256
    return Unsupported(
        "the CUDA kernels serve head_dim 8, 16, 32, 64, 80, 96, 112, 128, 192 and 256; the model "
        "has " +
        std::to_string(d));
  }
  if (cfg_.num_kv_heads <= 0 || cfg_.num_heads % cfg_.num_kv_heads != 0) {
    return CorruptModel("num_heads must be a multiple of num_kv_heads");
  }
  // The fast attention kernels (fp16 / bf16 at head_dim 64 and 128) ask
  // more; the generic ones (fp32, other head dims) take any block size and
  // group.
  const DType dtype = chosen_dtype(opt_.dtype, model_.weights.embed.dtype);
  if (!generic_attention::serves(dtype, d)) {
    const int32_t bs = opt_.block_size;
    if (bs != 16 && bs != 32 && bs != 256) {
      return Unsupported("the CUDA attention kernels serve block_size 16, 32 and 256 in " +
                         std::string(dtype_name(dtype)) + " at head_dim " + std::to_string(d) +
                         "; got " + std::to_string(bs));
    }
    if (cfg_.num_heads / cfg_.num_kv_heads > kDecodeMaxGroupSize) {
      return Unsupported("the CUDA decode kernel serves GQA groups up to " +
                         std::to_string(kDecodeMaxGroupSize) + " in " +
                         std::string(dtype_name(dtype)) + " at head_dim " + std::to_string(d));
    }
  }
  if (!(opt_.gpu_memory_utilization > 0.0f && opt_.gpu_memory_utilization <= 1.0f)) {
    return InvalidArgument("gpu_memory_utilization must be in (0, 1], got " +
                           std::to_string(opt_.gpu_memory_utilization));
  }
  return Status::Ok();
}

// The architecture features of the config that this backend runs: every
// other value is refused here rather than ignored. Weights the config does
// not ask for would be ignored too, so they are refused as well.
Status CudaBackend::check_features() const {
  using Type = RopeScaling::Type;
  const Type type = cfg_.rope_scaling.type;
  if (type != Type::kNone && type != Type::kLinear && type != Type::kLlama3 &&
      type != Type::kDynamic) {
    return Unsupported("the CUDA backend does not implement RoPE scaling type " +
                       std::to_string(static_cast<int>(type)));
  }
  if (type == Type::kDynamic && !(cfg_.rope_scaling.factor > 0.0f &&
                                  cfg_.rope_scaling.original_max_position_embeddings > 0)) {
    return InvalidArgument(
        "dynamic RoPE scaling needs factor > 0 and "
        "original_max_position_embeddings > 0");
  }
  if (cfg_.rope_style != RopeStyle::kInterleaved && cfg_.rope_style != RopeStyle::kRotateHalf) {
    return Unsupported("the CUDA backend does not implement RoPE style " +
                       std::to_string(static_cast<int>(cfg_.rope_style)));
  }
  if (cfg_.sliding_window < 0) {
    return InvalidArgument("sliding_window must be >= 0 (0 = full attention), got " +
                           std::to_string(cfg_.sliding_window));
  }
  if (cfg_.qk_norm && cfg_.head_dim > kHeadNormMaxHeadDim) {
    return Unsupported("the CUDA q/k norm serves head_dim up to " +
                       std::to_string(kHeadNormMaxHeadDim));
  }
  for (size_t i = 0; i < model_.weights.layers.size(); ++i) {
    const LayerWeights& w = model_.weights.layers[i];
    const char* extra = nullptr;
    if (!cfg_.qkv_bias && (!w.bq.empty() || !w.bk.empty() || !w.bv.empty())) {
      extra = "q/k/v bias tensors but the config has no qkv_bias";
    } else if (!cfg_.o_bias && !w.bo.empty()) {
      extra = "an o_proj bias but the config has no o_bias";
    } else if (!cfg_.qk_norm && (!w.q_norm.empty() || !w.k_norm.empty())) {
      extra = "q/k norm weights but the config has no qk_norm";
    }
    if (extra != nullptr) {
      return CorruptModel("layer " + std::to_string(i) + " has " + extra +
                          "; the CUDA backend would ignore them");
    }
  }
  return Status::Ok();
}

// Copies one tensor to the device in dtype_, converting on the host in
// chunks when the checkpoint holds another dtype.
Status CudaBackend::upload(const Tensor& t, void* dst, size_t numel, const char* what) {
  if (t.empty()) return CorruptModel(std::string("missing tensor ") + what);
  // The device buffer holds exactly `numel` elements: a tensor of another
  // size would overrun it (or leave part of it unset).
  if (t.numel() != static_cast<int64_t>(numel)) {
    return CorruptModel(std::string("tensor ") + what + " (" + t.name + ") has " +
                        std::to_string(t.numel()) + " elements, the config implies " +
                        std::to_string(numel));
  }
  if (t.dtype == dtype_) {
    PVLLM_CUDA_TRY(cudaMemcpy(dst, t.data, t.nbytes(), cudaMemcpyHostToDevice),
                   std::string("uploading ") + t.name);
    return Status::Ok();
  }
  constexpr int64_t kChunk = int64_t{1} << 22;  // elements per host conversion
  const size_t e = elem();
  std::vector<unsigned char> staging(static_cast<size_t>(std::min(kChunk, t.numel())) * e);
  for (int64_t start = 0; start < t.numel(); start += kChunk) {
    const int64_t n = std::min(kChunk, t.numel() - start);
    for (int64_t i = 0; i < n; ++i) {
      const float f = load_as_float(t.dtype, t.data, start + i);
      unsigned char* out = staging.data() + static_cast<size_t>(i) * e;
      if (dtype_ == DType::kF32) {
        std::memcpy(out, &f, 4);
      } else {
        const uint16_t h = dtype_ == DType::kBF16 ? float_to_bf16(f) : float_to_fp16(f);
        std::memcpy(out, &h, 2);
      }
    }
    PVLLM_CUDA_TRY(cudaMemcpy(static_cast<unsigned char*>(dst) + static_cast<size_t>(start) * e,
                              staging.data(), static_cast<size_t>(n) * e, cudaMemcpyHostToDevice),
                   std::string("uploading ") + t.name);
  }
  return Status::Ok();
}

Status CudaBackend::upload_weights() {
  const ModelWeights& w = model_.weights;
  const size_t hidden = static_cast<size_t>(cfg_.hidden_size);
  const size_t qd = static_cast<size_t>(cfg_.num_heads) * cfg_.head_dim;
  const size_t kvd = static_cast<size_t>(cfg_.num_kv_heads) * cfg_.head_dim;
  const size_t inter = static_cast<size_t>(cfg_.intermediate_size);
  const size_t vocab = static_cast<size_t>(cfg_.vocab_size);

  PVLLM_RETURN_IF_ERROR(embed_.allocate(vocab * hidden * elem(), "embedding"));
  PVLLM_RETURN_IF_ERROR(upload(w.embed, embed_.get(), vocab * hidden, "embed"));
  // run_model walks cfg_.num_layers layers.
  if (w.layers.size() != static_cast<size_t>(cfg_.num_layers)) {
    return CorruptModel("the model has " + std::to_string(w.layers.size()) +
                        " layers of weights, the config " + std::to_string(cfg_.num_layers));
  }
  layers_ = std::make_unique<DeviceLayer[]>(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& src = w.layers[i];
    DeviceLayer& dst = layers_[i];
    PVLLM_RETURN_IF_ERROR(dst.attn_norm.allocate(hidden * elem(), "attn_norm"));
    PVLLM_RETURN_IF_ERROR(upload(src.attn_norm, dst.attn_norm.get(), hidden, "attn_norm"));
    // Fused QKV: q rows, k rows, v rows, each block contiguous rows of
    // `hidden` elements, so each source lands at a row offset.
    PVLLM_RETURN_IF_ERROR(dst.wqkv.allocate((qd + 2 * kvd) * hidden * elem(), "wqkv"));
    auto* qkv = dst.wqkv.as<unsigned char>();
    PVLLM_RETURN_IF_ERROR(upload(src.wq, qkv, qd * hidden, "wq"));
    PVLLM_RETURN_IF_ERROR(upload(src.wk, qkv + qd * hidden * elem(), kvd * hidden, "wk"));
    PVLLM_RETURN_IF_ERROR(upload(src.wv, qkv + (qd + kvd) * hidden * elem(), kvd * hidden, "wv"));
    PVLLM_RETURN_IF_ERROR(dst.wo.allocate(hidden * qd * elem(), "wo"));
    PVLLM_RETURN_IF_ERROR(upload(src.wo, dst.wo.get(), hidden * qd, "wo"));
    if (cfg_.qkv_bias) {  // one row over the fused QKV output: bq, bk, bv
      PVLLM_RETURN_IF_ERROR(dst.bqkv.allocate((qd + 2 * kvd) * elem(), "bqkv"));
      auto* b = dst.bqkv.as<unsigned char>();
      PVLLM_RETURN_IF_ERROR(upload(src.bq, b, qd, "bq"));
      PVLLM_RETURN_IF_ERROR(upload(src.bk, b + qd * elem(), kvd, "bk"));
      PVLLM_RETURN_IF_ERROR(upload(src.bv, b + (qd + kvd) * elem(), kvd, "bv"));
    }
    if (cfg_.o_bias) {
      PVLLM_RETURN_IF_ERROR(dst.bo.allocate(hidden * elem(), "bo"));
      PVLLM_RETURN_IF_ERROR(upload(src.bo, dst.bo.get(), hidden, "bo"));
    }
    if (cfg_.qk_norm) {
      const size_t d = static_cast<size_t>(cfg_.head_dim);
      PVLLM_RETURN_IF_ERROR(dst.q_norm.allocate(d * elem(), "q_norm"));
      PVLLM_RETURN_IF_ERROR(upload(src.q_norm, dst.q_norm.get(), d, "q_norm"));
      PVLLM_RETURN_IF_ERROR(dst.k_norm.allocate(d * elem(), "k_norm"));
      PVLLM_RETURN_IF_ERROR(upload(src.k_norm, dst.k_norm.get(), d, "k_norm"));
    }
    PVLLM_RETURN_IF_ERROR(dst.ffn_norm.allocate(hidden * elem(), "ffn_norm"));
    PVLLM_RETURN_IF_ERROR(upload(src.ffn_norm, dst.ffn_norm.get(), hidden, "ffn_norm"));
    PVLLM_RETURN_IF_ERROR(dst.w_gate_up.allocate(2 * inter * hidden * elem(), "w_gate_up"));
    auto* gu = dst.w_gate_up.as<unsigned char>();
    PVLLM_RETURN_IF_ERROR(upload(src.w_gate, gu, inter * hidden, "w_gate"));
    PVLLM_RETURN_IF_ERROR(upload(src.w_up, gu + inter * hidden * elem(), inter * hidden, "w_up"));
    PVLLM_RETURN_IF_ERROR(dst.w_down.allocate(hidden * inter * elem(), "w_down"));
    PVLLM_RETURN_IF_ERROR(upload(src.w_down, dst.w_down.get(), hidden * inter, "w_down"));
  }
  PVLLM_RETURN_IF_ERROR(final_norm_.allocate(hidden * elem(), "final_norm"));
  PVLLM_RETURN_IF_ERROR(upload(w.final_norm, final_norm_.get(), hidden, "final_norm"));
  if (w.lm_head.data == w.embed.data && w.lm_head.dtype == w.embed.dtype) {
    lm_head_ptr_ = embed_.get();  // tied: the same bytes once
  } else {
    PVLLM_RETURN_IF_ERROR(lm_head_.allocate(vocab * hidden * elem(), "lm_head"));
    PVLLM_RETURN_IF_ERROR(upload(w.lm_head, lm_head_.get(), vocab * hidden, "lm_head"));
    lm_head_ptr_ = lm_head_.get();
  }
  dynamic_rope_ = rope_depends_on_length(cfg_);
  base_inv_freq_ = rope_inv_freq(cfg_);
  const std::vector<float>& inv_freq = base_inv_freq_;
  PVLLM_RETURN_IF_ERROR(inv_freq_.allocate(inv_freq.size() * sizeof(float), "inv_freq"));
  PVLLM_CUDA_TRY(cudaMemcpy(inv_freq_.get(), inv_freq.data(), inv_freq.size() * sizeof(float),
                            cudaMemcpyHostToDevice),
                 "uploading inv_freq");
  return Status::Ok();
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
  const size_t l = static_cast<size_t>(max_logits_);
  PVLLM_RETURN_IF_ERROR(gather_x_.allocate(l * hidden * e, "gather_x"));
  PVLLM_RETURN_IF_ERROR(gather_r_.allocate(l * hidden * e, "gather_r"));
  PVLLM_RETURN_IF_ERROR(
      logits_.allocate(l * static_cast<size_t>(cfg_.vocab_size) * sizeof(float), "logits"));

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
  const MetaLayout eager = layout_for(t, static_cast<size_t>(max_seqs_),
                                      static_cast<size_t>(max_blocks_), max_work, l, freq_floats());
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

Status CudaBackend::allocate_kv() {
  const size_t per_block = kv_bytes_per_block(cfg_, opt_.block_size, elem());
  size_t free_bytes = 0, total_bytes = 0;
  PVLLM_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  num_blocks_ = kv_pool_blocks(
      opt_.num_blocks,
      static_cast<double>(free_bytes) * opt_.gpu_memory_utilization - kCudaReservedBytes, per_block,
      opt_.block_size);
  if (num_blocks_ < 1) {
    return OutOfMemory("no GPU memory left for the KV cache: " + std::to_string(free_bytes >> 20) +
                       " MiB free after the weights, gpu_memory_utilization " +
                       std::to_string(opt_.gpu_memory_utilization));
  }
  kv_layer_bytes_ =
      per_block / 2 / static_cast<size_t>(cfg_.num_layers) * static_cast<size_t>(num_blocks_);
  const size_t bytes = kv_layer_bytes_ * static_cast<size_t>(cfg_.num_layers);
  PVLLM_RETURN_IF_ERROR(k_cache_.allocate(bytes, "K cache"));
  PVLLM_RETURN_IF_ERROR(v_cache_.allocate(bytes, "V cache"));
  // Zeroed so that masked-out reads of never-written slots cannot carry NaN.
  PVLLM_CUDA_TRY(cudaMemset(k_cache_.get(), 0, bytes), "clearing the K cache");
  PVLLM_CUDA_TRY(cudaMemset(v_cache_.get(), 0, bytes), "clearing the V cache");
  return Status::Ok();
}

Status CudaBackend::init() {
  PVLLM_RETURN_IF_ERROR(check_shapes());
  PVLLM_RETURN_IF_ERROR(check_features());
  if (const char* env = std::getenv("PVLLM_CUDA_PREFILL_KERNEL"); env != nullptr && *env != '\0') {
    const std::string want = env;
    if (want == "wmma") {
      prefill_variant_ = PrefillVariant::kWmma;
    } else if (want != "mma") {
      return InvalidArgument("PVLLM_CUDA_PREFILL_KERNEL=" + want +
                             " names no prefill attention kernel (mma, wmma)");
    }
  }
  PVLLM_RETURN_IF_ERROR(check_device(opt_.device_index));
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  dtype_ = chosen_dtype(opt_.dtype, model_.weights.embed.dtype);
  PVLLM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
  const cublasStatus_t cs = cublasCreate(&cublas_);
  if (cs != CUBLAS_STATUS_SUCCESS) return cublas_status(cs, "cublasCreate");
  PVLLM_RETURN_IF_ERROR(upload_weights());
  PVLLM_RETURN_IF_ERROR(allocate_buffers());
  cublasStatus_t s = cublasSetStream(cublas_, stream_);
  if (s == CUBLAS_STATUS_SUCCESS) {
    // An explicit workspace keeps cuBLAS from allocating inside a graph capture.
    s = cublasSetWorkspace(cublas_, cublas_ws_.get(), cublas_ws_.bytes());
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) return cublas_status(s, "configuring cuBLAS");
  PVLLM_RETURN_IF_ERROR(allocate_kv());
  PVLLM_CUDA_TRY(cudaDeviceSynchronize(), "initialising the CUDA backend");
  return Status::Ok();
}

// y[m, n] = x[m, k] . w[n, k]^T, row-major, fp32 accumulation (on tensor
// cores for fp16 / bf16; fp32 runs IEEE fp32 throughout, no TF32, so the
// fp32 engine can match the CPU's tokens). Column-major cuBLAS sees
// y^T = w . x^T with w stored as k x n.
Status CudaBackend::gemm(const void* x, const void* w, void* y, int32_t m, int32_t n, int32_t k,
                         bool out_f32) {
  if (m == 0) return Status::Ok();
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t dt = dtype_ == DType::kF32    ? CUDA_R_32F
                            : dtype_ == DType::kBF16 ? CUDA_R_16BF
                                                     : CUDA_R_16F;
  const cublasComputeType_t compute =
      dtype_ == DType::kF32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  const cublasStatus_t s =
      cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, dt, k, x, dt, k, &beta, y,
                   out_f32 ? CUDA_R_32F : dt, n, compute, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return cublas_status(
        s, "GEMM " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
  }
  return Status::Ok();
}

// Enqueues the whole model on stream_; logits of the selected rows end in
// logits_ ([num_logits, vocab] fp32). Makes no host synchronisation, so it
// is also what a graph captures.
Status CudaBackend::run_model(const StepArgs& a) {
  PVLLM_RETURN_IF_ERROR(embed(a));
  for (int32_t l = 0; l < cfg_.num_layers; ++l) {
    PVLLM_RETURN_IF_ERROR(attention(l, a));
    PVLLM_RETURN_IF_ERROR(mlp(l, a));
  }
  return final_logits(a);
}

// The step's token embeddings into hidden_, the residual stream.
Status CudaBackend::embed(const StepArgs& a) {
  EmbeddingParams ep;
  ep.ids = a.input_ids;
  ep.table = embed_.get();
  ep.out = hidden_.get();
  ep.num_tokens = a.num_tokens;
  ep.hidden = cfg_.hidden_size;
  ep.vocab = cfg_.vocab_size;
  ep.dtype = dtype_;
  PVLLM_KERNEL_TRY(pvllm_cuda_embedding(ep, stream_), "embedding");
  return Status::Ok();
}

// normed_ = RMSNorm of `num_tokens` rows of x with `weight`; with a
// residual, residual += x first and the sum is what gets normalised.
Status CudaBackend::rmsnorm(const void* x, void* residual, const void* weight, int32_t num_tokens,
                            const char* what) {
  RmsNormParams np;
  np.x = x;
  np.residual = residual;
  np.weight = weight;
  np.out = normed_.get();
  np.num_tokens = num_tokens;
  np.hidden = cfg_.hidden_size;
  np.eps = cfg_.rms_norm_eps;
  np.dtype = dtype_;
  PVLLM_KERNEL_TRY(pvllm_cuda_rmsnorm(np, stream_), what);
  return Status::Ok();
}

// Layer l's K/V pool as the kernels see it, with the step's block tables.
PagedKv CudaBackend::paged_kv(int32_t l, const StepArgs& a) const {
  PagedKv kv;
  kv.k_cache = k_layer(l);
  kv.v_cache = v_layer(l);
  kv.block_tables = a.block_tables;
  kv.max_blocks_per_seq = a.max_blocks_per_seq;
  kv.block_size = opt_.block_size;
  kv.num_kv_heads = cfg_.num_kv_heads;
  kv.head_dim = cfg_.head_dim;
  return kv;
}

// Layer l's attention block: RMSNorm(+residual) → fused QKV GEMM (+bias) →
// per-head q/k RMSNorm → RoPE → KV write → decode / prefill attention → O
// GEMM (+bias) into tmp_.
Status CudaBackend::attention(int32_t l, const StepArgs& a) {
  const DeviceLayer& w = layers_[l];
  const int32_t t = a.num_tokens;
  const int32_t hidden = cfg_.hidden_size;
  const int32_t h = cfg_.num_heads, kvh = cfg_.num_kv_heads, d = cfg_.head_dim;
  const int32_t qkv_cols = (h + 2 * kvh) * d;
  const size_t e = elem();

  // The previous layer's down projection joins the residual here.
  PVLLM_RETURN_IF_ERROR(rmsnorm(l == 0 ? hidden_.get() : tmp_.get(),
                                l == 0 ? nullptr : hidden_.get(), w.attn_norm.get(), t,
                                "attention rmsnorm"));
  PVLLM_RETURN_IF_ERROR(gemm(normed_.get(), w.wqkv.get(), qkv_.get(), t, qkv_cols, hidden, false));
  if (cfg_.qkv_bias) PVLLM_RETURN_IF_ERROR(add_bias(qkv_.get(), w.bqkv, t, qkv_cols, "qkv bias"));
  // Row t of qkv_ holds q, k and v of token t side by side; every kernel
  // below reads them there with the row's stride, nothing is copied.
  auto* q = qkv_.as<unsigned char>();
  auto* k = q + static_cast<size_t>(h) * d * e;
  auto* v = k + static_cast<size_t>(kvh) * d * e;

  if (cfg_.qk_norm) {
    HeadNormParams hp;
    hp.q = q;
    hp.k = k;
    hp.q_weight = w.q_norm.get();
    hp.k_weight = w.k_norm.get();
    hp.num_tokens = t;
    hp.num_heads = h;
    hp.num_kv_heads = kvh;
    hp.head_dim = d;
    hp.q_token_stride = qkv_cols;
    hp.k_token_stride = qkv_cols;
    hp.eps = cfg_.rms_norm_eps;
    hp.dtype = dtype_;
    PVLLM_KERNEL_TRY(pvllm_cuda_head_rmsnorm(hp, stream_), "q/k norm");
  }

  RopeParams rp;
  rp.q = q;
  rp.k = k;
  rp.q_token_stride = qkv_cols;
  rp.k_token_stride = qkv_cols;
  rp.positions = a.positions;
  rp.inv_freq = a.inv_freq;
  rp.freq_rows = a.freq_rows;
  rp.num_tokens = t;
  rp.num_heads = h;
  rp.num_kv_heads = kvh;
  rp.head_dim = d;
  rp.style = cfg_.rope_style;
  rp.dtype = dtype_;
  PVLLM_KERNEL_TRY(pvllm_cuda_rope(rp, stream_), "rope");

  KvWriteParams kp;
  kp.k = k;
  kp.v = v;
  kp.k_token_stride = qkv_cols;
  kp.v_token_stride = qkv_cols;
  kp.paged_kv = paged_kv(l, a);
  kp.slot_mapping = a.slots;
  kp.dtype = dtype_;
  kp.num_tokens = t;
  PVLLM_KERNEL_TRY(pvllm_cuda_write_kv(kp, stream_), "kv_write");

  PVLLM_RETURN_IF_ERROR(attend(l, a, q));
  PVLLM_RETURN_IF_ERROR(gemm(attn_.get(), w.wo.get(), tmp_.get(), t, hidden, h * d, false));
  if (cfg_.o_bias) PVLLM_RETURN_IF_ERROR(add_bias(tmp_.get(), w.bo, t, hidden, "o bias"));
  return Status::Ok();
}

// x [rows, cols] += bias [cols], in place.
Status CudaBackend::add_bias(void* x, const DeviceBuffer& bias, int32_t rows, int32_t cols,
                             const char* what) {
  BiasAddParams bp;
  bp.x = x;
  bp.bias = bias.get();
  bp.num_tokens = rows;
  bp.cols = cols;
  bp.dtype = dtype_;
  PVLLM_KERNEL_TRY(pvllm_cuda_add_bias(bp, stream_), what);
  return Status::Ok();
}

// attn_ = attention of every query row over layer l's paged cache: the
// leading one-row sequences through the decode kernel, the prefill chunks
// after them through the prefill kernel. `q` is row 0 of qkv_.
Status CudaBackend::attend(int32_t l, const StepArgs& a, const unsigned char* q) {
  const int32_t h = cfg_.num_heads, kvh = cfg_.num_kv_heads, d = cfg_.head_dim;
  const int32_t qkv_cols = (h + 2 * kvh) * d;
  const size_t e = elem();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  if (a.num_decode > 0) {
    DecodeAttentionParams dp;
    dp.q = q;
    dp.q_token_stride = qkv_cols;
    dp.out = attn_.get();
    dp.paged_kv = paged_kv(l, a);
    dp.context_lens = a.context_lens;
    dp.workspace = decode_ws_.get();
    dp.dtype = dtype_;
    dp.num_seqs = a.num_decode;
    dp.num_heads = h;
    dp.max_context_len = a.decode_max_context;
    dp.scale = scale;
    dp.sliding_window = cfg_.sliding_window;
    PVLLM_KERNEL_TRY(pvllm_cuda_decode_attention(dp, stream_), "decode attention");
  }
  if (a.num_seqs > a.num_decode) {
    // The prefill rows and block-table rows follow the decode ones.
    const size_t first_row = static_cast<size_t>(a.num_decode);
    PrefillAttentionParams pp;
    pp.q = q + first_row * static_cast<size_t>(qkv_cols) * e;
    pp.q_token_stride = qkv_cols;
    pp.out = attn_.as<unsigned char>() + first_row * static_cast<size_t>(h) * d * e;
    pp.paged_kv = paged_kv(l, a);
    pp.paged_kv.block_tables += static_cast<size_t>(a.num_decode) * a.max_blocks_per_seq;
    pp.query_start = a.prefill_qs;
    pp.context_lens = a.context_lens + a.num_decode;
    pp.work_items = a.work_items;
    pp.dtype = dtype_;
    pp.num_work_items = a.num_work_items;
    pp.num_seqs = a.num_seqs - a.num_decode;
    pp.num_heads = h;
    pp.scale = scale;
    pp.sliding_window = cfg_.sliding_window;
    pp.variant = prefill_variant_;
    PVLLM_KERNEL_TRY(pvllm_cuda_prefill_attention(pp, stream_), "prefill attention");
  }
  return Status::Ok();
}

// Layer l's MLP block: RMSNorm(+residual, adding the attention output) →
// fused gate/up GEMM → SiLU·mul → down GEMM into tmp_.
Status CudaBackend::mlp(int32_t l, const StepArgs& a) {
  const DeviceLayer& w = layers_[l];
  const int32_t t = a.num_tokens;
  const int32_t hidden = cfg_.hidden_size;
  const int32_t inter = cfg_.intermediate_size;

  PVLLM_RETURN_IF_ERROR(rmsnorm(tmp_.get(), hidden_.get(), w.ffn_norm.get(), t, "ffn rmsnorm"));
  PVLLM_RETURN_IF_ERROR(
      gemm(normed_.get(), w.w_gate_up.get(), gate_up_.get(), t, 2 * inter, hidden, false));
  SiluMulParams sp;
  sp.in = gate_up_.get();
  sp.out = act_.get();
  sp.num_tokens = t;
  sp.intermediate = inter;
  sp.dtype = dtype_;
  PVLLM_KERNEL_TRY(pvllm_cuda_silu_mul(sp, stream_), "silu_mul");
  return gemm(act_.get(), w.w_down.get(), tmp_.get(), t, hidden, inter, false);
}

// The last layer's residual add, the final norm and the lm_head, over the
// wanted rows only (all rows when a.logits_rows is null), into logits_.
Status CudaBackend::final_logits(const StepArgs& a) {
  const int32_t hidden = cfg_.hidden_size;
  const void* x = tmp_.get();
  void* res = hidden_.get();
  if (a.logits_rows != nullptr) {
    EmbeddingParams gp;
    gp.ids = a.logits_rows;
    gp.num_tokens = a.num_logits;
    gp.hidden = hidden;
    gp.vocab = a.num_tokens;
    gp.dtype = dtype_;
    gp.table = tmp_.get();
    gp.out = gather_x_.get();
    PVLLM_KERNEL_TRY(pvllm_cuda_embedding(gp, stream_), "gathering logits rows");
    gp.table = hidden_.get();
    gp.out = gather_r_.get();
    PVLLM_KERNEL_TRY(pvllm_cuda_embedding(gp, stream_), "gathering logits rows");
    x = gather_x_.get();
    res = gather_r_.get();
  }
  PVLLM_RETURN_IF_ERROR(rmsnorm(x, res, final_norm_.get(), a.num_logits, "final rmsnorm"));
  return gemm(normed_.get(), lm_head_ptr_, logits_.get(), a.num_logits, cfg_.vocab_size, hidden,
              true);
}

// The per-token and per-sequence inputs of a step, inside a device buffer
// laid out by `l` (the eager metadata buffer or a graph's static one).
StepArgs step_inputs(const unsigned char* dev, const MetaLayout& l) {
  StepArgs a;
  a.input_ids = reinterpret_cast<const int32_t*>(dev + l.input_ids);
  a.positions = reinterpret_cast<const int32_t*>(dev + l.positions);
  a.slots = reinterpret_cast<const int64_t*>(dev + l.slots);
  a.context_lens = reinterpret_cast<const int32_t*>(dev + l.context_lens);
  a.block_tables = reinterpret_cast<const int32_t*>(dev + l.block_tables);
  return a;
}

// Points the step's RoPE at the constant table, or with dynamic scaling at
// the step's per-sequence table in the metadata buffer laid out by `l`.
void CudaBackend::bind_rope(const unsigned char* dev, const MetaLayout& l, StepArgs* a) const {
  if (dynamic_rope_) {
    a->inv_freq = reinterpret_cast<const float*>(dev + l.freq_table);
    a->freq_rows = reinterpret_cast<const int32_t*>(dev + l.freq_rows);
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

// The decode batch-size bucket of `num_seqs` sequences: the smallest that
// holds them.
int32_t graph_bucket(int32_t num_seqs) {
  for (int32_t b : kGraphBuckets) {
    if (b >= num_seqs) return b;
  }
  return 0;
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

Status CudaBackend::forward(const BatchMetadata& md, float* logits) {
  // The current device is per host thread; step() may run on any thread.
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  if (logits == nullptr && !md.logits_rows.empty()) {
    return InvalidArgument("forward: logits is NULL but logits_rows is not empty");
  }
  Status st = enqueue_forward(md);
  if (st.ok()) st = copy_logits(md, logits);
  return finish_step(st);
}

Status CudaBackend::forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                                   std::vector<SampleResult>* out) {
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  PVLLM_RETURN_IF_ERROR(validate_sample_rows(rows, static_cast<int32_t>(md.logits_rows.size())));
  Status st = enqueue_forward(md);
  if (st.ok()) st = sample(rows, out);
  return finish_step(st);
}

// After a failed step, leaves the stream idle and clears a non-sticky error
// so that the next batch starts clean.
Status CudaBackend::finish_step(Status st) {
  if (!st.ok()) {
    cudaStreamSynchronize(stream_);
    cudaGetLastError();
  }
  return st;
}

// Enqueues the model over `md` on stream_ without waiting: a pure-decode
// batch replays its bucket's graph, anything else (and a bucket whose
// capture failed) runs eagerly. Sets logits_row_of_.
Status CudaBackend::enqueue_forward(const BatchMetadata& md) {
  PVLLM_RETURN_IF_ERROR(check_batch_fits(md));
  const int32_t t = md.num_tokens, s = md.num_seqs;
  // Leading single-row sequences take the decode kernel.
  int32_t num_decode = 0;
  while (num_decode < s && md.query_start[num_decode + 1] - md.query_start[num_decode] == 1) {
    ++num_decode;
  }
  if (num_decode == s && t == s && s <= graph_max_batch_) {
    const int32_t batch = graph_bucket(s);
    DecodeGraph& g = graphs_[batch];
    if (!g.failed) {
      PVLLM_RETURN_IF_ERROR(stage_graph_inputs(md, batch));
      if (g.exec == nullptr) {
        const Status cs = capture(batch, &g);
        if (!cs.ok()) {
          // Degrade, never fail: this size runs eagerly from now on.
          g.failed = true;
          cudaGetLastError();
          log_warning("CUDA graph capture for decode batches of " + std::to_string(batch) +
                      " failed (" + cs.message() + "); they run without a graph from now on");
        }
      }
      if (g.exec != nullptr) {
        PVLLM_CUDA_TRY(cudaGraphLaunch(g.exec, stream_), "launching the decode graph");
        logits_row_of_.assign(md.logits_rows.begin(), md.logits_rows.end());
        return Status::Ok();
      }
    }
  }
  PVLLM_RETURN_IF_ERROR(enqueue_eager(md, num_decode));
  logits_row_of_.resize(md.logits_rows.size());
  std::iota(logits_row_of_.begin(), logits_row_of_.end(), 0);
  return Status::Ok();
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
  const MetaLayout l = layout_for(t, s, mb, num_work, num_logits, freq_floats());
  if (l.total > meta_host_.bytes()) return Internal("metadata exceeds its buffer");

  auto* h = meta_host_.as<unsigned char>();
  std::memcpy(h + l.input_ids, md.input_ids.data(), t * 4);
  std::memcpy(h + l.positions, md.positions.data(), t * 4);
  std::memcpy(h + l.slots, md.slot_mapping.data(), t * 8);
  std::memcpy(h + l.context_lens, md.context_lens.data(), s * 4);
  if (dynamic_rope_) {
    fill_freq_tables(md, t, reinterpret_cast<int32_t*>(h + l.freq_rows),
                     reinterpret_cast<float*>(h + l.freq_table));
  }
  if (md.max_blocks_per_seq > 0) {
    std::memcpy(h + l.block_tables, md.block_tables.data(),
                static_cast<size_t>(s) * md.max_blocks_per_seq * 4);
  }
  std::memcpy(h + l.prefill_qs, prefill_qs.data(), prefill_qs.size() * 4);
  std::memcpy(h + l.work_items, work.data(), work.size() * 4);
  std::memcpy(h + l.logits_rows, md.logits_rows.data(), md.logits_rows.size() * 4);
  PVLLM_CUDA_TRY(cudaMemcpyAsync(meta_dev_.get(), h, l.total, cudaMemcpyHostToDevice, stream_),
                 "copying batch metadata");

  const auto* dev = meta_dev_.as<unsigned char>();
  StepArgs a = step_inputs(dev, l);
  bind_rope(dev, l, &a);
  a.max_blocks_per_seq = mb;
  a.num_tokens = t;
  a.num_seqs = s;
  a.num_decode = num_decode;
  for (int32_t i = 0; i < num_decode; ++i) {
    a.decode_max_context = std::max(a.decode_max_context, md.context_lens[i]);
  }
  a.prefill_qs = reinterpret_cast<const int32_t*>(dev + l.prefill_qs);
  a.work_items = reinterpret_cast<const int32_t*>(dev + l.work_items);
  a.num_work_items = num_work;
  a.logits_rows = reinterpret_cast<const int32_t*>(dev + l.logits_rows);
  a.num_logits = num_logits;
  // With num_logits == 0 (a middle prompt chunk) there is still K/V to write.
  return run_model(a);
}

Status CudaBackend::capture(int32_t batch, DecodeGraph* g) {
  const auto* dev = graph_dev_.as<unsigned char>();
  const MetaLayout& l = graph_layout_;
  StepArgs a = step_inputs(dev, l);
  bind_rope(dev, l, &a);
  a.max_blocks_per_seq = max_blocks_;
  a.num_tokens = batch;
  a.num_seqs = batch;
  a.num_decode = batch;
  // The split plan is fixed at capture, so it is made for the longest context.
  a.decode_max_context = max_blocks_ * opt_.block_size;
  a.num_logits = batch;  // every row; sampling reads the wanted ones

  // One eager run first, on the same static inputs: it loads every kernel
  // module (lazy loading) and lets cuBLAS pick and initialise its kernels
  // outside the capture, where none of that is allowed. It repeats exactly
  // the K/V writes the graph launch then makes (same rows, same slots).
  PVLLM_RETURN_IF_ERROR(run_model(a));
  PVLLM_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                 "beginning graph capture");
  const Status st = run_model(a);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!st.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return st;
  }
  PVLLM_CUDA_TRY(end, "capturing the decode graph for batch " + std::to_string(batch));
  const cudaError_t inst = cudaGraphInstantiate(&g->exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) g->exec = nullptr;
  PVLLM_CUDA_TRY(inst, "instantiating the decode graph for batch " + std::to_string(batch));
  return Status::Ok();
}

// Writes the graph's static inputs for `md`, padded to `batch` rows: padding
// rows write no K/V (slot -1) and attend to nothing (context 0). The block
// tables go over at the width of the longest scheduled table, not
// max_model_len's: one 2-D copy into rows of the graph's [batch, max_blocks_]
// table (entries past a row's width are never read: its context ends before).
Status CudaBackend::stage_graph_inputs(const BatchMetadata& md, int32_t batch) {
  const int32_t s = md.num_seqs;
  const MetaLayout& l = graph_layout_;
  auto* h = graph_host_.as<unsigned char>();
  auto* ids = reinterpret_cast<int32_t*>(h + l.input_ids);
  auto* pos = reinterpret_cast<int32_t*>(h + l.positions);
  auto* slots = reinterpret_cast<int64_t*>(h + l.slots);
  auto* ctx = reinterpret_cast<int32_t*>(h + l.context_lens);
  for (int32_t i = 0; i < batch; ++i) {
    const bool real = i < s;
    ids[i] = real ? md.input_ids[i] : 0;
    pos[i] = real ? md.positions[i] : 0;
    slots[i] = real ? md.slot_mapping[i] : -1;
    ctx[i] = real ? md.context_lens[i] : 0;
  }
  if (dynamic_rope_) {
    fill_freq_tables(md, batch, reinterpret_cast<int32_t*>(h + l.freq_rows),
                     reinterpret_cast<float*>(h + l.freq_table));
  }
  const int32_t width = std::max(md.max_blocks_per_seq, 1);
  auto* tables = reinterpret_cast<int32_t*>(h + l.block_tables);  // [s, width] packed
  for (int32_t i = 0; i < s; ++i) {
    for (int32_t j = 0; j < width; ++j) {
      const int32_t b = j < md.max_blocks_per_seq
                            ? md.block_tables[static_cast<size_t>(i) * md.max_blocks_per_seq + j]
                            : 0;
      tables[static_cast<size_t>(i) * width + j] = b < 0 ? 0 : b;
    }
  }
  PVLLM_CUDA_TRY(
      cudaMemcpyAsync(graph_dev_.get(), h, l.block_tables, cudaMemcpyHostToDevice, stream_),
      "copying graph inputs");
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(int32_t);
  PVLLM_CUDA_TRY(
      cudaMemcpy2DAsync(graph_dev_.as<unsigned char>() + l.block_tables,
                        static_cast<size_t>(max_blocks_) * sizeof(int32_t), tables, row_bytes,
                        row_bytes, static_cast<size_t>(s), cudaMemcpyHostToDevice, stream_),
      "copying graph block tables");
  return Status::Ok();
}

// Copies the logits of md.logits_rows from where this step left them to
// host memory and waits for the step.
Status CudaBackend::copy_logits(const BatchMetadata& md, float* logits) {
  const size_t row_bytes = static_cast<size_t>(cfg_.vocab_size) * sizeof(float);
  const auto* dev_logits = logits_.as<unsigned char>();
  for (size_t i = 0; i < logits_row_of_.size(); ++i) {
    // Runs of consecutive rows go in one copy (usually all of them).
    size_t j = i + 1;
    while (j < logits_row_of_.size() && logits_row_of_[j] == logits_row_of_[j - 1] + 1) ++j;
    PVLLM_CUDA_TRY(cudaMemcpyAsync(reinterpret_cast<unsigned char*>(logits) + i * row_bytes,
                                   dev_logits + static_cast<size_t>(logits_row_of_[i]) * row_bytes,
                                   (j - i) * row_bytes, cudaMemcpyDeviceToHost, stream_),
                   "copying logits");
    i = j - 1;
  }
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward");
  return Status::Ok();
}

// Draws `rows` from this step's logits on the device: the plan's inputs go
// over in one copy, the tokens and asked-for logprobs come back in one, and
// nothing else crosses. Waits for the step.
Status CudaBackend::sample(std::span<const SampleRow> rows, std::vector<SampleResult>* out) {
  if (rows.empty()) {
    out->clear();
    PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward");
    return Status::Ok();
  }
  const int32_t vocab = cfg_.vocab_size;
  plan_.build(rows, logits_row_of_, vocab);
  const std::vector<unsigned char>& in = plan_.inputs();
  const size_t out_bytes = plan_.output_bytes();
  const size_t ws_bytes = pvllm_cuda_sampling_workspace_bytes(plan_.num_penalty_slots(), vocab);
  PVLLM_RETURN_IF_ERROR(sample_in_host_.reserve(in.size(), "sampling inputs"));
  PVLLM_RETURN_IF_ERROR(sample_in_dev_.reserve(in.size(), "sampling inputs"));
  PVLLM_RETURN_IF_ERROR(sample_out_dev_.reserve(out_bytes, "sampled tokens"));
  PVLLM_RETURN_IF_ERROR(sample_out_host_.reserve(out_bytes, "sampled tokens"));
  if (ws_bytes > 0) PVLLM_RETURN_IF_ERROR(sample_ws_.reserve(ws_bytes, "penalized logits"));

  std::memcpy(sample_in_host_.get(), in.data(), in.size());
  PVLLM_CUDA_TRY(cudaMemcpyAsync(sample_in_dev_.get(), sample_in_host_.get(), in.size(),
                                 cudaMemcpyHostToDevice, stream_),
                 "copying sampling inputs");
  DeviceSamplingParams p;
  plan_.bind(sample_in_dev_.get(), sample_out_dev_.get(), logits_.as<float>(), sample_ws_.get(),
             sample_ws_.bytes(), &p);
  PVLLM_KERNEL_TRY(pvllm_cuda_sample(p, stream_), "sampling");
  PVLLM_CUDA_TRY(cudaMemcpyAsync(sample_out_host_.get(), sample_out_dev_.get(), out_bytes,
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying sampled tokens");
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward and sampling");
  plan_.read_results(rows, sample_out_host_.get(), out);
  return Status::Ok();
}

Status CudaBackend::copy_blocks(const std::vector<BlockCopy>& copies) {
  if (copies.empty()) return Status::Ok();
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  if (copies.size() > max_copies_) {
    max_copies_ = std::max(copies.size(), size_t{256});
    PVLLM_RETURN_IF_ERROR(copy_pairs_.allocate(max_copies_ * 2 * sizeof(int32_t), "copy pairs"));
  }
  std::vector<int32_t> pairs;
  pairs.reserve(copies.size() * 2);
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= num_blocks_ || c.dst < 0 || c.dst >= num_blocks_) {
      return InvalidArgument("block copy " + std::to_string(c.src) + " -> " +
                             std::to_string(c.dst) + " outside the pool");
    }
    pairs.push_back(c.src);
    pairs.push_back(c.dst);
  }
  PVLLM_CUDA_TRY(cudaMemcpyAsync(copy_pairs_.get(), pairs.data(), pairs.size() * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, stream_),
                 "copying block pairs");
  BlockCopyParams p;
  p.k_cache = k_cache_.get();
  p.v_cache = v_cache_.get();
  p.pairs = copy_pairs_.as<int32_t>();
  p.num_copies = static_cast<int32_t>(copies.size());
  p.block_bytes = static_cast<int64_t>(kv_layer_bytes_ / static_cast<size_t>(num_blocks_));
  p.num_layers = cfg_.num_layers;
  p.layer_stride_bytes = static_cast<int64_t>(kv_layer_bytes_);
  PVLLM_KERNEL_TRY(pvllm_cuda_copy_blocks(p, stream_), "copy_blocks");
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "copy_blocks");
  return Status::Ok();
}

Status CudaBackend::reserve_swap_space(int64_t bytes, int32_t* out_blocks) {
  if (bytes < 0) return InvalidArgument("cuda backend: a negative swap space");
  const size_t per_block = kv_bytes_per_block(cfg_, opt_.block_size, elem());
  const int32_t num_blocks = swap_pool_blocks(bytes, per_block, num_blocks_, opt_.block_size);
  PVLLM_RETURN_IF_ERROR(
      swap_.allocate(static_cast<size_t>(num_blocks) * per_block, "the swap space (pinned)"));
  num_swap_blocks_ = num_blocks;
  *out_blocks = num_blocks;
  return Status::Ok();
}

// One block of every layer's K (then V) per copy: a 2D copy whose rows are
// the layers (the pool keeps each layer's blocks together, the swap space
// each block's layers).
Status CudaBackend::swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection direction) {
  if (copies.empty()) return Status::Ok();
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  const bool out = direction == SwapDirection::kOut;
  const size_t block_bytes = kv_layer_bytes_ / static_cast<size_t>(num_blocks_);
  const size_t layers = static_cast<size_t>(cfg_.num_layers);
  for (const BlockCopy& c : copies) {
    const int32_t pool = out ? c.src : c.dst;
    const int32_t swap = out ? c.dst : c.src;
    if (pool < 0 || pool >= num_blocks_ || swap < 0 || swap >= num_swap_blocks_) {
      return InvalidArgument("swap_blocks: block " + std::to_string(c.src) + " -> " +
                             std::to_string(c.dst) + " is outside the pool or the swap space");
    }
    unsigned char* host =
        swap_.as<unsigned char>() + static_cast<size_t>(swap) * 2 * layers * block_bytes;
    for (int kv = 0; kv < 2; ++kv) {
      unsigned char* dev = (kv == 0 ? k_cache_ : v_cache_).as<unsigned char>() +
                           static_cast<size_t>(pool) * block_bytes;
      unsigned char* h = host + static_cast<size_t>(kv) * layers * block_bytes;
      const cudaError_t e =
          out ? cudaMemcpy2DAsync(h, block_bytes, dev, kv_layer_bytes_, block_bytes, layers,
                                  cudaMemcpyDeviceToHost, stream_)
              : cudaMemcpy2DAsync(dev, kv_layer_bytes_, h, block_bytes, block_bytes, layers,
                                  cudaMemcpyHostToDevice, stream_);
      if (e != cudaSuccess)
        return cuda_status(e, out ? "swapping a block out" : "swapping a block in");
    }
  }
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "swap_blocks");
  return Status::Ok();
}

// Rough figures for a datacenter GPU: 300 TFLOP/s for recomputing (two
// FLOPs per weight per token) and 20 GB/s each way over PCIe.
PreemptionCosts CudaBackend::preemption_costs() const {
  const double flops_per_token = weight_flops_per_token(cfg_);
  const size_t block = kv_bytes_per_block(cfg_, opt_.block_size, elem());
  return {flops_per_token / 300e12, 2.0 * static_cast<double>(block) / 20e9, block};
}

int32_t fail(const Status& s, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s", s.message().c_str());
  return static_cast<int32_t>(s.code());
}

}  // namespace
}  // namespace pvllm

#define PVLLM_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_module_interface_version() {
  return pvllm::kCudaModuleInterfaceVersion;
}

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_device_count(int32_t* count, char* err, size_t err_len) {
  return pvllm::fail(pvllm::device_count(count), err, err_len);
}

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_mem_info(int32_t device, size_t* free_bytes,
                                              size_t* total_bytes, char* err, size_t err_len) {
  int32_t n = 0;
  pvllm::Status s = pvllm::device_count(&n);
  if (s.ok() && (device < 0 || device >= n)) {
    s = pvllm::Unsupported("CUDA device " + std::to_string(device) + " does not exist (" +
                           std::to_string(n) + " devices)");
  }
  if (s.ok()) {
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess) s = pvllm::cuda_status(e, "cudaMemGetInfo");
  }
  return pvllm::fail(s, err, err_len);
}

PVLLM_CUDA_EXPORT int32_t pvllm_cuda_backend_create(const pvllm::Model* model,
                                                    const pvllm::CudaBackendOptions* options,
                                                    pvllm::Backend** out, char* err,
                                                    size_t err_len) {
  if (model == nullptr || options == nullptr || out == nullptr) {
    return pvllm::fail(pvllm::InvalidArgument("null argument"), err, err_len);
  }
  *out = nullptr;
  pvllm::set_alloc_fault_hook(options->fail_device_alloc);
  // No exception may cross the C boundary (host allocations can throw).
  try {
    auto backend = std::make_unique<pvllm::CudaBackend>(*model, *options);
    const pvllm::Status s = backend->init();
    if (!s.ok()) return pvllm::fail(s, err, err_len);
    *out = backend.release();
  } catch (const std::bad_alloc&) {
    return pvllm::fail(pvllm::OutOfMemory("creating the CUDA backend: out of host memory"), err,
                       err_len);
  } catch (const std::exception& e) {
    return pvllm::fail(pvllm::Internal(std::string("creating the CUDA backend: ") + e.what()), err,
                       err_len);
  }
  return 0;
}
