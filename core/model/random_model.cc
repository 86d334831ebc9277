// Random-weight models of standard shapes; see random_model.h.
#include "core/model/random_model.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace pvllm {

namespace {

struct Shape {
  const char* name;
  int32_t hidden_size;
  int32_t intermediate_size;
  int32_t num_layers;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t vocab_size;
  int32_t max_position_embeddings;
  float rope_theta;
  float rms_norm_eps;
  int32_t bos_token_id;
  int32_t eos_token_id;
};

// The published configs (config.json of each model on the Hugging Face
// hub); "tiny" is the project's test shape.
constexpr Shape kShapes[] = {
    {"tiny", 64, 128, 2, 4, 2, 512, 2048, 10000.0f, 1e-5f, 1, 2},
    {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, 1e-5f, 1, 2},
    {"llama-2-7b", 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f, 1e-5f, 1, 2},
    // Plain Llama 3 8B: theta 500000 and no rope_scaling (that came in 3.1).
    {"llama-3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0f, 1e-5f, 128000, 128001},
};

// One tensor to make: where it goes in the Model, and how to fill it.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool is_norm = false;  // all ones, else normal(0, 0.02)
  Tensor* dest = nullptr;
};

// The tensors of a config in checkpoint order (HF names), pointing into
// *w when it is not null.
std::vector<TensorSpec> tensor_specs(const ModelConfig& c, ModelWeights* w) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const int64_t q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  if (w != nullptr) w->layers.resize(static_cast<size_t>(c.num_layers));
  std::vector<TensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {c.vocab_size, h}, false, w ? &w->embed : nullptr});
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerWeights* l = w != nullptr ? &w->layers[static_cast<size_t>(i)] : nullptr;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    specs.push_back({p + "input_layernorm.weight", {h}, true, l ? &l->attn_norm : nullptr});
    specs.push_back({p + "self_attn.q_proj.weight", {q, h}, false, l ? &l->wq : nullptr});
    specs.push_back({p + "self_attn.k_proj.weight", {kv, h}, false, l ? &l->wk : nullptr});
    specs.push_back({p + "self_attn.v_proj.weight", {kv, h}, false, l ? &l->wv : nullptr});
    specs.push_back({p + "self_attn.o_proj.weight", {h, q}, false, l ? &l->wo : nullptr});
    specs.push_back({p + "post_attention_layernorm.weight", {h}, true, l ? &l->ffn_norm : nullptr});
    specs.push_back({p + "mlp.gate_proj.weight", {inter, h}, false, l ? &l->w_gate : nullptr});
    specs.push_back({p + "mlp.up_proj.weight", {inter, h}, false, l ? &l->w_up : nullptr});
    specs.push_back({p + "mlp.down_proj.weight", {h, inter}, false, l ? &l->w_down : nullptr});
  }
  specs.push_back({"model.norm.weight", {h}, true, w ? &w->final_norm : nullptr});
  specs.push_back({"lm_head.weight", {c.vocab_size, h}, false, w ? &w->lm_head : nullptr});
  return specs;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// SplitMix64's finaliser: a good 64-bit hash of a counter.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A standard normal approximated by the sum of the four 16-bit quarters of
// one hash (Irwin-Hall, n = 4): no transcendental call per value, which is
// what makes a billion values take seconds. Bounded at about 3.46 sigma —
// irrelevant for benchmark weights.
inline float approx_normal(uint64_t bits) {
  constexpr float kMean = 4 * 32767.5f;
  constexpr float kInvStd = 1.0f / 37837.23f;  // sqrt(4 * (65536^2 - 1) / 12)
  const float sum = static_cast<float>(bits & 0xffff) + static_cast<float>((bits >> 16) & 0xffff) +
                    static_cast<float>((bits >> 32) & 0xffff) + static_cast<float>(bits >> 48);
  return (sum - kMean) * kInvStd;
}

// Round to nearest even, as float_to_bf16, inlined for the hot loop (the
// values are finite, so its NaN case never arises).
inline uint16_t finite_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

template <DType D>
inline void store(void* data, int64_t i, float v) {
  if constexpr (D == DType::kF32) {
    static_cast<float*>(data)[i] = v;
  } else if constexpr (D == DType::kF16) {
    static_cast<uint16_t*>(data)[i] = float_to_fp16(v);
  } else {
    static_cast<uint16_t*>(data)[i] = finite_to_bf16(v);
  }
}

