// A loaded model: its config, its weights as views over mmapped files, and
// where its tokenizer lives. Loaders for every format produce this.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
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

// A layer's projections stored in the panel layout (Layout::kPanels16,
// core/base/panel_layout.h) by a .pvllm file, so the CPU backend serves them
// from the mapping: q, k and v as one matrix, gate and up as one.
struct PackedLayerWeights {
  Tensor qkv;      // [(num_heads + 2 * num_kv_heads) * head_dim, hidden]
  Tensor wo;       // [hidden, num_heads * head_dim]
  Tensor gate_up;  // [2 * intermediate, hidden]
  Tensor down;     // [hidden, intermediate]
};

struct ModelWeights {
  Tensor embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [hidden]
  Tensor lm_head;     // [vocab, hidden]; the same bytes as embed when tied
  // Set by a packed .pvllm file: then wq, wk, wv, wo, w_gate, w_up and
  // w_down of every layer are empty (norms and biases stay in `layers`), and
  // lm_head is empty unless tied. unpack_weights() turns them row-major for
  // backends that read only that.
  std::vector<PackedLayerWeights> packed;
  Tensor packed_lm_head;  // [vocab, hidden]
  bool is_packed() const { return !packed.empty(); }
};

enum class ModelFormat : uint8_t { kHuggingFace = 0, kLlama2c = 1, kPvllm = 2, kGguf = 3 };

// A tokenizer carried inside the model file (.pvllm) rather than beside it:
// views of the file's mapping, verbatim from the source's files.
struct EmbeddedTokenizer {
  // kGguf: the tokenizer.* metadata of a GGUF source, as a GGUF file of no
  // tensors (core/model/gguf_writer.h).
  enum class Kind : uint8_t { kNone = 0, kSentencePiece = 1, kJson = 2, kGguf = 3 };
  Kind kind = Kind::kNone;
  std::string_view data;         // tokenizer.model bytes, tokenizer.json text, or GGUF metadata
  std::string_view config_json;  // tokenizer_config.json; empty when none
  std::string_view chat_template_jinja;  // chat_template.jinja; empty when none
};

// How much of a .pvllm file load_model checks before returning. Every mode
// verifies the header (FlatBuffers verifier, its checksum) and the tensor
// table (bounds, alignment, overlap, sizes) before reading any field.
//  kFull: every tensor's checksum too, before load_model returns.
//  kLazy: each tensor's checksum when it is first read through
//         Model::verify_tensor (the engine does so as it reads the pages).
//  kNone: no tensor checksum (inspecting the header).
enum class ChecksumMode : uint8_t { kFull = 0, kLazy = 1, kNone = 2 };
struct LoadOptions {
  ChecksumMode checksums = ChecksumMode::kFull;
};

struct Model {
  ModelConfig config;
  ModelWeights weights;
  ModelFormat format = ModelFormat::kHuggingFace;
  std::string path;                      // what the caller passed
  std::string tokenizer_path;            // tokenizer.model or tokenizer.json; empty if none found
  EmbeddedTokenizer embedded_tokenizer;  // a .pvllm file's own (tokenizer_path then empty)
  // Keep the bytes the tensors point into alive.
  std::vector<std::shared_ptr<MappedFile>> files;
  std::vector<std::vector<unsigned char>> owned_buffers;
  // Owned bytes left uninitialised at allocation, so that the threads that
  // fill them (random-weights models) also take the page faults, in parallel.
  std::vector<std::unique_ptr<unsigned char[]>> owned_arrays;

  // Total bytes of all distinct weight tensors (tied embeddings counted once).
  size_t weight_bytes() const;
  // Calls fn once per distinct weight tensor (tied embeddings once), in
  // checkpoint order, packed matrices included.
  void for_each_weight(const std::function<void(const Tensor&)>& fn) const;

  // Drops this process's pages of `t` when its bytes lie in one of the
  // model's file mappings (a backend that copied the tensor into its own
  // layout calls it, so the weights are resident once, not twice); a later
  // read maps them again from the file. A no-op for owned bytes.
  void release_pages(const Tensor& t) const;

  // Checks the tensor's checksum when the file has one not yet checked
  // (lazy loading): CORRUPT_MODEL naming the tensor on a mismatch. OK for
  // tensors without one. Thread-safe.
  Status verify_tensor(const Tensor& t) const;
  // Tensors (by data pointer) whose checksum is still to be checked, with
  // the expected value; filled by a lazily checked .pvllm load.
  struct PendingChecksums;
  std::shared_ptr<PendingChecksums> pending_checksums;
};

// Turns packed matrices (a packed .pvllm file) into row-major tensors in
// buffers the model owns, for backends that do not read the panel layout
// (CUDA, test backends). A no-op for a model without packed matrices.
// OUT_OF_MEMORY when the copies cannot be allocated.
Status unpack_weights(Model* model);

// Loads a Hugging Face folder (config.json + model.safetensors or a sharded
// model.safetensors.index.json), a llama2.c checkpoint (.bin) with a
// tokenizer.model (or tok*.model) beside it, a .pvllm file
// (docs/format.md) or a GGUF file (gguf_model.h). The format is detected from the path. Errors name
// the file and, where one is at fault, the tensor.
Status load_model(const std::string& path, std::unique_ptr<Model>* out,
                  const LoadOptions& options = {});

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
Status load_pvllm_model(const std::string& path, const LoadOptions& options,
                        std::unique_ptr<Model>* out);

// True when `path` names a .pvllm file (by its extension).
bool is_pvllm_path(const std::string& path);

}  // namespace pvllm
