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
#include "core/model/model_files.h"
#include "core/model/safetensors.h"
#include "core/model/weight_table.h"

namespace pvllm {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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
  PVLLM_RETURN_IF_ERROR(take_weights(table, model->config, /*packed=*/false, &model->weights));
  PVLLM_RETURN_IF_ERROR(check_all_taken(table, model->config));

  model->tokenizer_path = find_tokenizer_in(dir);
  *out = std::move(model);
  return Status::Ok();
}

}  // namespace pvllm
