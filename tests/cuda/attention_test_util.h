// Helpers for the CUDA attention tests: device detection, fp16 / bf16
// rounding on the host, and a device buffer that frees itself. Named after
// this part (not a shared "cuda_test_util.h") so the kernel families do not
// collide; everything lives in pvllm::attn_test.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/base/tensor.h"

namespace pvllm::attn_test {

// "" when a CUDA device is usable, else why not.
inline std::string missing_device_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
  if (count == 0) return "cudaGetDeviceCount returned 0";
  return "";
}

// The value x holds once stored as `dtype` (kF16 or kBF16), as raw bits and
// back as float.
inline uint16_t to_bits(DType dtype, float x) {
  return dtype == DType::kF16 ? float_to_fp16(x) : float_to_bf16(x);
}
inline float from_bits(DType dtype, uint16_t b) {
  return dtype == DType::kF16 ? fp16_to_float(b) : bf16_to_float(b);
}
inline uint16_t nan_bits(DType dtype) { return dtype == DType::kF16 ? 0x7E00 : 0x7FC0; }

// n uniform values in [lo, hi), rounded to `dtype`: bits for the device and
// the floats they stand for, for the CPU reference.
struct RoundedValues {
  std::vector<uint16_t> bits;
  std::vector<float> values;
};
inline RoundedValues random_rounded(DType dtype, size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  RoundedValues r;
  r.bits.resize(n);
  r.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.bits[i] = to_bits(dtype, dist(rng));
    r.values[i] = from_bits(dtype, r.bits[i]);
  }
  return r;
}

// Owns cudaMalloc'ed memory; frees it on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) {
    if (bytes > 0) status_ = cudaMalloc(&ptr_, bytes);
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  cudaError_t status() const { return status_; }

 private:
  void* ptr_ = nullptr;
  cudaError_t status_ = cudaSuccess;
};

template <typename T>
cudaError_t copy_to_device(DeviceBuffer& dst, const std::vector<T>& src) {
  if (dst.status() != cudaSuccess) return dst.status();
  return cudaMemcpy(dst.get(), src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice);
}

template <typename T>
cudaError_t copy_to_host(std::vector<T>& dst, const DeviceBuffer& src) {
  return cudaMemcpy(dst.data(), src.get(), dst.size() * sizeof(T), cudaMemcpyDeviceToHost);
}

}  // namespace pvllm::attn_test

// Skips the current test with the reason when no CUDA device is usable.
#define PVLLM_ATTN_REQUIRE_DEVICE()                                                \
  do {                                                                             \
    const std::string pvllm_reason = ::pvllm::attn_test::missing_device_reason();  \
    if (!pvllm_reason.empty()) GTEST_SKIP() << "no CUDA device: " << pvllm_reason; \
  } while (0)

// Fails the current test (and returns) on a CUDA error.
#define PVLLM_ATTN_CUDA_OK(expr)                                                         \
  do {                                                                                   \
    const cudaError_t pvllm_err = static_cast<cudaError_t>(expr);                        \
    ASSERT_EQ(pvllm_err, cudaSuccess) << #expr << ": " << cudaGetErrorString(pvllm_err); \
  } while (0)
