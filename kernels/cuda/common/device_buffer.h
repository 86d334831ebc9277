// One allocation of CUDA device memory or page-locked host memory, freed on
// destruction: the buffer type of the CUDA backend and of the CUDA tests.
// Plain C++: the CUDA runtime calls live in device_buffer.cc, so this header
// needs no CUDA include. Allocation failures are Statuses that name what
// was being allocated (kOutOfMemory when the runtime ran out of memory).
#pragma once

#include <cstddef>
#include <string>

#include "core/base/status.h"

namespace pvllm {

// A CUDA runtime error (a cudaError_t value, non-zero) as a Status:
// kOutOfMemory for cudaErrorMemoryAllocation, kInternal otherwise; the
// message names `what`, the error's name and its description.
Status cuda_status(int cuda_error, const std::string& what);

// Fault injection: from now on every Buffer allocation first asks `fail`
// (CudaBackendOptions::fail_device_alloc; nullptr: never) and, when it
// says so, fails as out of memory. Set by the backend at create.
void set_alloc_fault_hook(bool (*fail)());

// Where a Buffer lives: device memory, or page-locked host memory for what
// a step stages (metadata and sampling inputs on the way to the device,
// sampled tokens on the way back).
enum class Memory { kDevice, kPinnedHost };

template <Memory kWhere>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  // Frees what the buffer held, then allocates `bytes` (at least 16).
  Status allocate(size_t bytes, const char* what);
  // Grows to at least `bytes` (by half again, so a slowly growing need
  // reallocates rarely); the contents are not kept. When the larger
  // allocation fails, the buffer keeps the one it had.
  Status reserve(size_t bytes, const char* what);

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

extern template class Buffer<Memory::kDevice>;
extern template class Buffer<Memory::kPinnedHost>;

using DeviceBuffer = Buffer<Memory::kDevice>;
using PinnedBuffer = Buffer<Memory::kPinnedHost>;

}  // namespace pvllm
