// The forward pass: run_model enqueues the embedding, then per layer the
// attention block (whose paged_attention runs the decode and prefill
// kernels over the KV pool) and the MLP block, then the final norm and
// lm_head over the wanted rows; plus the GEMM, RMSNorm and bias add they
// share. Everything here only enqueues on stream_, so a graph can capture
// it.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/common/paged_kv.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/head_norm.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"

namespace pvllm::cuda {

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
  for (int32_t layer = 0; layer < cfg_.num_layers; ++layer) {
    PVLLM_RETURN_IF_ERROR(attention_block(layer, a));
    PVLLM_RETURN_IF_ERROR(mlp(layer, a));
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

// The K/V pool of `layer` as the kernels see it, with the step's block tables.
PagedKv CudaBackend::paged_kv(int32_t layer, const StepArgs& a) const {
  PagedKv kv;
  kv.k_cache = k_layer(layer);
  kv.v_cache = v_layer(layer);
  kv.block_tables = a.block_tables;
  kv.max_blocks_per_seq = a.max_blocks_per_seq;
  kv.block_size = opt_.block_size;
  kv.num_kv_heads = cfg_.num_kv_heads;
  kv.head_dim = cfg_.head_dim;
  kv.cache_dtype = kv_dtype_;
  return kv;
}

// The attention block of `layer`: RMSNorm(+residual) → fused QKV GEMM (+bias) →
// per-head q/k RMSNorm → RoPE → KV write → decode / prefill attention → O
// GEMM (+bias) into tmp_.
Status CudaBackend::attention_block(int32_t layer, const StepArgs& a) {
  const DeviceLayer& w = layers_[layer];
  const int32_t t = a.num_tokens;
  const int32_t hidden = cfg_.hidden_size;
  const int32_t h = cfg_.num_heads, kvh = cfg_.num_kv_heads, d = cfg_.head_dim;
  const int32_t qkv_cols = (h + 2 * kvh) * d;
  const size_t e = elem();

  // The previous layer's down projection joins the residual here.
  PVLLM_RETURN_IF_ERROR(rmsnorm(layer == 0 ? hidden_.get() : tmp_.get(),
                                layer == 0 ? nullptr : hidden_.get(), w.attn_norm.get(), t,
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
  kp.paged_kv = paged_kv(layer, a);
  kp.slot_mapping = a.slots;
  kp.dtype = dtype_;
  kp.num_tokens = t;
  PVLLM_KERNEL_TRY(pvllm_cuda_write_kv(kp, stream_), "kv_write");

  PVLLM_RETURN_IF_ERROR(paged_attention(layer, a, q));
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

// attn_ = attention of every query row over the paged cache of `layer`: the
// leading one-row sequences through the decode kernel, the prefill chunks
// after them through the prefill kernel. `q` is row 0 of qkv_.
Status CudaBackend::paged_attention(int32_t layer, const StepArgs& a, const unsigned char* q) {
  const int32_t h = cfg_.num_heads, kvh = cfg_.num_kv_heads, d = cfg_.head_dim;
  const int32_t qkv_cols = (h + 2 * kvh) * d;
  const size_t e = elem();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  if (a.num_decode > 0) {
    DecodeAttentionParams dp;
    dp.q = q;
    dp.q_token_stride = qkv_cols;
    dp.out = attn_.get();
    dp.paged_kv = paged_kv(layer, a);
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
    pp.paged_kv = paged_kv(layer, a);
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

// The MLP block of `layer`: RMSNorm(+residual, adding the attention output) →
// fused gate/up GEMM → SiLU·mul → down GEMM into tmp_.
Status CudaBackend::mlp(int32_t layer, const StepArgs& a) {
  const DeviceLayer& w = layers_[layer];
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

}  // namespace pvllm::cuda
