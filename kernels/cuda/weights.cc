// Uploading the weights: every tensor goes to the device in the backend's
// dtype (converted on the host in chunks when the checkpoint holds
// another), q/k/v rows as one fused QKV matrix and gate/up as one, the
// lm_head shared with the embedding when they are tied, and the RoPE
// frequencies.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "kernels/cuda/cuda_backend.h"

namespace pvllm::cuda {

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

}  // namespace pvllm::cuda
