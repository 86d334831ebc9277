// Format detection, the model summary, and weight accounting.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "core/model/gguf_model.h"
#include "core/model/model.h"
#include "core/model/model_files.h"
#include "core/model/pvllm_file.h"

namespace pvllm {

// In checkpoint order; by data pointer, so tied embeddings are visited once.
void Model::for_each_weight(const std::function<void(const Tensor&)>& fn) const {
  const ModelWeights& w = weights;
  std::set<const void*> seen;
  auto visit = [&](const Tensor& t) {
    if (t.empty() || !seen.insert(t.data).second) return;
    fn(t);
  };
  visit(w.embed);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    for (const Tensor* t : {&l.attn_norm, &l.wq, &l.bq, &l.wk, &l.bk, &l.wv, &l.bv, &l.q_norm,
                            &l.k_norm, &l.wo, &l.bo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down}) {
      visit(*t);
    }
    if (i < w.packed.size()) {
      const PackedLayerWeights& p = w.packed[i];
      for (const Tensor* t : {&p.qkv, &p.wo, &p.gate_up, &p.down}) visit(*t);
    }
  }
  visit(w.final_norm);
  visit(w.lm_head);
  visit(w.packed_lm_head);
}

void Model::release_pages(const Tensor& t) const {
#if defined(__unix__) || defined(__APPLE__)
  const auto* data = static_cast<const unsigned char*>(t.data);
  const size_t n = t.nbytes();
  if (data == nullptr || n == 0) return;
  const bool mapped = std::any_of(files.begin(), files.end(), [&](const auto& f) {
    return f->size() > 0 && data >= f->data() && data + n <= f->data() + f->size();
  });
  if (!mapped) return;
  // Whole pages inside the tensor only: a neighbour's bytes stay resident.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + n) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
#else
  (void)t;
#endif
}

size_t Model::weight_bytes() const {
  size_t total = 0;
  for_each_weight([&](const Tensor& t) { total += t.nbytes(); });
  return total;
}

Status load_model(const std::string& path, std::unique_ptr<Model>* out,
                  const LoadOptions& options) {
  ModelFiles files;
  PVLLM_RETURN_IF_ERROR(resolve_model_files(path, &files));
  std::unique_ptr<Model> model;
  switch (files.kind) {
    case ModelFiles::Kind::kPvllm:
      PVLLM_RETURN_IF_ERROR(load_pvllm_model(files.weights, options, &model));
      break;
    case ModelFiles::Kind::kLlama2c:
      PVLLM_RETURN_IF_ERROR(load_llama2c_model(files.weights, &model));
      break;
    case ModelFiles::Kind::kHuggingFace:
      PVLLM_RETURN_IF_ERROR(load_hf_model(files.weights, &model));
      break;
    case ModelFiles::Kind::kGguf:
      PVLLM_RETURN_IF_ERROR(load_gguf_model(files.weights, &model));
      break;
    case ModelFiles::Kind::kTokenizerOnly:
      return NotFound(path + " holds a tokenizer (" + files.tokenizer +
                      ") but no weights; expected " + kModelPathHelp);
  }
  model->path = path;
  model->tokenizer_path = files.tokenizer;
  *out = std::move(model);
  return Status::Ok();
}

// Loading maps the files, but reading the header pages is all it touches
// (no .pvllm tensor checksum); the mappings are dropped before returning.
Status inspect_model(const std::string& path, ModelSummary* out) {
  // A .pvllm file's header says it all: its tensor table is the model's.
  ModelFiles files;
  PVLLM_RETURN_IF_ERROR(resolve_model_files(path, &files));
  if (files.kind == ModelFiles::Kind::kPvllm) {
    pvllm_format::FileHeader header;
    PVLLM_RETURN_IF_ERROR(pvllm_format::read_header(files.weights, &header));
    ModelSummary summary;
    summary.config = header.config;
    summary.format = ModelFormat::kPvllm;
    for (const pvllm_format::TensorEntry& t : header.tensors) {
      summary.tensors.push_back({t.name, t.dtype, t.shape});
      summary.weight_bytes += t.size;
    }
    *out = std::move(summary);
    return Status::Ok();
  }
  std::unique_ptr<Model> model;
  LoadOptions options;
  options.checksums = ChecksumMode::kNone;
  PVLLM_RETURN_IF_ERROR(load_model(path, &model, options));
  ModelSummary summary;
  summary.config = model->config;
  summary.format = model->format;
  model->for_each_weight([&](const Tensor& t) {
    summary.tensors.push_back({t.name, t.dtype, t.shape});
    summary.weight_bytes += t.nbytes();
  });
  *out = std::move(summary);
  return Status::Ok();
}

}  // namespace pvllm
