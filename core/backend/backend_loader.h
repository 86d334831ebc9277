// Device selection, the loader of the CUDA backend module, and
// open_backend: the one place that decides which backend serves a model.
//
// libpvllm.so never links CUDA: the CUDA backend is a separate module,
// libpvllm_cuda.so, opened with dlopen only when the device asks for it, so
// the library loads and runs on the CPU on machines without a CUDA driver.
// No CUDA header is included here. Host backends (the CPU's) are linked in
// and reached by name through core/backend/registry.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/backend/cuda_module_interface.h"
#include "core/base/status.h"

namespace pvllm {

struct Model;

// A parsed EngineConfig.device: "cpu", "auto", "cuda" (= "cuda:0") or
// "cuda:N".
struct DeviceSpec {
  enum class Kind : uint8_t { kCpu = 0, kAuto = 1, kCuda = 2 };
  Kind kind = Kind::kAuto;
  int32_t index = 0;
};
// InvalidArgument for anything else (the message quotes the string).
Status parse_device(const std::string& device, DeviceSpec* out);

// The opened module. Loaded once per process and never unloaded: backends
// it creates keep code (their vtables) inside it.
class CudaModule {
 public:
  // The module, opened on the first call. Looks at $PVLLM_CUDA_BACKEND (a
  // path to the .so), then next to the library (or executable) holding
  // this code, then in ../lib/ from there (programs in bin/ beside lib/, as
  // in scripts/gpu_bundle.sh's bundle or an install), then the dynamic
  // loader's search path. Unsupported, naming the places tried and dlerror,
  // when none opens.
  static Status get(const CudaModule** out);

  // Unsupported with the reason (no driver / no device) when there are none.
  Status device_count(int32_t* count) const;
  Status mem_info(int32_t device, size_t* free_bytes, size_t* total_bytes) const;
  Status create_backend(const Model& model, const CudaBackendOptions& options,
                        std::unique_ptr<Backend>* out) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  pvllm_cuda_device_count_fn device_count_ = nullptr;
  pvllm_cuda_mem_info_fn mem_info_ = nullptr;
  pvllm_cuda_backend_create_fn create_ = nullptr;
};

// Whether `spec` resolves to CUDA: kCuda always; kAuto when the NVIDIA
// driver library loads, the module opens and it reports at least one device. For kCuda, a non-ok
// status says why CUDA cannot be used (Unsupported: no module, no driver, no device, or no device
// with that index).
Status resolve_cuda(const DeviceSpec& spec, bool* use_cuda);

// EngineConfig.device settled before any weight is loaded, so that a
// device that cannot serve fails fast: parse_device, then resolve_cuda.
// "auto" comes back as kCpu when no CUDA device is usable, as kAuto (CUDA,
// with the CPU for model shapes the CUDA kernels do not serve) when one
// is; "cuda[:N]" comes back unchanged or with resolve_cuda's reason.
Status select_device(const std::string& device, DeviceSpec* out);

// What open_backend makes a backend with, whichever it turns out to be.
struct OpenBackendOptions {
  int32_t block_size = 16;  // tokens per KV block, on every backend
  int32_t num_threads = 0;  // host backends; 0 = all cores
  // What a host backend's KV pool stores (the CUDA backend's comes in
  // cuda.kv_cache_dtype).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  // Host backends: the KV pool's block count, asked only when a host
  // backend is about to open (after "auto" fell back to the CPU, only
  // then): the caller's memory plan, whose failure open_backend returns.
  // Required unless the device is kCuda.
  std::function<Status(int32_t* num_blocks)> host_num_blocks;
  // The CUDA backend: everything but device_index and block_size, which
  // open_backend sets from the device and block_size above (num_blocks 0:
  // as many as free device memory buys). fail_device_alloc is the caller's
  // fault site: the module's own copy of the fault state is never armed.
  CudaBackendOptions cuda;
  // A host backend made by the caller instead of the device's (a test
  // hook, EngineConfig::backend_factory): the device is then not looked
  // at. Given the weights row-major and host_num_blocks' pool.
  std::function<Status(const Model&, const BackendOptions&, std::unique_ptr<Backend>*)> factory;
};

// Opens the backend that serves `model` (which must outlive it) on
// `device` as select_device settled it: options.factory's backend when set
// (the device is then not looked at); the registered "cpu" backend on
// kCpu; the CUDA module's on kCuda, its failure returned as is
// (UNSUPPORTED without a module, a device, or for a model shape the
// kernels do not serve); on kAuto the CUDA module's, or the CPU's when
// that is UNSUPPORTED (any other failure is returned). Any backend but the
// CPU's gets the weights row-major: unpack_weights (core/model/model.h)
// runs on `model` before the module or the factory sees it, since only the
// CPU backend reads the panel layout (after "auto" fell back, the CPU
// backend reads them row-major as well). A host backend's pool is
// options.host_num_blocks' count. *on_cuda (may be null) says whether the
// CUDA backend opened. On failure *out is unchanged and `model` may have
// been unpacked.
Status open_backend(const DeviceSpec& device, Model* model, const OpenBackendOptions& options,
                    std::unique_ptr<Backend>* out, bool* on_cuda = nullptr);

}  // namespace pvllm
