// quantize_model (quantize_model.h): the scheme's recipe, then every weight
// matrix quantized row by row into a buffer the model owns.
#include "core/model/quantize_model.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <new>
#include <thread>
#include <vector>

#include "core/base/parallel_each.h"
#include "core/quant/dequantize.h"
#include "core/quant/quantize.h"

namespace pvllm {

namespace {

struct Scheme {
  const char* name;
  DType base;    // most matrices
  DType more;    // attn_v and ffn_down of the layers that get more bits
  DType output;  // the output projection
};

constexpr Scheme kSchemes[] = {
    {"q8_0", DType::kQ8_0, DType::kQ8_0, DType::kQ8_0},
    {"q4_0", DType::kQ4_0, DType::kQ4_0, DType::kQ6_K},
    {"q4_1", DType::kQ4_1, DType::kQ4_1, DType::kQ6_K},
    {"q5_0", DType::kQ5_0, DType::kQ5_0, DType::kQ6_K},
    {"q5_1", DType::kQ5_1, DType::kQ5_1, DType::kQ6_K},
    {"iq4_nl", DType::kIQ4_NL, DType::kIQ4_NL, DType::kQ6_K},
    {"q2_k", DType::kQ2_K, DType::kQ2_K, DType::kQ6_K},
    {"q3_k", DType::kQ3_K, DType::kQ3_K, DType::kQ6_K},
    {"q4_k", DType::kQ4_K, DType::kQ4_K, DType::kQ6_K},
    {"q5_k", DType::kQ5_K, DType::kQ5_K, DType::kQ6_K},
    {"q6_k", DType::kQ6_K, DType::kQ6_K, DType::kQ6_K},
    {"iq4_xs", DType::kIQ4_XS, DType::kIQ4_XS, DType::kQ6_K},
    {"q4_k_m", DType::kQ4_K, DType::kQ6_K, DType::kQ6_K},
    {"q5_k_m", DType::kQ5_K, DType::kQ6_K, DType::kQ6_K},
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const Scheme* find_scheme(const std::string& name) {
  const std::string n = lower(name);
  for (const Scheme& s : kSchemes) {
    if (n == s.name) return &s;
  }
  return nullptr;
}

// llama-quantize's choice of layers for the extra bits.
bool more_bits(int32_t layer, int32_t num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

// A type whose block does not divide the row falls back.
DType fit_to_row(DType t, int64_t cols) {
  if (cols % dtype_block_elems(t) == 0) return t;
  switch (t) {
    case DType::kQ4_K:
      t = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      t = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      t = DType::kQ8_0;
      break;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kIQ4_XS:
      t = DType::kIQ4_NL;
      break;
    default:
      break;
  }
  return cols % dtype_block_elems(t) == 0 ? t : DType::kF16;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// One matrix to quantize: where its Tensor lives and the type it gets.
struct Job {
  Tensor* tensor;
  DType type;
  unsigned char* dest = nullptr;
};

}  // namespace

const char* quantize_scheme_names() {
  return "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs, q4_k_m, "
         "q5_k_m";
}

bool is_quantize_scheme(const std::string& scheme) { return find_scheme(scheme) != nullptr; }

Status quantize_type_for(const std::string& scheme, const std::string& name, int64_t cols,
                         int32_t layer, int32_t num_layers, bool output, DType* out) {
  const Scheme* s = find_scheme(scheme);
  if (s == nullptr) {
    return InvalidArgument("quantize: unknown scheme \"" + scheme +
                           "\" (known: " + quantize_scheme_names() + ")");
  }
  DType t = s->base;
  if (output) {
    t = s->output;
  } else if (layer >= 0 && more_bits(layer, num_layers) &&
             (ends_with(name, "v_proj.weight") || ends_with(name, "attn_v.weight") ||
              ends_with(name, "down_proj.weight") || ends_with(name, "ffn_down.weight"))) {
    t = s->more;
  }
  *out = fit_to_row(t, cols);
  return Status::Ok();
}

namespace {

// The layer number in a tensor's name ("model.layers.3.", "blk.3."); -1
// for none.
int32_t layer_of(const std::string& name) {
  for (const char* prefix : {"layers.", "blk."}) {
    const size_t at = name.find(prefix);
    if (at == std::string::npos) continue;
    size_t i = at + std::char_traits<char>::length(prefix);
    int32_t layer = 0;
    bool digits = false;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) &&
           layer < 1 << 20) {
      layer = layer * 10 + (name[i++] - '0');
      digits = true;
    }
    if (digits) return layer;
  }
  return -1;
}

bool is_embedding_name(const std::string& name) {
  return name == "model.embed_tokens.weight" || name == "token_embd.weight" ||
         name == "tok_embeddings.weight";
}

bool is_output_name(const std::string& name) {
  return name == "lm_head.weight" || name == "output.weight";
}

}  // namespace

Status quantized_weight_bytes(const ModelSummary& summary, const std::string& scheme, size_t* out) {
  if (!is_quantize_scheme(scheme)) {
    return InvalidArgument("quantize: unknown scheme \"" + scheme +
                           "\" (known: " + quantize_scheme_names() + ")");
  }
  const ModelConfig& c = summary.config;
  const bool has_output = std::any_of(summary.tensors.begin(), summary.tensors.end(),
                                      [](const auto& t) { return is_output_name(t.name); });
  size_t total = 0;
  // rows of a matrix named `name` with `cols` columns, as quantize_model types them.
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, bool output) -> Status {
    DType t;
    PVLLM_RETURN_IF_ERROR(
        quantize_type_for(scheme, name, cols, layer_of(name), c.num_layers, output, &t));
    total += dtype_row_bytes(t, cols) * static_cast<size_t>(rows);
    return Status::Ok();
  };
  for (const ModelSummary::TensorInfo& t : summary.tensors) {
    if (t.shape.size() != 2) {
      total += static_cast<size_t>(std::max<int64_t>(0, t.shape.empty() ? 0 : t.shape[0]) *
                                   dtype_size(t.dtype));
      continue;
    }
    if (dtype_is_quantized(t.dtype)) {  // as quantize_model refuses it, before loading
      return Unsupported("quantize: " + t.name + " is already " + dtype_name(t.dtype) +
                         "; a quantized model is not quantized again");
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const int64_t q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
    if (ends_with(t.name, "qkv_proj.weight")) {  // a packed file's fused q, k and v
      const std::string base = t.name.substr(0, t.name.size() - 15);
      PVLLM_RETURN_IF_ERROR(add(base + "q_proj.weight", q, cols, false));
      PVLLM_RETURN_IF_ERROR(add(base + "k_proj.weight", kv, cols, false));
      PVLLM_RETURN_IF_ERROR(add(base + "v_proj.weight", kv, cols, false));
      continue;
    }
    const bool output = is_output_name(t.name) || (is_embedding_name(t.name) && !has_output);
    PVLLM_RETURN_IF_ERROR(add(t.name, rows, cols, output));
  }
  *out = total;
  return Status::Ok();
}

Status quantize_model(Model* model, const std::string& scheme, int threads,
                      const std::function<void(size_t, size_t)>& on_progress) {
  if (!is_quantize_scheme(scheme)) {
    return InvalidArgument("quantize: unknown scheme \"" + scheme +
                           "\" (known: " + quantize_scheme_names() + ")");
  }
  PVLLM_RETURN_IF_ERROR(unpack_weights(model));
  ModelWeights& w = model->weights;
  const int32_t n = model->config.num_layers;
  std::vector<Job> jobs;
  auto add = [&](Tensor* t, int32_t layer, bool output) -> Status {
    if (t->empty()) return Status::Ok();
    if (dtype_is_quantized(t->dtype)) {
      return Unsupported("quantize: " + t->name + " is already " + dtype_name(t->dtype) +
                         "; a quantized model is not quantized again");
    }
    DType type;
    PVLLM_RETURN_IF_ERROR(
        quantize_type_for(scheme, t->name, t->shape.back(), layer, n, output, &type));
    jobs.push_back({t, type});
    return Status::Ok();
  };
  // Tied: the embedding is the output projection, quantized once as one.
  const bool tied = w.lm_head.empty() || w.lm_head.data == w.embed.data;
  PVLLM_RETURN_IF_ERROR(add(&w.embed, -1, tied));
  for (int32_t i = 0; i < n; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    for (Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      PVLLM_RETURN_IF_ERROR(add(t, i, false));
    }
  }
  if (!tied) PVLLM_RETURN_IF_ERROR(add(&w.lm_head, -1, true));

  for (Job& j : jobs) {
    const size_t bytes = dtype_row_bytes(j.type, j.tensor->shape.back()) *
                         static_cast<size_t>(j.tensor->shape.front());
    auto* buffer = new (std::nothrow) unsigned char[bytes];
    if (buffer == nullptr) {
      return OutOfMemory("quantize: cannot allocate " + std::to_string(bytes) + " bytes for " +
                         j.tensor->name);
    }
    model->owned_arrays.emplace_back(buffer);
    j.dest = buffer;
  }
  // Rows in chunks, over all matrices, on short-lived threads.
  struct Chunk {
    size_t job;
    int64_t row0, row1;
  };
  std::vector<Chunk> chunks;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const int64_t rows = jobs[j].tensor->shape.front();
    const int64_t step = std::max<int64_t>(1, (int64_t{1} << 20) / jobs[j].tensor->shape.back());
    for (int64_t r = 0; r < rows; r += step) chunks.push_back({j, r, std::min(rows, r + step)});
  }
  const size_t num_threads = threads > 0 ? static_cast<size_t>(threads)
                                         : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::atomic<int64_t>> rows_left(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) rows_left[j] = jobs[j].tensor->shape.front();
  std::atomic<size_t> jobs_done{0};
  const Status st = parallel_each(
      chunks.size(), num_threads,
      [&](size_t c) -> Status {
        const Chunk& k = chunks[c];
        const Job& j = jobs[k.job];
        const Tensor& t = *j.tensor;
        const int64_t cols = t.shape.back();
        std::vector<float> row(static_cast<size_t>(cols));
        const size_t out_row = dtype_row_bytes(j.type, cols);
        for (int64_t r = k.row0; r < k.row1; ++r) {
          quant::tensor_to_floats(t, r * cols, cols, row.data());
          PVLLM_RETURN_IF_ERROR(quant::quantize_row(j.type, row.data(), cols,
                                                    j.dest + static_cast<size_t>(r) * out_row));
        }
        if (rows_left[k.job].fetch_sub(k.row1 - k.row0) == k.row1 - k.row0) ++jobs_done;
        return Status::Ok();
      },
      [&](size_t) {
        if (on_progress) on_progress(jobs_done.load(), jobs.size());
      });
  PVLLM_RETURN_IF_ERROR(st);
  const bool lm_is_embed = w.lm_head.data == w.embed.data;
  for (Job& j : jobs) {
    j.tensor->dtype = j.type;
    j.tensor->data = j.dest;
    j.tensor->layout = Layout::kRowMajor;
  }
  if (lm_is_embed && !w.lm_head.empty()) w.lm_head = w.embed;
  return Status::Ok();
}

}  // namespace pvllm
