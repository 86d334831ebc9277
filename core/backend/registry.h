// The backends compiled into this process, by name. Each registers itself
// from its own source file (PVLLM_REGISTER_BACKEND), so core/ names none of
// them and a program has the backends it links. The CUDA backend is not
// linked but opened as a module (core/backend/backend_loader.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/base/status.h"

namespace pvllm {

struct Model;

// Makes a backend for `model` (which must outlive it) with a KV pool of
// options.num_blocks blocks.
using BackendFactory = Status (*)(const Model& model, const BackendOptions& options,
                                  std::unique_ptr<Backend>* out);

// Adds `factory` under `name`; a second registration of a name replaces the
// first. Returns true, so that it can initialise a static.
bool register_backend(const std::string& name, BackendFactory factory);

// Unsupported, naming the registered backends, when `name` is not one.
Status create_backend(const std::string& name, const Model& model, const BackendOptions& options,
                      std::unique_ptr<Backend>* out);

// The registered names, sorted.
std::vector<std::string> registered_backends();

// The instruction set the CPU backend's kernels run with in this process
// ("x86-64-v2", "avx2", "avx512", "generic": kernels/cpu/isa.h), for
// pvllm_cpu_isa. The CPU backend registers the query beside its factory,
// so that neither core/ nor the C ABI includes a kernel header.
using CpuIsaQuery = const char* (*)();

// Sets the query; a second call replaces the first. Returns true, so that
// it can initialise a static.
bool register_cpu_backend_isa(CpuIsaQuery query);

// The query's answer (a static string), or "none" when no CPU backend is
// linked. Thread-safe.
const char* cpu_backend_isa();

}  // namespace pvllm

// At namespace scope in a backend's source file: registers `factory` as
// `name` when the program starts. Link the backend's objects whole (an
// OBJECT library), or the linker drops a file nothing else refers to.
#define PVLLM_REGISTER_BACKEND(name, factory)                    \
  [[maybe_unused]] static const bool pvllm_backend_registered_ = \
      ::pvllm::register_backend(name, factory)
