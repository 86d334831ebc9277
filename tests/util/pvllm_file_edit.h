// Test helpers for .pvllm files: converting a model on disk, and rewriting
// a file's header or bytes to make every kind of broken file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/model/format/pvllm_model_generated.h"
#include "core/model/pvllm_writer.h"

namespace pvllm::testing {

// Loads `source` and writes it to `out` (a .pvllm path) with `options`;
// throws std::runtime_error with the status on failure.
void convert_model(const std::string& source, const std::string& out,
                   const ConvertOptions& options = {});

// Rewrites the .pvllm file `in` into `out` with `edit` applied to its
// header's object form. Tensor offsets are given to `edit` relative to the
// data area and placed after the new header, so a header that grows keeps
// the tensors where they were relative to each other; the preamble's
// sizes and checksum are recomputed.
void rewrite_header(const std::string& in, const std::string& out,
                    const std::function<void(pvllm::format::ModelT&)>& edit);

// The whole file, and writing one back.
std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);

}  // namespace pvllm::testing
