// Hugging Face Llama folders: config.json plus model.safetensors, or shards
// listed by model.safetensors.index.json. Weights stay in the mappings.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/model/model.h"
#include "core/model/safetensors.h"

namespace pvllm {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Status read_json(const std::string& path, json* out) {
  std::shared_ptr<MappedFile> file;
  PVLLM_RETURN_IF_ERROR(MappedFile::open(path, &file));
  const char* text = reinterpret_cast<const char*>(file->data());
  *out = json::parse(text, text + file->size(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded() || !out->is_object()) {
    return CorruptModel(path + ": not a valid JSON object");
  }
  return Status::Ok();
}

// Field readers: absent (or null) keeps *out unless the field is required;
// a value of the wrong type is an error naming the file and key.
Status get_int(const json& j, const std::string& path, const char* key, bool required,
               int32_t* out) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) return CorruptModel(path + ": missing " + key);
    return Status::Ok();
  }
  if (!j[key].is_number_integer()) return CorruptModel(path + ": " + key + " is not an integer");
  *out = j[key].get<int32_t>();
  return Status::Ok();
}

Status get_float(const json& j, const std::string& path, const char* key, bool required,
                 float* out) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) return CorruptModel(path + ": missing " + key);
    return Status::Ok();
  }
  if (!j[key].is_number()) return CorruptModel(path + ": " + key + " is not a number");
  *out = j[key].get<float>();
  return Status::Ok();
}

bool is_llama(const json& config) {
  if (config.contains("architectures") && config["architectures"].is_array()) {
    for (const json& a : config["architectures"]) {
      if (a == "LlamaForCausalLM") return true;
    }
  }
  return config.contains("model_type") &&
         (config["model_type"] == "llama" || config["model_type"] == "mistral");
}

Status parse_rope_scaling(const json& config, const std::string& path, RopeScaling* out) {
  if (!config.contains("rope_scaling") || config["rope_scaling"].is_null()) return Status::Ok();
  const json& rs = config["rope_scaling"];
  if (!rs.is_object()) return CorruptModel(path + ": rope_scaling is not an object");
  // Newer transformers write "rope_type", older ones "type".
  const char* type_key = rs.contains("rope_type") ? "rope_type" : "type";
  if (!rs.contains(type_key) || !rs[type_key].is_string()) {
    return CorruptModel(path + ": rope_scaling has no rope_type");
  }
  const std::string type = rs[type_key].get<std::string>();
  const std::string where = path + " rope_scaling";
  if (type == "default") return Status::Ok();
  if (type == "linear") {
    out->type = RopeScaling::Type::kLinear;
    return get_float(rs, where, "factor", true, &out->factor);
  }
  if (type == "llama3") {
    out->type = RopeScaling::Type::kLlama3;
    PVLLM_RETURN_IF_ERROR(get_float(rs, where, "factor", true, &out->factor));
    PVLLM_RETURN_IF_ERROR(get_float(rs, where, "low_freq_factor", true, &out->low_freq_factor));
    PVLLM_RETURN_IF_ERROR(get_float(rs, where, "high_freq_factor", true, &out->high_freq_factor));
    return get_int(rs, where, "original_max_position_embeddings", true,
                   &out->original_max_position_embeddings);
  }
  return Unsupported(path + ": rope_scaling type \"" + type +
                     "\" is not supported (none, linear and llama3 are)");
}

Status parse_config(const json& c, const std::string& path, ModelConfig* out) {
  if (!is_llama(c)) {
    return Unsupported(path + ": not a Llama-architecture model (architectures must include " +
                       "LlamaForCausalLM, or model_type be llama or mistral)");
  }
  ModelConfig config;
  if (c.contains("model_type") && c["model_type"].is_string()) {
    config.architecture = c["model_type"].get<std::string>();
  }
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "hidden_size", true, &config.hidden_size));
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "intermediate_size", true, &config.intermediate_size));
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "num_hidden_layers", true, &config.num_layers));
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "num_attention_heads", true, &config.num_heads));
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "vocab_size", true, &config.vocab_size));
  if (config.num_heads <= 0) return CorruptModel(path + ": num_attention_heads must be positive");
  config.num_kv_heads = config.num_heads;
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "num_key_value_heads", false, &config.num_kv_heads));
  config.head_dim = config.hidden_size / config.num_heads;
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "head_dim", false, &config.head_dim));
  // Defaults below are transformers' LlamaConfig defaults.
  config.max_position_embeddings = 2048;
  PVLLM_RETURN_IF_ERROR(
      get_int(c, path, "max_position_embeddings", false, &config.max_position_embeddings));
  config.rms_norm_eps = 1e-6f;
  PVLLM_RETURN_IF_ERROR(get_float(c, path, "rms_norm_eps", false, &config.rms_norm_eps));
  config.rope_theta = 10000.0f;
  PVLLM_RETURN_IF_ERROR(get_float(c, path, "rope_theta", false, &config.rope_theta));
  PVLLM_RETURN_IF_ERROR(parse_rope_scaling(c, path, &config.rope_scaling));
  if (c.contains("tie_word_embeddings") && c["tie_word_embeddings"].is_boolean()) {
    config.tie_word_embeddings = c["tie_word_embeddings"].get<bool>();
  }
  config.rope_style = RopeStyle::kRotateHalf;
  PVLLM_RETURN_IF_ERROR(get_int(c, path, "bos_token_id", false, &config.bos_token_id));
  // Llama 3 lists several end tokens: the first is eos, the rest also stop.
  if (c.contains("eos_token_id") && c["eos_token_id"].is_array()) {
    const json& ids = c["eos_token_id"];
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!ids[i].is_number_integer()) return CorruptModel(path + ": eos_token_id is malformed");
      const int32_t id = ids[i].get<int32_t>();
      if (i == 0) {
        config.eos_token_id = id;
      } else {
        config.extra_stop_token_ids.push_back(id);
      }
    }
  } else {
    PVLLM_RETURN_IF_ERROR(get_int(c, path, "eos_token_id", false, &config.eos_token_id));
  }
  Status valid = config.validate();
  if (!valid.ok()) return CorruptModel(path + ": " + valid.message());
  *out = std::move(config);
  return Status::Ok();
}

// Every tensor the checkpoint offers, with the file it came from.
struct WeightTable {
  struct Entry {
    Tensor tensor;
    std::string file;
  };
  std::map<std::string, Entry> by_name;
  std::string source;  // the file named when a tensor is missing
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
  PVLLM_RETURN_IF_ERROR(read_json(index_path, &index));
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
  return Status::Ok();
}

Status take_weights(const WeightTable& t, const ModelConfig& c, ModelWeights* w) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_rows = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size;
  PVLLM_RETURN_IF_ERROR(take(t, "model.embed_tokens.weight", {c.vocab_size, hidden}, &w->embed));
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
  }
  PVLLM_RETURN_IF_ERROR(take(t, "model.norm.weight", {hidden}, &w->final_norm));
  // Tied checkpoints usually omit lm_head; when tied, embed is authoritative.
  if (c.tie_word_embeddings) {
    w->lm_head = w->embed;
    return Status::Ok();
  }
  return take(t, "lm_head.weight", {c.vocab_size, hidden}, &w->lm_head);
}

}  // namespace

Status load_hf_model(const std::string& dir, std::unique_ptr<Model>* out) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  json config_json;
  PVLLM_RETURN_IF_ERROR(read_json(config_path, &config_json));

  auto model = std::make_unique<Model>();
  model->format = ModelFormat::kHuggingFace;
  model->path = dir;
  PVLLM_RETURN_IF_ERROR(parse_config(config_json, config_path, &model->config));

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
