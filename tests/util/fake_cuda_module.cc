// A stand-in for libpvllm_cuda.so on machines without CUDA: the module's
// four exports, behaving as environment variables say at each call, so that
// tests/integration/cuda_module_test.cc can drive the loader, device
// selection, the GPU memory estimate and the engine's CUDA path.
//   PVLLM_FAKE_CUDA_VERSION  the interface version reported (default: this
//                            build's kCudaModuleInterfaceVersion)
//   PVLLM_FAKE_CUDA_DEVICES  the device count (default 1)
//   PVLLM_FAKE_CUDA_STATUS   the StatusCode device_count and mem_info
//                            return (default 0)
//   PVLLM_FAKE_CUDA_ALLOCS   the device allocations backend_create makes
//                            (default 0): each asks the options' fault
//                            hook first, as the real module's do
// pvllm_cuda_backend_create never creates a backend: it returns
// OUT_OF_MEMORY when the fault hook failed an allocation, else UNSUPPORTED
// with a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/backend/cuda_module_interface.h"
#include "core/base/status.h"

namespace {

int32_t env_int(const char* name, int32_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<int32_t>(std::atoi(v)) : fallback;
}

int32_t status(char* err, size_t err_len) {
  const int32_t code = env_int("PVLLM_FAKE_CUDA_STATUS", 0);
  if (code != 0 && err_len > 0) std::snprintf(err, err_len, "the fake module fails with %d", code);
  return code;
}

}  // namespace

#define PVLLM_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

PVLLM_FAKE_EXPORT int32_t pvllm_cuda_module_interface_version() {
  return env_int("PVLLM_FAKE_CUDA_VERSION", pvllm::kCudaModuleInterfaceVersion);
}

PVLLM_FAKE_EXPORT int32_t pvllm_cuda_device_count(int32_t* count, char* err, size_t err_len) {
  *count = env_int("PVLLM_FAKE_CUDA_DEVICES", 1);
  return status(err, err_len);
}

PVLLM_FAKE_EXPORT int32_t pvllm_cuda_mem_info(int32_t, size_t* free_bytes, size_t* total_bytes,
                                              char* err, size_t err_len) {
  *free_bytes = size_t{1} << 30;
  *total_bytes = size_t{2} << 30;
  return status(err, err_len);
}

PVLLM_FAKE_EXPORT int32_t pvllm_cuda_backend_create(const pvllm::Model*,
                                                    const pvllm::CudaBackendOptions* options,
                                                    pvllm::Backend** out, char* err,
                                                    size_t err_len) {
  *out = nullptr;
  for (int32_t i = 0; i < env_int("PVLLM_FAKE_CUDA_ALLOCS", 0); ++i) {
    if (options->fail_device_alloc != nullptr && options->fail_device_alloc()) {
      if (err_len > 0) std::snprintf(err, err_len, "the fake module's allocation %d failed", i + 1);
      return static_cast<int32_t>(pvllm::StatusCode::kOutOfMemory);
    }
  }
  if (err_len > 0) std::snprintf(err, err_len, "the fake module creates no backend");
  return static_cast<int32_t>(pvllm::StatusCode::kUnsupported);
}
