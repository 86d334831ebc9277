// Device selection and the loader of the CUDA backend module.
//
// libpvllm.so never links CUDA: the CUDA backend is a separate module,
// libpvllm_cuda.so, opened with dlopen only when the device asks for it, so
// the library loads and runs on the CPU on machines without a CUDA driver.
// No CUDA header is included here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend/backend.h"
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

}  // namespace pvllm
