// One projection of the CPU backend's layers: the rows of one or more
// weight tensors with the same number of columns, stacked (q, k and v as
// one; gate and up as one), multiplied as one matrix. Plain tensors (F32,
// F16, BF16) are packed together into the GEMM's panels (packed_matrix.h);
// quantized ones are each their own QuantMatrix (quant_matrix.h: the
// file's rows, plus the fast kernels' interleaved copy where the active ISA
// variant has one), since a GGUF file may give q, k and v different types.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/quant_matrix.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu {

class Linear {
 public:
  Linear() = default;

  // The tensors' rows, stacked in order. Plain tensors are packed, quantized
  // ones interleaved where a fast kernel reads them (the pool spreads the
  // copies); InvalidArgument when the column counts differ, OutOfMemory when
  // a copy cannot be allocated.
  static Status make(std::span<const Tensor* const> parts, ThreadPool* pool, Linear* out);
  // A matrix already in the panel layout (a packed .pvllm file's), in place.
  static Status view_packed(const Tensor& t, Linear* out);

  // The tensors make() copied into its own layout (whose source bytes the
  // backend then need not keep resident); the others are read in place.
  const std::vector<const Tensor*>& copied() const { return copied_; }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Bytes of weights this matrix reads per product.
  size_t weight_bytes() const;

  // y [n, rows()] = x [n, cols()] times the stacked weights, transposed.
  // OutOfMemory when a scratch buffer cannot be had.
  Status apply(ThreadPool* pool, const float* x, int64_t n, float* y) const;

 private:
  // Consecutive rows served by one matrix: either the plain rows packed
  // together, or one quantized tensor.
  struct Part {
    int64_t row0 = 0;
    PackedMatrix packed;  // when not empty
    QuantMatrix quant;    // otherwise
  };
  std::vector<Part> parts_;
  std::vector<const Tensor*> copied_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
};

}  // namespace pvllm::cpu
