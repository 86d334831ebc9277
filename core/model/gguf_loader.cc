// A GGUF model's tensors into ModelWeights (gguf_model.h): views of the
// mapping, in the tensor's own type, taken by llama.cpp's tensor names.
#include <limits>
#include <string>
#include <utility>

#include "core/model/gguf_model.h"

namespace pvllm {

namespace {

class TensorTaker {
 public:
  TensorTaker(const gguf::File& file, std::vector<bool>* taken)
      : file_(file), path_(file.parts.front().path), taken_(*taken) {}

  // The tensor `name` with `shape` (row-major: {rows, cols} for a matrix),
  // or an empty Tensor when absent and not `required`.
  Status take(const std::string& name, std::vector<int64_t> shape, bool required, Tensor* out) {
    const gguf::TensorInfo* info = file_.find_tensor(name);
    if (info == nullptr) {
      if (!required) return Status::Ok();
      return CorruptModel(path_ + ": tensor " + name + " is missing");
    }
    DType dtype;
    if (!dtype_of_ggml(info->type, &dtype)) {
      return Unsupported(path_ + ": tensor " + name + " has type " + ggml::type_name(info->type) +
                         ", which pvllm does not serve (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                         "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
    }
    const std::vector<int64_t> stored(info->dims.rbegin(), info->dims.rend());
    if (stored != shape) {
      return CorruptModel(path_ + ": tensor " + name + " has shape " + shape_text(stored) +
                          ", the metadata implies " + shape_text(shape));
    }
    if (dtype_is_quantized(dtype) && shape.size() == 1) {
      return Unsupported(path_ + ": tensor " + name + " is a vector of type " + dtype_name(dtype) +
                         "; pvllm reads vectors in F32, F16 or BF16");
    }
    Tensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data = file_.tensor_data(*info);
    taken_[file_.tensor_index.at(name)] = true;
    *out = std::move(t);
    return Status::Ok();
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

 private:
  static std::string shape_text(const std::vector<int64_t>& s) {
    std::string out;
    for (int64_t d : s) out += (out.empty() ? "" : "x") + std::to_string(d);
    return out;
  }

  const gguf::File& file_;
  std::string path_;
  std::vector<bool>& taken_;
};

Status take_layer(TensorTaker& t, const ModelConfig& c, int32_t i, LayerWeights* lw) {
  const std::string p = "blk." + std::to_string(i) + ".";
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size;
  PVLLM_RETURN_IF_ERROR(t.take(p + "attn_norm.weight", {hidden}, true, &lw->attn_norm));
  PVLLM_RETURN_IF_ERROR(t.take(p + "attn_q.weight", {q_dim, hidden}, true, &lw->wq));
  PVLLM_RETURN_IF_ERROR(t.take(p + "attn_k.weight", {kv_dim, hidden}, true, &lw->wk));
  PVLLM_RETURN_IF_ERROR(t.take(p + "attn_v.weight", {kv_dim, hidden}, true, &lw->wv));
  PVLLM_RETURN_IF_ERROR(t.take(p + "attn_output.weight", {hidden, q_dim}, true, &lw->wo));
  PVLLM_RETURN_IF_ERROR(t.take(p + "ffn_norm.weight", {hidden}, true, &lw->ffn_norm));
  PVLLM_RETURN_IF_ERROR(t.take(p + "ffn_gate.weight", {inter, hidden}, true, &lw->w_gate));
  PVLLM_RETURN_IF_ERROR(t.take(p + "ffn_up.weight", {inter, hidden}, true, &lw->w_up));
  PVLLM_RETURN_IF_ERROR(t.take(p + "ffn_down.weight", {hidden, inter}, true, &lw->w_down));
  if (c.qkv_bias) {
    PVLLM_RETURN_IF_ERROR(t.take(p + "attn_q.bias", {q_dim}, true, &lw->bq));
    PVLLM_RETURN_IF_ERROR(t.take(p + "attn_k.bias", {kv_dim}, true, &lw->bk));
    PVLLM_RETURN_IF_ERROR(t.take(p + "attn_v.bias", {kv_dim}, true, &lw->bv));
  }
  if (c.o_bias) PVLLM_RETURN_IF_ERROR(t.take(p + "attn_output.bias", {hidden}, true, &lw->bo));
  if (c.qk_norm) {
    PVLLM_RETURN_IF_ERROR(t.take(p + "attn_q_norm.weight", {c.head_dim}, true, &lw->q_norm));
    PVLLM_RETURN_IF_ERROR(t.take(p + "attn_k_norm.weight", {c.head_dim}, true, &lw->k_norm));
  }
  return Status::Ok();
}

// Llama 3.1's scaling, as llama.cpp's converter stores it: one divisor per
// frequency in rope_freqs.weight.
Status take_rope_freqs(TensorTaker& t, ModelConfig* c) {
  if (!t.has("rope_freqs.weight")) return Status::Ok();
  Tensor f;
  PVLLM_RETURN_IF_ERROR(t.take("rope_freqs.weight", {c->head_dim / 2}, true, &f));
  c->rope_freq_factors.resize(static_cast<size_t>(c->head_dim / 2));
  for (size_t i = 0; i < c->rope_freq_factors.size(); ++i) {
    c->rope_freq_factors[i] = load_as_float(f.dtype, f.data, static_cast<int64_t>(i));
  }
  return Status::Ok();
}

}  // namespace

Status load_gguf_model(const std::string& path, std::unique_ptr<Model>* out) {
  gguf::File file;
  PVLLM_RETURN_IF_ERROR(gguf::open(path, &file));
  auto model = std::make_unique<Model>();
  model->format = ModelFormat::kGguf;
  model->path = path;
  ModelConfig& c = model->config;
  PVLLM_RETURN_IF_ERROR(gguf_model_config(file, &c));
  const std::string& first = file.parts.front().path;

  // A "llama" file may carry biases (llama.cpp reads them when present).
  if (c.architecture == "llama") {
    c.qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
    c.o_bias = file.find_tensor("blk.0.attn_output.bias") != nullptr;
  }
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return CorruptModel(first + ": tensor token_embd.weight is missing");
  if (embd->dims.size() == 2 && c.vocab_size == 0 &&
      embd->dims[1] <= std::numeric_limits<int32_t>::max()) {
    c.vocab_size = static_cast<int32_t>(embd->dims[1]);
  }

  std::vector<bool> taken(file.tensors.size(), false);
  TensorTaker t(file, &taken);
  PVLLM_RETURN_IF_ERROR(take_rope_freqs(t, &c));
  if (Status s = c.validate(); !s.ok()) return CorruptModel(first + ": " + s.message());

  ModelWeights& w = model->weights;
  const int64_t hidden = c.hidden_size;
  PVLLM_RETURN_IF_ERROR(t.take("token_embd.weight", {c.vocab_size, hidden}, true, &w.embed));
  PVLLM_RETURN_IF_ERROR(t.take("output_norm.weight", {hidden}, true, &w.final_norm));
  PVLLM_RETURN_IF_ERROR(t.take("output.weight", {c.vocab_size, hidden}, false, &w.lm_head));
  c.tie_word_embeddings = w.lm_head.empty();
  if (c.tie_word_embeddings) w.lm_head = w.embed;
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int32_t i = 0; i < c.num_layers; ++i) {
    PVLLM_RETURN_IF_ERROR(take_layer(t, c, i, &w.layers[static_cast<size_t>(i)]));
  }
  for (size_t i = 0; i < taken.size(); ++i) {
    if (!taken[i]) {
      return Unsupported(first + ": tensor " + file.tensors[i].name +
                         " is not one pvllm reads for architecture " + c.architecture +
                         " (a part of the model pvllm does not implement)");
    }
  }
  for (const gguf::Part& part : file.parts) model->files.push_back(part.file);
  model->tokenizer_path = path;
  *out = std::move(model);
  return Status::Ok();
}

}  // namespace pvllm
