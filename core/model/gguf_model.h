// GGUF files as models: which architectures pvllm serves from them, how
// their metadata becomes a ModelConfig, and their tensors the weights.
//
// Architectures (general.architecture): "llama" (Llama 2 and 3.x, Mistral,
// TinyLlama, llama2.c models), "qwen2" and "qwen3". Every metadata key under
// the architecture's prefix ("llama.") is classified: honoured (it sets a
// ModelConfig field), held to the one value pvllm implements (a mixture of
// experts, logit soft-capping, YaRN, ... are refused by name), or metadata
// that does not change the math. A key under the prefix that pvllm does
// not know is refused by name too: it may change the math. Keys outside it
// (general.*, tokenizer.*, split.*, quantize.*) describe the file.
//
// RoPE: llama.cpp's converter reorders the rows of a "llama" model's q and
// k projections so that RoPE rotates adjacent pairs (ggml's normal mode);
// "qwen2" and "qwen3" keep Hugging Face's order and rotate halves (neox
// mode). The config says so (RopeStyle), so the rows are served as stored.
#pragma once

#include <memory>
#include <string>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/model/gguf_file.h"
#include "core/model/model.h"
#include "core/model/model_config.h"

namespace pvllm {

// The GGUF architectures pvllm serves, for messages: "llama, qwen2, qwen3".
const char* gguf_served_architectures();

// The metadata of `file` as a ModelConfig. vocab_size comes from
// {arch}.vocab_size, else from the length of tokenizer.ggml.tokens, else
// is left 0 for the loader to take from token_embd.weight. Statuses name
// the file and the key: UNSUPPORTED for an architecture, key or value
// pvllm does not implement; CORRUPT_MODEL for a missing required key or a
// value of the wrong type or range.
Status gguf_model_config(const gguf::File& file, ModelConfig* out);

// The DType of a ggml type pvllm serves; false for the others.
bool dtype_of_ggml(ggml::Type type, DType* out);

// Loads an opened GGUF model: the config, and every tensor as a view of the
// file's mapping (quantized ones stay in their blocks). Tensors are taken
// by the architecture's names; one that nothing reads, or of a type pvllm
// does not serve, is refused by name.
Status load_gguf_model(const std::string& path, std::unique_ptr<Model>* out);

}  // namespace pvllm
