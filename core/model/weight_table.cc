// Taking a model's weights from the tensors its checkpoint offers.
#include "core/model/weight_table.h"

#include <cstring>

namespace pvllm {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Status take(const WeightTable& table, const std::string& name, const std::vector<int64_t>& expected,
            Tensor* out, Layout layout = Layout::kRowMajor) {
  auto it = table.by_name.find(name);
  if (it == table.by_name.end()) return NotFound(table.source + ": missing tensor " + name);
  const WeightTable::Entry& e = it->second;
  if (e.tensor.layout != layout) {
    return CorruptModel(e.file + ": tensor " + name + " is stored " +
                        (e.tensor.layout == Layout::kPanels16 ? "in panels" : "row-major") +
                        ", expected " + (layout == Layout::kPanels16 ? "panels" : "row-major"));
  }
  if (e.tensor.shape != expected) {
    return CorruptModel(e.file + ": tensor " + name + " has shape " + shape_string(e.tensor.shape) +
                        ", expected " + shape_string(expected));
  }
  *out = e.tensor;
  table.taken.insert(name);
  return Status::Ok();
}

// A tied checkpoint that also stores lm_head.weight: accepted when it holds
// the embedding's bytes (the head the config ties), refused otherwise.
Status check_tied_head(const WeightTable& t, const Tensor& embed) {
  auto it = t.by_name.find("lm_head.weight");
  if (it == t.by_name.end()) return Status::Ok();
  const Tensor& head = it->second.tensor;
  if (head.shape != embed.shape || head.dtype != embed.dtype ||
      std::memcmp(head.data, embed.data, embed.nbytes()) != 0) {
    return Unsupported(it->second.file +
                       ": tensor lm_head.weight differs from model.embed_tokens.weight, but "
                       "tie_word_embeddings is true (the head would be ignored)");
  }
  t.taken.insert("lm_head.weight");
  return Status::Ok();
}

// The projections of a file in the panel layout.
Status take_packed_layer(const WeightTable& t, const ModelConfig& c, const std::string& p,
                         PackedLayerWeights* l) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_rows = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size;
  constexpr Layout kP = Layout::kPanels16;
  PVLLM_RETURN_IF_ERROR(
      take(t, p + "self_attn.qkv_proj.weight", {q_rows + 2 * kv_rows, hidden}, &l->qkv, kP));
  PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.o_proj.weight", {hidden, q_rows}, &l->wo, kP));
  PVLLM_RETURN_IF_ERROR(
      take(t, p + "mlp.gate_up_proj.weight", {2 * inter, hidden}, &l->gate_up, kP));
  return take(t, p + "mlp.down_proj.weight", {hidden, inter}, &l->down, kP);
}

}  // namespace

Status take_weights(const WeightTable& t, const ModelConfig& c, bool packed, ModelWeights* w) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_rows = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size;
  PVLLM_RETURN_IF_ERROR(take(t, "model.embed_tokens.weight", {c.vocab_size, hidden}, &w->embed));
  // A layer has nine tensors, so a num_hidden_layers beyond the tensor
  // count cannot be right: refused before a layer table of that size is
  // allocated (a checkpoint short of a few tensors gets the missing one
  // named below instead).
  if (int64_t{c.num_layers} > static_cast<int64_t>(t.by_name.size())) {
    return CorruptModel(t.source + ": num_hidden_layers " + std::to_string(c.num_layers) +
                        " exceeds the checkpoint's " + std::to_string(t.by_name.size()) +
                        " tensors (each layer has nine)");
  }
  w->layers.resize(c.num_layers);
  if (packed) w->packed.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w->layers[i];
    PVLLM_RETURN_IF_ERROR(take(t, p + "input_layernorm.weight", {hidden}, &l.attn_norm));
    PVLLM_RETURN_IF_ERROR(take(t, p + "post_attention_layernorm.weight", {hidden}, &l.ffn_norm));
    if (packed) {
      PVLLM_RETURN_IF_ERROR(take_packed_layer(t, c, p, &w->packed[i]));
    } else {
      PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.q_proj.weight", {q_rows, hidden}, &l.wq));
      PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.k_proj.weight", {kv_rows, hidden}, &l.wk));
      PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.v_proj.weight", {kv_rows, hidden}, &l.wv));
      PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.o_proj.weight", {hidden, q_rows}, &l.wo));
      PVLLM_RETURN_IF_ERROR(take(t, p + "mlp.gate_proj.weight", {inter, hidden}, &l.w_gate));
      PVLLM_RETURN_IF_ERROR(take(t, p + "mlp.up_proj.weight", {inter, hidden}, &l.w_up));
      PVLLM_RETURN_IF_ERROR(take(t, p + "mlp.down_proj.weight", {hidden, inter}, &l.w_down));
    }
    const std::string a = p + "self_attn.";
    if (c.qkv_bias) {
      PVLLM_RETURN_IF_ERROR(take(t, a + "q_proj.bias", {q_rows}, &l.bq));
      PVLLM_RETURN_IF_ERROR(take(t, a + "k_proj.bias", {kv_rows}, &l.bk));
      PVLLM_RETURN_IF_ERROR(take(t, a + "v_proj.bias", {kv_rows}, &l.bv));
    }
    if (c.o_bias) PVLLM_RETURN_IF_ERROR(take(t, a + "o_proj.bias", {hidden}, &l.bo));
    if (c.qk_norm) {
      PVLLM_RETURN_IF_ERROR(take(t, a + "q_norm.weight", {c.head_dim}, &l.q_norm));
      PVLLM_RETURN_IF_ERROR(take(t, a + "k_norm.weight", {c.head_dim}, &l.k_norm));
    }
  }
  PVLLM_RETURN_IF_ERROR(take(t, "model.norm.weight", {hidden}, &w->final_norm));
  // A packed file always stores the head packed (from the embedding when
  // tied); the row-major embedding stays for the lookup.
  if (packed) {
    if (c.tie_word_embeddings) w->lm_head = w->embed;
    return take(t, "lm_head.weight", {c.vocab_size, hidden}, &w->packed_lm_head, Layout::kPanels16);
  }
  // Tied checkpoints usually omit lm_head; when tied, embed is authoritative.
  if (c.tie_word_embeddings) {
    w->lm_head = w->embed;
    return check_tied_head(t, w->embed);
  }
  return take(t, "lm_head.weight", {c.vocab_size, hidden}, &w->lm_head);
}

namespace {

// Derived buffers some exports keep: recomputed from the config, never read.
bool is_derived_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// Every tensor of the checkpoint must have been taken: one the config does
// not account for (a bias with attention_bias false, a q_norm on Llama)
// would be silently ignored.
Status check_all_taken(const WeightTable& t, const ModelConfig& c) {
  for (const auto& [name, entry] : t.by_name) {
    if (t.taken.count(name) != 0 || is_derived_buffer(name)) continue;
    return Unsupported(entry.file + ": tensor " + name + " is not used by a " + c.architecture +
                       " model with this config.json (attention_bias, qk norm and tied "
                       "embeddings as the config sets them); pvllm refuses to ignore weights");
  }
  return Status::Ok();
}

}  // namespace pvllm
