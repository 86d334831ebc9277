// Format detection, the model summary, and weight accounting.
#include <filesystem>
#include <functional>
#include <set>

#include "core/model/model.h"

namespace pvllm {

namespace {

namespace fs = std::filesystem;

// Calls fn once per distinct weight tensor (by data pointer, so tied
// embeddings are visited once), in checkpoint order.
void for_each_weight(const ModelWeights& w, const std::function<void(const Tensor&)>& fn) {
  std::set<const void*> seen;
  auto visit = [&](const Tensor& t) {
    if (t.empty() || !seen.insert(t.data).second) return;
    fn(t);
  };
  visit(w.embed);
  for (const LayerWeights& l : w.layers) {
    for (const Tensor* t : {&l.attn_norm, &l.wq, &l.bq, &l.wk, &l.bk, &l.wv, &l.bv, &l.q_norm,
                            &l.k_norm, &l.wo, &l.bo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down}) {
      visit(*t);
    }
  }
  visit(w.final_norm);
  visit(w.lm_head);
}

}  // namespace

size_t Model::weight_bytes() const {
  size_t total = 0;
  for_each_weight(weights, [&](const Tensor& t) { total += t.nbytes(); });
  return total;
}

Status load_model(const std::string& path, std::unique_ptr<Model>* out) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return NotFound(path + ": no such file or folder");
  if (fs::is_directory(st)) return load_hf_model(path, out);
  if (fs::is_regular_file(st) && fs::path(path).extension() == ".bin") {
    return load_llama2c_model(path, out);
  }
  return Unsupported(path + ": not a model pvllm can load (expected a Hugging Face folder " +
                     "or a llama2.c .bin file)");
}

// Loading maps the files, but reading the header pages is all it touches;
// the mappings are dropped before returning.
Status inspect_model(const std::string& path, ModelSummary* out) {
  std::unique_ptr<Model> model;
  PVLLM_RETURN_IF_ERROR(load_model(path, &model));
  ModelSummary summary;
  summary.config = model->config;
  summary.format = model->format;
  for_each_weight(model->weights, [&](const Tensor& t) {
    summary.tensors.push_back({t.name, t.dtype, t.shape});
    summary.weight_bytes += t.nbytes();
  });
  *out = std::move(summary);
  return Status::Ok();
}

}  // namespace pvllm
