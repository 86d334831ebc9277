#include "kernels/cuda/common/device_buffer.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace pvllm {

namespace {

bool (*g_fail_alloc)() = nullptr;  // set_alloc_fault_hook

template <Memory kWhere>
cudaError_t obtain(void** p, size_t bytes) {
  if (g_fail_alloc != nullptr && g_fail_alloc()) {
    *p = nullptr;
    return cudaErrorMemoryAllocation;  // injected (tests/integration/fault_walk_test.cc)
  }
  return kWhere == Memory::kDevice ? cudaMalloc(p, bytes) : cudaMallocHost(p, bytes);
}

template <Memory kWhere>
void release(void* p) {
  if (p == nullptr) return;
  if (kWhere == Memory::kDevice) {
    cudaFree(p);
  } else {
    cudaFreeHost(p);
  }
}

}  // namespace

void set_alloc_fault_hook(bool (*fail)()) { g_fail_alloc = fail; }

Status cuda_status(int cuda_error, const std::string& what) {
  const auto e = static_cast<cudaError_t>(cuda_error);
  const std::string msg = what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (e == cudaErrorMemoryAllocation) return OutOfMemory("CUDA out of memory: " + msg);
  return Internal("CUDA error: " + msg);
}

template <Memory kWhere>
Buffer<kWhere>::~Buffer() {
  release<kWhere>(ptr_);
}

template <Memory kWhere>
Status Buffer<kWhere>::allocate(size_t bytes, const char* what) {
  release<kWhere>(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  bytes = std::max<size_t>(bytes, 16);
  const cudaError_t e = obtain<kWhere>(&ptr_, bytes);
  if (e != cudaSuccess) {
    return cuda_status(
        e, std::string("allocating ") + what + " (" + std::to_string(bytes >> 20) + " MiB)");
  }
  bytes_ = bytes;
  return Status::Ok();
}

template <Memory kWhere>
Status Buffer<kWhere>::reserve(size_t bytes, const char* what) {
  if (bytes <= bytes_) return Status::Ok();
  bytes = std::max(bytes, bytes_ + bytes_ / 2);
  void* grown = nullptr;
  const cudaError_t e = obtain<kWhere>(&grown, bytes);
  if (e != cudaSuccess) {
    return cuda_status(
        e, std::string("growing ") + what + " to " + std::to_string(bytes >> 10) + " KiB");
  }
  release<kWhere>(ptr_);
  ptr_ = grown;
  bytes_ = bytes;
  return Status::Ok();
}

template class Buffer<Memory::kDevice>;
template class Buffer<Memory::kPinnedHost>;

}  // namespace pvllm
