// Tensor views over weights as they were loaded (usually an mmapped file).
// A Tensor never owns its bytes; the Model that produced it does.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pvllm {

// The element types of weights. After the plain types come ggml's block
// quantized types (core/quant/block_formats.h has their layouts, bit for bit
// ggml's): a row of such a tensor is a whole number of blocks, each
// dtype_block_elems() elements in dtype_block_bytes() bytes. The values are
// pvllm's own (what a .pvllm file stores), not ggml's type ids.
enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kQ8_0 = 3,
  kQ4_0 = 4,
  kQ4_1 = 5,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ2_K = 8,
  kQ3_K = 9,
  kQ4_K = 10,
  kQ5_K = 11,
  kQ6_K = 12,
  kIQ4_NL = 13,
  kIQ4_XS = 14,
};
inline constexpr int kNumDTypes = 15;

// How a tensor's elements are ordered. kPanels16: a matrix already packed in
// the CPU GEMM's panel layout (panel_layout.h), as a .pvllm file may store
// it; only code that asks for it reads one (the CPU backend, unpacking).
enum class Layout : uint8_t { kRowMajor = 0, kPanels16 = 1 };

// "F32", "Q4_K", ... (ggml's spelling).
const char* dtype_name(DType t);
// The type named `name` (as dtype_name spells it, any case); false if none.
bool dtype_from_name(const std::string& name, DType* out);
// The bytes of one element of a plain type (F32, F16, BF16); 0 for a
// block-quantized type, whose elements have no size of their own.
size_t dtype_size(DType t);
// True for the block-quantized types (Q8_0 and after).
bool dtype_is_quantized(DType t);
// Elements per block (1 for a plain type) and bytes per block (the element
// size for a plain type).
int64_t dtype_block_elems(DType t);
size_t dtype_block_bytes(DType t);
// The bytes of `n` elements of `t`, n a multiple of dtype_block_elems(t)
// (0 otherwise).
size_t dtype_row_bytes(DType t, int64_t n);

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
  // The bytes the tensor takes: numel * element size, its rows' blocks for
  // a quantized type (0 when the last dimension is not a whole number of
  // blocks), or its panels' bytes (padding included) for kPanels16.
  size_t nbytes() const;
  bool empty() const { return data == nullptr; }
};

// IEEE half and bfloat16 to float, bit exact.
float fp16_to_float(uint16_t h);
float bf16_to_float(uint16_t b);
uint16_t float_to_fp16(float f);  // round to nearest even
uint16_t float_to_bf16(float f);  // round to nearest even

// Element i of a tensor of a plain dtype, as float; NaN for a quantized
// type (core/quant/dequantize.h reads those, a block at a time).
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
    default:
      break;
  }
  return __builtin_nanf("");
}

}  // namespace pvllm