template <DType D>
void fill_range(bool is_norm, uint64_t stream, void* data, int64_t begin, int64_t end) {
  if (is_norm) {
    for (int64_t i = begin; i < end; ++i) store<D>(data, i, 1.0f);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    store<D>(data, i, 0.02f * approx_normal(mix(stream + static_cast<uint64_t>(i))));
  }
}

// Elements [begin, end) of tensor number `index`.
void fill_chunk(const TensorSpec& s, DType dtype, uint64_t seed, size_t index, void* data,
                int64_t begin, int64_t end) {
  const uint64_t stream = mix(seed ^ mix(index + 0x9e3779b97f4a7c15ull));
  switch (dtype) {
    case DType::kF32:
      return fill_range<DType::kF32>(s.is_norm, stream, data, begin, end);
    case DType::kF16:
      return fill_range<DType::kF16>(s.is_norm, stream, data, begin, end);
    case DType::kBF16:
      return fill_range<DType::kBF16>(s.is_norm, stream, data, begin, end);
    default:  // random models are made in the plain types only
      return;
  }
}

}  // namespace

const std::vector<std::string>& random_model_shapes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Shape& s : kShapes) v.emplace_back(s.name);
    return v;
  }();
  return names;
}

Status random_model_config(const std::string& shape, ModelConfig* out) {
  for (const Shape& s : kShapes) {
    if (shape != s.name) continue;
    ModelConfig c;
    c.hidden_size = s.hidden_size;
    c.intermediate_size = s.intermediate_size;
    c.num_layers = s.num_layers;
    c.num_heads = s.num_heads;
    c.num_kv_heads = s.num_kv_heads;
    c.head_dim = s.hidden_size / s.num_heads;
    c.vocab_size = s.vocab_size;
    c.max_position_embeddings = s.max_position_embeddings;
    c.rope_theta = s.rope_theta;
    c.rms_norm_eps = s.rms_norm_eps;
    c.rope_style = RopeStyle::kRotateHalf;
    c.tie_word_embeddings = false;
    c.bos_token_id = s.bos_token_id;
    c.eos_token_id = s.eos_token_id;
    *out = c;
    return c.validate();
  }
  std::string known;
  for (const std::string& n : random_model_shapes()) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  return InvalidArgument("unknown random-weights shape \"" + shape + "\"; known shapes: " + known);
}

Status inspect_random_model(const std::string& shape, DType dtype, ModelSummary* out) {
  ModelSummary summary;
  PVLLM_RETURN_IF_ERROR(random_model_config(shape, &summary.config));
  summary.format = ModelFormat::kHuggingFace;
  for (const TensorSpec& s : tensor_specs(summary.config, nullptr)) {
    summary.tensors.push_back({s.name, dtype, s.shape});
    summary.weight_bytes += static_cast<size_t>(numel(s.shape)) * dtype_size(dtype);
  }
  *out = std::move(summary);
  return Status::Ok();
}

Status make_random_model(const std::string& shape, DType dtype, uint64_t seed,
                         std::unique_ptr<Model>* out) {
  auto model = std::make_unique<Model>();
  PVLLM_RETURN_IF_ERROR(random_model_config(shape, &model->config));
  model->format = ModelFormat::kHuggingFace;
  model->path = "random:" + shape;
  std::vector<TensorSpec> specs = tensor_specs(model->config, &model->weights);
  model->owned_arrays.reserve(specs.size());
  for (TensorSpec& s : specs) {
    // new[] without (): no zeroing pass; fill_chunk writes every byte.
    model->owned_arrays.emplace_back(
        new unsigned char[static_cast<size_t>(numel(s.shape)) * dtype_size(dtype)]);
    s.dest->name = s.name;
    s.dest->dtype = dtype;
    s.dest->shape = s.shape;
    s.dest->data = model->owned_arrays.back().get();
  }

  // Chunks of 1M elements over all tensors, taken by the workers in turn.
  struct Chunk {
    size_t tensor;
    int64_t begin, end;
  };
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < specs.size(); ++t) {
    const int64_t n = numel(specs[t].shape);
    for (int64_t b = 0; b < n; b += kChunk) chunks.push_back({t, b, std::min(n, b + kChunk)});
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t c = next++; c < chunks.size(); c = next++) {
      const Chunk& k = chunks[c];
      fill_chunk(specs[k.tensor], dtype, seed, k.tensor, model->owned_arrays[k.tensor].get(),
                 k.begin, k.end);
    }
  };
  const size_t num_threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), chunks.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < num_threads; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();

  *out = std::move(model);
  return Status::Ok();
}

}  // namespace pvllm
