// Loading a .pvllm file: its tensors become views of the mapping (nothing
// copied), taken by name as from a safetensors checkpoint; checksums are
// checked all at once or lazily (model.h). Also unpacking packed matrices
// for backends that read only row-major weights.
#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/base/panel_layout.h"
#include "core/base/parallel_each.h"
#include "core/model/model.h"
#include "core/model/pvllm_file.h"
#include "core/model/weight_table.h"

namespace pvllm {

struct Model::PendingChecksums {
  struct Expected {
    uint64_t checksum;
    size_t size;
    std::string name;
  };
  std::mutex mu;
  std::unordered_map<const void*, Expected> by_data;
  std::string path;
};

namespace {

Status mismatch(const std::string& path, const std::string& name) {
  return CorruptModel(path + ": tensor " + name +
                      " does not match its checksum (the file is damaged)");
}

// Checks every tensor's checksum, the largest first, on up to
// hardware_concurrency threads (one for a small model, where starting
// threads costs more than hashing).
Status verify_all(const std::string& path, const unsigned char* base,
                  const std::vector<pvllm_format::TensorEntry>& tensors) {
  std::vector<const pvllm_format::TensorEntry*> order;
  uint64_t total = 0;
  for (const auto& e : tensors) {
    order.push_back(&e);
    total += e.size;
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->size > b->size; });
  const size_t threads =
      total < (uint64_t{16} << 20) ? 1 : std::max(1u, std::thread::hardware_concurrency());
  return parallel_each(order.size(), threads, [&](size_t i) {
    const pvllm_format::TensorEntry& e = *order[i];
    if (pvllm_format::checksum(base + e.offset, e.size) != e.checksum) {
      return mismatch(path, e.name);
    }
    return Status::Ok();
  });
}

}  // namespace

