// Helpers for the CUDA op and sampling tests: skip without a device, device
// buffers, host rounding to fp16/bf16 and the rounding error of each dtype.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/base/tensor.h"

namespace pvllm::cuda_ops_test {

// Skips the test, with the reason, when no CUDA device can be used.
#define PVLLM_CUDA_DEVICE_OR_SKIP()                                                    \
  do {                                                                                 \
    int num_devices_ = 0;                                                              \
    const cudaError_t err_ = cudaGetDeviceCount(&num_devices_);                        \
    if (err_ != cudaSuccess || num_devices_ == 0) {                                    \
      GTEST_SKIP() << "no CUDA device: "                                               \
                   << (err_ != cudaSuccess ? cudaGetErrorString(err_) : "count is 0"); \
    }                                                                                  \
  } while (0)

// Owns count elements of device memory; copies to and from host vectors.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    EXPECT_EQ(cudaMalloc(&ptr_, count * sizeof(T) + 16), cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return static_cast<T*>(ptr_); }
  void upload(const std::vector<T>& host) {
    ASSERT_EQ(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t count_ = 0;
};

inline uint16_t to_bits(float v, DType dtype) {
  return dtype == DType::kF16 ? float_to_fp16(v) : float_to_bf16(v);
}
inline float from_bits(uint16_t b, DType dtype) {
  return dtype == DType::kF16 ? fp16_to_float(b) : bf16_to_float(b);
}
inline std::vector<uint16_t> to_bits(const std::vector<float>& v, DType dtype) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_bits(v[i], dtype);
  return out;
}
inline std::vector<float> from_bits(const std::vector<uint16_t>& v, DType dtype) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = from_bits(v[i], dtype);
  return out;
}

// Largest relative error of rounding a normal fp32 value to dtype (round to
// nearest: half the spacing at the bottom of a binade). bf16 keeps 8
// significant bits, fp16 11.
inline double half_ulp_rel(DType dtype) { return dtype == DType::kF16 ? 0x1p-11 : 0x1p-8; }

inline const char* dtype_label(DType dtype) { return dtype == DType::kF16 ? "f16" : "bf16"; }

}  // namespace pvllm::cuda_ops_test
