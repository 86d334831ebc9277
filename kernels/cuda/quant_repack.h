// Repacking a Q8_0, Q4_0 or Q4_K weight, as a GGUF file stores it, into the
// layout the quantized matmul kernels read (common/quant_layout.h): done
// once on the host at load, in plain C++ so the CPU tests run it too. The
// result holds the same bytes as the file, rearranged; nothing is
// dequantized.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "core/base/tensor.h"

namespace pvllm {

// The host side of one repacked weight W [n, k].
struct QuantRepacked {
  DType dtype = DType::kQ8_0;  // kQ8_0, kQ4_0 or kQ4_K
  int64_t n = 0;
  int64_t k = 0;
  std::vector<uint8_t> codes;   // quant_layout's codes
  std::vector<uint8_t> scales;  // quant_layout's scales
};

// Whether the kernels serve W [n, k] of this dtype: kQ8_0, kQ4_0 or kQ4_K,
// n > 0 a multiple of 8, k > 0 a multiple of the type's block (32, 32,
// 256). InvalidArgument (naming what is wrong) otherwise.
Status quant_matmul_check_weight(DType dtype, int64_t n, int64_t k);

// Bytes of each array for a served weight.
int64_t quant_codes_bytes(DType dtype, int64_t n, int64_t k);
int64_t quant_scales_bytes(DType dtype, int64_t n, int64_t k);

// Repacks `data` (n rows of k elements of `dtype`, ggml's blocks back to
// back, any alignment) into `out`. The weight must pass
// quant_matmul_check_weight; its status is returned otherwise.
Status quant_repack(DType dtype, const void* data, int64_t n, int64_t k, QuantRepacked* out);

}  // namespace pvllm
