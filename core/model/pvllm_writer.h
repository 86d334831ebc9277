// Writing a .pvllm file (docs/format.md) from any loaded model: the config,
// the tokenizer and chat files verbatim, and every tensor, converted to the
// chosen dtype and, when packed, into the CPU GEMM's panel layout. Streams:
// tensors go out in chunks of a few MiB (the source's pages are released as
// they are done), so peak memory stays far below the model's size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/base/status.h"
#include "core/model/model.h"

namespace pvllm {

struct ConvertOptions {
  // kKeep: each tensor in its source dtype (a packed q/k/v or gate/up of
  // mixed dtypes becomes fp32, as the CPU backend would pack it).
  enum class DTypeChoice : uint8_t { kKeep = 0, kF32 = 1, kBF16 = 2, kF16 = 3 };
  DTypeChoice dtype = DTypeChoice::kKeep;
  // The projections in the panel layout, so the CPU backend serves them
  // from the mapping; false stores every tensor row-major (the CPU backend
  // then packs at load, as from safetensors).
  bool packed = true;
  // Quantize the weight matrices first by this scheme
  // (core/model/quantize_model.h: "q4_k_m", "q8_0", ...); empty: none. A
  // quantized model is written row-major (`packed` is then ignored).
  std::string quantize;
  // Recorded in the header (`pvllm inspect` shows it).
  std::string writer = "pvllm";
  // Called as tensors are written: bytes of tensor data done, of the total,
  // and the tensor being written.
  std::function<void(uint64_t done, uint64_t total, const std::string& tensor)> progress;
};

// Parses "keep", "fp32", "bf16" or "fp16"; INVALID_ARGUMENT otherwise.
Status parse_dtype_choice(const std::string& name, ConvertOptions::DTypeChoice* out);

// Writes `model` to out_path (through out_path + ".tmp", renamed at the end,
// so a failed conversion leaves no partial file). A packed source (a .pvllm
// file) is unpacked first. The tokenizer comes from model->tokenizer_path
// (with tokenizer_config.json and chat_template.jinja beside it) or the
// model's embedded one.
Status write_pvllm(Model* model, const std::string& out_path, const ConvertOptions& options);

}  // namespace pvllm
