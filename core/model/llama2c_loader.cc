// llama2.c checkpoints (the legacy "v0" export): seven int32 header fields,
// then f32 tensors back to back, each stacked over layers. Per-layer
// tensors are views into the stacked arrays of the mapping.
#include <cstring>
#include <filesystem>

#include "core/model/model.h"
#include "core/model/model_files.h"

namespace pvllm {

namespace {

namespace fs = std::filesystem;

struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

// Walks the file front to back, handing out consecutive f32 arrays, and
// names the first one that does not fit.
class Cursor {
 public:
  Cursor(const MappedFile& file, size_t offset) : file_(file), offset_(offset) {}

  // Takes `count` floats for `name`; *out points at them.
  Status next(const std::string& name, int64_t count, const float** out) {
    const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(float);
    if (bytes > file_.size() - offset_) {
      return CorruptModel(file_.path() + ": truncated: tensor " + name + " needs " +
                          std::to_string(bytes) + " bytes at offset " + std::to_string(offset_) +
                          ", but the file has " + std::to_string(file_.size()) + " bytes");
    }
    *out = reinterpret_cast<const float*>(file_.data() + offset_);
    offset_ += bytes;
    return Status::Ok();
  }
  size_t offset() const { return offset_; }

 private:
  const MappedFile& file_;
  size_t offset_;
};

Tensor view(std::string name, const float* data, std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.data = data;
  return t;
}

Status read_header(const MappedFile& file, Llama2cHeader* h) {
  if (file.size() < sizeof(Llama2cHeader)) {
    return CorruptModel(file.path() + ": " + std::to_string(file.size()) +
                        " bytes is too short for a llama2.c header");
  }
  std::memcpy(h, file.data(), sizeof(Llama2cHeader));
  // Newer llama2.c exports (version 1 and 2) start with the magic "ak42".
  if (static_cast<uint32_t>(h->dim) == 0x616b3432u) {
    return Unsupported(file.path() + ": llama2.c versioned export; only the legacy v0 " +
                       "format (export.py --version 0) is supported");
  }
  // The caps keep every size product below far from int64 overflow.
  constexpr int32_t kMaxWidth = 1 << 20;
  constexpr int32_t kMaxCount = 1 << 24;
  const auto in = [](int32_t v, int32_t cap) { return v > 0 && v <= cap; };
  const bool vocab_ok =
      h->vocab_size != 0 && h->vocab_size >= -kMaxCount && h->vocab_size <= kMaxCount;
  if (!in(h->dim, kMaxWidth) || !in(h->hidden_dim, kMaxWidth) || !in(h->n_layers, 1 << 12) ||
      !in(h->n_heads, kMaxWidth) || !in(h->n_kv_heads, kMaxWidth) || !vocab_ok ||
      !in(h->seq_len, kMaxCount) || h->dim % h->n_heads != 0 || h->n_heads % h->n_kv_heads != 0 ||
      (h->dim / h->n_heads) % 2 != 0) {
    return CorruptModel(file.path() + ": implausible llama2.c header (dim " +
                        std::to_string(h->dim) + ", hidden_dim " + std::to_string(h->hidden_dim) +
                        ", layers " + std::to_string(h->n_layers) + ", heads " +
                        std::to_string(h->n_heads) + ", kv heads " + std::to_string(h->n_kv_heads) +
                        ", vocab " + std::to_string(h->vocab_size) + ", seq_len " +
                        std::to_string(h->seq_len) + ")");
  }
  return Status::Ok();
}

ModelConfig config_from(const Llama2cHeader& h) {
  ModelConfig c;
  c.architecture = "llama";
  c.hidden_size = h.dim;
  c.intermediate_size = h.hidden_dim;
  c.num_layers = h.n_layers;
  c.num_heads = h.n_heads;
  c.num_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  // A negative vocab size marks a separate classifier at the end of the file.
  c.vocab_size = h.vocab_size < 0 ? -h.vocab_size : h.vocab_size;
  c.tie_word_embeddings = h.vocab_size > 0;
  c.max_position_embeddings = h.seq_len;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::kInterleaved;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  // llama2.c models were trained with BOS as the story separator.
  c.extra_stop_token_ids = {1};
  return c;
}

Status read_weights(const MappedFile& file, const ModelConfig& c, bool shared_classifier,
                    ModelWeights* w) {
  const int64_t dim = c.hidden_size;
  const int64_t hidden = c.intermediate_size;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t L = c.num_layers;
  Cursor cur(file, sizeof(Llama2cHeader));
  const float *tok_emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final;
  const float *freq_real, *freq_imag;
  PVLLM_RETURN_IF_ERROR(cur.next("tok_embeddings", c.vocab_size * dim, &tok_emb));
  PVLLM_RETURN_IF_ERROR(cur.next("rms_att_weight", L * dim, &rms_att));
  PVLLM_RETURN_IF_ERROR(cur.next("wq", L * dim * dim, &wq));
  PVLLM_RETURN_IF_ERROR(cur.next("wk", L * kv_dim * dim, &wk));
  PVLLM_RETURN_IF_ERROR(cur.next("wv", L * kv_dim * dim, &wv));
  PVLLM_RETURN_IF_ERROR(cur.next("wo", L * dim * dim, &wo));
  PVLLM_RETURN_IF_ERROR(cur.next("rms_ffn_weight", L * dim, &rms_ffn));
  PVLLM_RETURN_IF_ERROR(cur.next("w1", L * hidden * dim, &w1));
  PVLLM_RETURN_IF_ERROR(cur.next("w2", L * dim * hidden, &w2));
  PVLLM_RETURN_IF_ERROR(cur.next("w3", L * hidden * dim, &w3));
  PVLLM_RETURN_IF_ERROR(cur.next("rms_final_weight", dim, &rms_final));
  // The precomputed RoPE table is obsolete; backends use rope_inv_freq.
  const int64_t freq_count = int64_t{c.max_position_embeddings} * (c.head_dim / 2);
  PVLLM_RETURN_IF_ERROR(cur.next("freq_cis_real", freq_count, &freq_real));
  PVLLM_RETURN_IF_ERROR(cur.next("freq_cis_imag", freq_count, &freq_imag));
  const float* wcls = tok_emb;
  if (!shared_classifier) PVLLM_RETURN_IF_ERROR(cur.next("wcls", c.vocab_size * dim, &wcls));
  if (cur.offset() != file.size()) {
    return CorruptModel(file.path() + ": " + std::to_string(file.size() - cur.offset()) +
                        " bytes left over after the last tensor; the header does not match the " +
                        "weights");
  }

  w->embed = view("tok_embeddings", tok_emb, {c.vocab_size, dim});
  w->layers.resize(L);
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    LayerWeights& l = w->layers[i];
    l.attn_norm = view(p + "rms_att_weight", rms_att + i * dim, {dim});
    l.wq = view(p + "wq", wq + i * dim * dim, {dim, dim});
    l.wk = view(p + "wk", wk + i * kv_dim * dim, {kv_dim, dim});
    l.wv = view(p + "wv", wv + i * kv_dim * dim, {kv_dim, dim});
    l.wo = view(p + "wo", wo + i * dim * dim, {dim, dim});
    l.ffn_norm = view(p + "rms_ffn_weight", rms_ffn + i * dim, {dim});
    l.w_gate = view(p + "w1", w1 + i * hidden * dim, {hidden, dim});
    l.w_down = view(p + "w2", w2 + i * dim * hidden, {dim, hidden});
    l.w_up = view(p + "w3", w3 + i * hidden * dim, {hidden, dim});
  }
  w->final_norm = view("rms_final_weight", rms_final, {dim});
  w->lm_head = view(shared_classifier ? "tok_embeddings" : "wcls", wcls, {c.vocab_size, dim});
  return Status::Ok();
}

}  // namespace

Status load_llama2c_model(const std::string& bin_path, std::unique_ptr<Model>* out) {
  std::shared_ptr<MappedFile> file;
  PVLLM_RETURN_IF_ERROR(MappedFile::open(bin_path, &file));
  Llama2cHeader header;
  PVLLM_RETURN_IF_ERROR(read_header(*file, &header));

  auto model = std::make_unique<Model>();
  model->format = ModelFormat::kLlama2c;
  model->path = bin_path;
  model->config = config_from(header);
  Status valid = model->config.validate();
  if (!valid.ok()) return CorruptModel(bin_path + ": " + valid.message());
  PVLLM_RETURN_IF_ERROR(read_weights(*file, model->config, header.vocab_size > 0, &model->weights));
  model->files.push_back(std::move(file));
  const fs::path folder = fs::path(bin_path).parent_path();
  model->tokenizer_path = find_tokenizer_in(folder.empty() ? "." : folder.string());
  *out = std::move(model);
  return Status::Ok();
}

}  // namespace pvllm
