// A loaded model: its config, its weights as views over mmapped files, and
// where its tokenizer lives. Loaders for every format produce this.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/base/mapped_file.h"
#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/model/model_config.h"

namespace pvllm {

struct LayerWeights {
  Tensor attn_norm;  // [hidden]
  Tensor wq;         // [num_heads * head_dim, hidden]
  Tensor wk;         // [num_kv_heads * head_dim, hidden]
  Tensor wv;         // [num_kv_heads * head_dim, hidden]
  Tensor wo;         // [hidden, num_heads * head_dim]
  Tensor ffn_norm;   // [hidden]
  Tensor w_gate;     // [intermediate, hidden]   (HF gate_proj, llama2.c w1)
  Tensor w_up;       // [intermediate, hidden]   (HF up_proj,   llama2.c w3)
  Tensor w_down;     // [hidden, intermediate]   (HF down_proj, llama2.c w2)
  // Present only when the config asks for them (empty otherwise):
  Tensor bq;      // [num_heads * head_dim]      config.qkv_bias
  Tensor bk;      // [num_kv_heads * head_dim]   config.qkv_bias
  Tensor bv;      // [num_kv_heads * head_dim]   config.qkv_bias
  Tensor bo;      // [hidden]                    config.o_bias
  Tensor q_norm;  // [head_dim]                  config.qk_norm
  Tensor k_norm;  // [head_dim]                  config.qk_norm
};

struct ModelWeights {
  Tensor embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [hidden]
  Tensor lm_head;     // [vocab, hidden]; the same bytes as embed when tied
};

enum class ModelFormat : uint8_t { kHuggingFace = 0, kLlama2c = 1 };

struct Model {
  ModelConfig config;
  ModelWeights weights;
  ModelFormat format = ModelFormat::kHuggingFace;
  std::string path;            // what the caller passed
  std::string tokenizer_path;  // tokenizer.model or tokenizer.json; empty if none found
  // Keep the bytes the tensors point into alive.
  std::vector<std::shared_ptr<MappedFile>> files;
  std::vector<std::vector<unsigned char>> owned_buffers;
  // Owned bytes left uninitialised at allocation, so that the threads that
  // fill them (random-weights models) also take the page faults, in parallel.
  std::vector<std::unique_ptr<unsigned char[]>> owned_arrays;

  // Total bytes of all distinct weight tensors (tied embeddings counted once).
  size_t weight_bytes() const;
};

// Loads a Hugging Face folder (config.json + model.safetensors or a sharded
// model.safetensors.index.json), or a llama2.c checkpoint (.bin) with a
// tokenizer.model (or tok*.model) beside it. The format is detected from
// the path. Errors name the file and, where one is at fault, the tensor.
Status load_model(const std::string& path, std::unique_ptr<Model>* out);

// Reads only the config (and the tensor table's byte size), without mapping
// weights: what pvllm_estimate_memory needs.
struct ModelSummary {
  ModelConfig config;
  ModelFormat format = ModelFormat::kHuggingFace;
  size_t weight_bytes = 0;
  struct TensorInfo {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  std::vector<TensorInfo> tensors;
};
Status inspect_model(const std::string& path, ModelSummary* out);

// Format-specific entry points (used by load_model; exposed for tests).
Status load_hf_model(const std::string& dir, std::unique_ptr<Model>* out);
Status load_llama2c_model(const std::string& bin_path, std::unique_ptr<Model>* out);

}  // namespace pvllm