bool is_pvllm_path(const std::string& path) {
  const std::string ext = ".pvllm";
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

Status load_pvllm_model(const std::string& path, const LoadOptions& options,
                        std::unique_ptr<Model>* out) {
  std::shared_ptr<MappedFile> file;
  pvllm_format::FileHeader header;
  PVLLM_RETURN_IF_ERROR(pvllm_format::open_file(path, &file, &header));

  auto model = std::make_unique<Model>();
  model->format = ModelFormat::kPvllm;
  model->path = path;
  model->config = header.config;
  model->embedded_tokenizer = header.tokenizer;
  model->files.push_back(file);

  WeightTable table;
  table.source = path;
  bool packed = false;
  for (const pvllm_format::TensorEntry& e : header.tensors) {
    Tensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.layout = e.layout;
    t.shape = e.shape;
    t.data = file->data() + e.offset;
    packed = packed || e.layout == Layout::kPanels16;
    table.by_name[e.name] = {std::move(t), path};
  }
  PVLLM_RETURN_IF_ERROR(take_weights(table, model->config, packed, &model->weights));
  PVLLM_RETURN_IF_ERROR(check_all_taken(table, model->config));

  switch (options.checksums) {
    case ChecksumMode::kFull:
      PVLLM_RETURN_IF_ERROR(verify_all(path, file->data(), header.tensors));
      break;
    case ChecksumMode::kLazy: {
      auto pending = std::make_shared<Model::PendingChecksums>();
      pending->path = path;
      for (const pvllm_format::TensorEntry& e : header.tensors) {
        pending->by_data[file->data() + e.offset] = {e.checksum, e.size, e.name};
      }
      model->pending_checksums = std::move(pending);
      break;
    }
    case ChecksumMode::kNone:
      break;
  }
  *out = std::move(model);
  return Status::Ok();
}

Status Model::verify_tensor(const Tensor& t) const {
  if (pending_checksums == nullptr || t.data == nullptr) return Status::Ok();
  PendingChecksums::Expected expected;
  {
    std::lock_guard<std::mutex> lock(pending_checksums->mu);
    auto it = pending_checksums->by_data.find(t.data);
    if (it == pending_checksums->by_data.end()) return Status::Ok();
    expected = std::move(it->second);
    pending_checksums->by_data.erase(it);
  }
  if (pvllm_format::checksum(t.data, expected.size) != expected.checksum) {
    return mismatch(pending_checksums->path, expected.name);
  }
  return Status::Ok();
}

namespace {

// A row-major copy of a packed matrix, in a buffer the model owns.
Status unpack_matrix(const Tensor& packed, Model* model, Tensor* out) {
  panels::Shape shape;
  PVLLM_RETURN_IF_ERROR(panels::shape_of(packed.shape[0], packed.shape[1], packed.dtype, &shape));
  const size_t bytes = static_cast<size_t>(shape.rows * shape.cols) * dtype_size(shape.dtype);
  std::unique_ptr<unsigned char[]> buffer(new (std::nothrow) unsigned char[bytes]);
  if (buffer == nullptr) {
    return OutOfMemory("unpacking " + packed.name + ": cannot allocate " + std::to_string(bytes) +
                       " bytes");
  }
  panels::unpack(static_cast<const uint8_t*>(packed.data), shape, buffer.get());
  Tensor t;
  t.name = packed.name;
  t.dtype = packed.dtype;
  t.shape = packed.shape;
  t.data = buffer.get();
  model->owned_arrays.push_back(std::move(buffer));
  *out = std::move(t);
  return Status::Ok();
}

// Rows [row, row + rows) of a row-major matrix, as a view.
Tensor rows_of(const Tensor& m, int64_t row, int64_t rows, const std::string& name) {
  Tensor t;
  t.name = name;
  t.dtype = m.dtype;
  t.shape = {rows, m.shape[1]};
  t.data = static_cast<const unsigned char*>(m.data) +
           static_cast<size_t>(row * m.shape[1]) * dtype_size(m.dtype);
  return t;
}

}  // namespace

Status unpack_weights(Model* model) {
  ModelWeights& w = model->weights;
  if (!w.is_packed()) return Status::Ok();
  const ModelConfig& c = model->config;
  const int64_t q_rows = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_rows = int64_t{c.num_kv_heads} * c.head_dim;
  for (size_t i = 0; i < w.packed.size(); ++i) {
    // Lazily checked files: the packed bytes are read here, so checked here.
    const PackedLayerWeights& p = w.packed[i];
    for (const Tensor* t : {&p.qkv, &p.wo, &p.gate_up, &p.down}) {
      PVLLM_RETURN_IF_ERROR(model->verify_tensor(*t));
    }
    LayerWeights& l = w.layers[i];
    Tensor qkv, gate_up;
    PVLLM_RETURN_IF_ERROR(unpack_matrix(p.qkv, model, &qkv));
    PVLLM_RETURN_IF_ERROR(unpack_matrix(p.gate_up, model, &gate_up));
    PVLLM_RETURN_IF_ERROR(unpack_matrix(p.wo, model, &l.wo));
    PVLLM_RETURN_IF_ERROR(unpack_matrix(p.down, model, &l.w_down));
    const std::string a = "model.layers." + std::to_string(i) + ".self_attn.";
    const std::string m = "model.layers." + std::to_string(i) + ".mlp.";
    l.wq = rows_of(qkv, 0, q_rows, a + "q_proj.weight");
    l.wk = rows_of(qkv, q_rows, kv_rows, a + "k_proj.weight");
    l.wv = rows_of(qkv, q_rows + kv_rows, kv_rows, a + "v_proj.weight");
    l.w_gate = rows_of(gate_up, 0, c.intermediate_size, m + "gate_proj.weight");
    l.w_up = rows_of(gate_up, c.intermediate_size, c.intermediate_size, m + "up_proj.weight");
  }
  // Tied: lm_head already is the embedding; otherwise the packed head.
  if (!c.tie_word_embeddings) {
    PVLLM_RETURN_IF_ERROR(model->verify_tensor(w.packed_lm_head));
    PVLLM_RETURN_IF_ERROR(unpack_matrix(w.packed_lm_head, model, &w.lm_head));
  }
  w.packed.clear();
  w.packed_lm_head = Tensor();
  return Status::Ok();
}

}  // namespace pvllm
