// Helpers for every CUDA test suite: skipping without a device, moving
// vectors in and out of the backend's DeviceBuffer
// (kernels/cuda/common/device_buffer.h), fp16 / bf16 rounding on the host
// and the rounding error of each dtype. Everything lives in
// pvllm::cuda_test.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "kernels/cuda/common/device_buffer.h"

namespace pvllm::cuda_test {

// "" when a CUDA device is usable, else why not.
inline std::string missing_device_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
  if (count == 0) return "cudaGetDeviceCount returned 0";
  return "";
}

// ---- device buffers ----------------------------------------------------------

// Gives `buf` `bytes` of device memory (at least 16: DeviceBuffer's floor).
inline ::testing::AssertionResult allocate(DeviceBuffer& buf, size_t bytes) {
  const Status s = buf.allocate(bytes, "a test buffer");
  if (!s.ok()) return ::testing::AssertionFailure() << s.message();
  return ::testing::AssertionSuccess();
}

// Gives `buf` room for `host` and copies it over.
template <typename T>
::testing::AssertionResult upload(DeviceBuffer& buf, const std::vector<T>& host) {
  const size_t bytes = host.size() * sizeof(T);
  ::testing::AssertionResult allocated = allocate(buf, bytes);
  if (!allocated) return allocated;
  const cudaError_t err = cudaMemcpy(buf.get(), host.data(), bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemcpy to the device: " << cudaGetErrorString(err);
  }
  return ::testing::AssertionSuccess();
}

// Copies the first `count` elements of `buf` into `host`.
template <typename T>
::testing::AssertionResult download(const DeviceBuffer& buf, size_t count, std::vector<T>* host) {
  host->resize(count);
  if (count * sizeof(T) > buf.bytes()) {
    return ::testing::AssertionFailure()
           << count * sizeof(T) << " bytes asked of a " << buf.bytes() << "-byte buffer";
  }
  const cudaError_t err =
      cudaMemcpy(host->data(), buf.get(), count * sizeof(T), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemcpy to the host: " << cudaGetErrorString(err);
  }
  return ::testing::AssertionSuccess();
}

// ---- fp16 / bf16 on the host ---------------------------------------------------

// The value v holds once stored as `dtype` (kF16 or kBF16), as raw bits and
// back as float.
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
    r.bits[i] = to_bits(dist(rng), dtype);
    r.values[i] = from_bits(r.bits[i], dtype);
  }
  return r;
}

// Largest relative error of rounding a normal fp32 value to dtype (round to
// nearest: half the spacing at the bottom of a binade). bf16 keeps 8
// significant bits, fp16 11.
inline double half_ulp_rel(DType dtype) { return dtype == DType::kF16 ? 0x1p-11 : 0x1p-8; }

// fp32 differences between a device op and its fp32 reference (reduction
// order, expf), relative; far above the ~1e-6 seen in practice, far below a
// bf16/fp16 ulp. And an absolute floor below the smallest normal outputs
// the op tests produce, covering fp16 subnormal spacing (2^-24).
constexpr double kFp32Slack = 2e-5;
constexpr double kAbsSlack = 1e-6;

inline const char* dtype_label(DType dtype) { return dtype == DType::kF16 ? "f16" : "bf16"; }

}  // namespace pvllm::cuda_test

// Skips the current test with the reason when no CUDA device is usable.
#define PVLLM_CUDA_DEVICE_OR_SKIP()                                                \
  do {                                                                             \
    const std::string pvllm_reason = ::pvllm::cuda_test::missing_device_reason();  \
    if (!pvllm_reason.empty()) GTEST_SKIP() << "no CUDA device: " << pvllm_reason; \
  } while (0)

// Fails the current test (and returns) on a CUDA error; `expr` is a
// cudaError_t or a launcher's int result.
#define PVLLM_CUDA_OK(expr)                                                              \
  do {                                                                                   \
    const cudaError_t pvllm_err = static_cast<cudaError_t>(expr);                        \
    ASSERT_EQ(pvllm_err, cudaSuccess) << #expr << ": " << cudaGetErrorString(pvllm_err); \
  } while (0)
