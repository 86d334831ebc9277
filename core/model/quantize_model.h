// Quantizing a loaded model's weights ourselves: while loading
// (pvllm_engine_params.quantize) or into a .pvllm file (pvllm convert
// --quantize), so a bf16 checkpoint serves in 4 bits without a GGUF file.
//
// A scheme names the type of every weight matrix, as llama.cpp's
// llama-quantize names its file types, and follows the same recipe so that
// the files compare like with like:
//   q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k,
//   iq4_xs   every matrix in that type, except the output projection
//            (lm_head, or the embeddings when tied), which takes Q6_K
//            (q8_0 keeps Q8_0);
//   q4_k_m   Q4_K, with Q6_K for the output projection and for attn_v and
//            ffn_down in the layers that get more bits (the first and last
//            eighth, and every third between);
//   q5_k_m   the same with Q5_K.
// A type whose block does not divide a matrix's row falls back as
// llama-quantize does (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, Q2_K,
// Q3_K and IQ4_XS to IQ4_NL), then to F16. Vectors (norms, biases, RoPE
// factors) stay as they are. Matrices already quantized are refused: a
// quantized model is not quantized again.
#pragma once

#include <functional>
#include <string>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/model/model.h"

namespace pvllm {

// The schemes, for messages and help texts: "q8_0, q4_0, ...".
const char* quantize_scheme_names();

// Whether `scheme` is one (case-insensitive; "" and "none" are not).
bool is_quantize_scheme(const std::string& scheme);

// The type `scheme` gives the matrix `name` ([rows, cols]) of layer
// `layer` (-1 for the embeddings and the output projection) of a model
// with `num_layers` layers; `output` is true for the output projection
// (or the embeddings when tied). INVALID_ARGUMENT for an unknown scheme.
Status quantize_type_for(const std::string& scheme, const std::string& name, int64_t cols,
                         int32_t layer, int32_t num_layers, bool output, DType* out);

// The weight bytes of the model `summary` describes once quantized by
// `scheme`: what quantize_model leaves (and the memory plan counts).
// INVALID_ARGUMENT for an unknown scheme, UNSUPPORTED (naming the tensor)
// for a model whose matrices are already quantized, as quantize_model.
Status quantized_weight_bytes(const ModelSummary& summary, const std::string& scheme, size_t* out);

// Quantizes every weight matrix of `model` in place by `scheme`, on
// `threads` threads (0: all cores), into buffers the model then owns;
// packed (.pvllm panel) models are unpacked first. `on_progress(done,
// total)` reports matrices finished. INVALID_ARGUMENT for an unknown
// scheme, UNSUPPORTED for a model whose matrices are already quantized,
// OUT_OF_MEMORY when a buffer cannot be allocated.
Status quantize_model(Model* model, const std::string& scheme, int threads = 0,
                      const std::function<void(size_t done, size_t total)>& on_progress = nullptr);

}  // namespace pvllm
