// Hugging Face folders (Llama, Mistral, Qwen2, Qwen3): config.json plus
// model.safetensors, or shards listed by model.safetensors.index.json.
// Weights stay in the mappings. Every tensor the checkpoint holds is taken
// by the config (biases and q/k norms only when it asks for them); one it
// does not account for is refused, never silently ignored.
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/model/hf_config.h"
#include "core/model/json_file.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"

namespace pvllm {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every tensor the checkpoint offers, with the file it came from.
struct WeightTable {
  struct Entry {
    Tensor tensor;
    std::string file;
  };
  std::map<std::string, Entry> by_name;
  std::string source;  // the file named when a tensor is missing
  mutable std::set<std::string> taken;
};

Status open_single(const std::string& path, Model* model, WeightTable* table) {
  SafetensorsFile st;
  PVLLM_RETURN_IF_ERROR(open_safetensors(path, &st));
  for (auto& [name, tensor] : st.tensors) table->by_name[name] = {tensor, path};
  model->files.push_back(st.file);
  table->source = path;
  return Status::Ok();
}

Status open_sharded(const std::string& dir, const std::string& index_path, Model* model,
                    WeightTable* table) {
  json index;
  PVLLM_RETURN_IF_ERROR(read_json_file(index_path, &index));
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    return CorruptModel(index_path + ": no weight_map object");
  }
  std::map<std::string, SafetensorsFile> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) return CorruptModel(index_path + ": weight_map[" + name + "]");
    const std::string shard_name = shard.get<std::string>();
    // Shards live beside the index; anything else is not ours to open.
    if (shard_name.find('/') != std::string::npos || shard_name == ".." || shard_name.empty()) {
      return CorruptModel(index_path + ": shard name \"" + shard_name + "\" is not a file name");
    }
    const std::string shard_path = (fs::path(dir) / shard_name).string();
    auto it = shards.find(shard_path);
    if (it == shards.end()) {
      SafetensorsFile st;
      PVLLM_RETURN_IF_ERROR(open_safetensors(shard_path, &st));
      model->files.push_back(st.file);
      it = shards.emplace(shard_path, std::move(st)).first;
    }
    auto found = it->second.tensors.find(name);
    if (found == it->second.tensors.end()) {
      return CorruptModel(shard_path + ": tensor " + name + " is listed in " + index_path +
                          " but missing from the shard");
    }
    table->by_name[name] = {found->second, shard_path};
  }
  table->source = index_path;
  return Status::Ok();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Status take(const WeightTable& table, const std::string& name, const std::vector<int64_t>& expected,
            Tensor* out) {
  auto it = table.by_name.find(name);
  if (it == table.by_name.end()) return NotFound(table.source + ": missing tensor " + name);
  const WeightTable::Entry& e = it->second;
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

Status take_weights(const WeightTable& t, const ModelConfig& c, ModelWeights* w) {
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
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w->layers[i];
    PVLLM_RETURN_IF_ERROR(take(t, p + "input_layernorm.weight", {hidden}, &l.attn_norm));
    PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.q_proj.weight", {q_rows, hidden}, &l.wq));
    PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.k_proj.weight", {kv_rows, hidden}, &l.wk));
    PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.v_proj.weight", {kv_rows, hidden}, &l.wv));
    PVLLM_RETURN_IF_ERROR(take(t, p + "self_attn.o_proj.weight", {hidden, q_rows}, &l.wo));
    PVLLM_RETURN_IF_ERROR(take(t, p + "post_attention_layernorm.weight", {hidden}, &l.ffn_norm));
    PVLLM_RETURN_IF_ERROR(take(t, p + "mlp.gate_proj.weight", {inter, hidden}, &l.w_gate));
    PVLLM_RETURN_IF_ERROR(take(t, p + "mlp.up_proj.weight", {inter, hidden}, &l.w_up));
    PVLLM_RETURN_IF_ERROR(take(t, p + "mlp.down_proj.weight", {hidden, inter}, &l.w_down));
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
  // Tied checkpoints usually omit lm_head; when tied, embed is authoritative.
  if (c.tie_word_embeddings) {
    w->lm_head = w->embed;
    return check_tied_head(t, w->embed);
  }
  return take(t, "lm_head.weight", {c.vocab_size, hidden}, &w->lm_head);
}

// Derived buffers some exports keep: recomputed from the config, never read.
bool is_derived_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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

}  // namespace

Status load_hf_model(const std::string& dir, std::unique_ptr<Model>* out) {
  auto model = std::make_unique<Model>();
  model->format = ModelFormat::kHuggingFace;
  model->path = dir;
  PVLLM_RETURN_IF_ERROR(read_hf_config(dir, &model->config));

  std::error_code ec;
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  WeightTable table;
  if (fs::exists(single, ec)) {
    PVLLM_RETURN_IF_ERROR(open_single(single, model.get(), &table));
  } else if (fs::exists(index, ec)) {
    PVLLM_RETURN_IF_ERROR(open_sharded(dir, index, model.get(), &table));
  } else {
    return NotFound(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  PVLLM_RETURN_IF_ERROR(take_weights(table, model->config, &model->weights));
  PVLLM_RETURN_IF_ERROR(check_all_taken(table, model->config));

  // tokenizer.model first (the sentencepiece models served so far keep their
  // exact tokenization), else tokenizer.json (Llama 3, Qwen).
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const fs::path tokenizer = fs::path(dir) / name;
    if (fs::is_regular_file(tokenizer, ec)) {
      model->tokenizer_path = tokenizer.string();
      break;
    }
  }
  *out = std::move(model);
  return Status::Ok();
}

}  // namespace pvllm
