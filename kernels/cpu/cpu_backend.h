// The CPU backend: fp32 math over weights kept as loaded (f32/f16/bf16),
// a paged fp32 K/V cache, attention that walks block tables, threads across
// the cores.
#pragma once

#include <memory>

#include "core/backend/backend.h"
#include "core/model/model.h"

namespace pvllm {

// `model` must outlive the backend. Allocates the K/V pool
// (options.num_blocks blocks); OutOfMemory if that fails. Registered as
// "cpu" (core/backend/registry.h): the engine reaches it by that name.
Status create_cpu_backend(const Model& model, const BackendOptions& options,
                          std::unique_ptr<Backend>* out);

}  // namespace pvllm
