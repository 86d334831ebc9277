// Tensor views over weights as they were loaded (usually an mmapped file).
// A Tensor never owns its bytes; the Model that produced it does.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pvllm {

enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

// How a tensor's elements are ordered. kPanels16: a matrix already packed in
// the CPU GEMM's panel layout (panel_layout.h), as a .pvllm file may store
// it; only code that asks for it reads one (the CPU backend, unpacking).
enum class Layout : uint8_t { kRowMajor = 0, kPanels16 = 1 };

const char* dtype_name(DType t);
size_t dtype_size(DType t);

struct Tensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major; matrices are [out_features, in_features]
  const void* data = nullptr;  // nbytes() bytes, alignment of the element type not guaranteed
  Layout layout = Layout::kRowMajor;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // The bytes the tensor takes: numel * element size, or its panels'
  // bytes (padding included) for kPanels16.
  size_t nbytes() const;
  bool empty() const { return data == nullptr; }
};

// IEEE half and bfloat16 to float, bit exact.
float fp16_to_float(uint16_t h);
float bf16_to_float(uint16_t b);
uint16_t float_to_fp16(float f);  // round to nearest even
uint16_t float_to_bf16(float f);  // round to nearest even

// Element i of a tensor of any supported dtype, as float.
inline float load_as_float(DType t, const void* data, int64_t i) {
  switch (t) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, static_cast<const char*>(data) + i * 4, 4);
      return v;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(data) + i * 2, 2);
      return fp16_to_float(h);
    }
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, static_cast<const char*>(data) + i * 2, 2);
      return bf16_to_float(b);
    }
  }
  return 0.0f;
}

}  // namespace pvllm
