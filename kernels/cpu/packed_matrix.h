// A weight matrix repacked once, at load, into the layout the CPU GEMM
// reads (kernels/cpu/gemm.cc).
//
// W [rows, cols] (rows = output features, cols = input features, row-major
// as the checkpoint stores it) becomes panels of kPanelRows rows: panel p
// holds rows [16p, 16p + 16) as [cols][16] elements of W's dtype, so that
// for each input index k the sixteen weights of a panel are one contiguous
// 32- or 64-byte load. bf16 weights of a k step are stored as eight pairs
// (row i, row 8 + i), so that one 32-byte load gives rows 0-7 by a shift
// and rows 8-15 by a mask, where the plain order needs a widening shuffle
// and a shift for each eight. The last panel is zero-padded. Panels are
// 64-byte aligned.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "kernels/cpu/host_buffer.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu {

class PackedMatrix {
 public:
  static constexpr int64_t kPanelRows = 16;

  // Where row r (< kPanelRows) of a k step sits among its sixteen elements.
  static int64_t slot_of_row(DType dtype, int64_t r) {
    return dtype == DType::kBF16 ? (r < 8 ? 2 * r : 2 * (r - 8) + 1) : r;
  }

  PackedMatrix() = default;

  // Packs the 2-D tensor w; the pool (may be NULL) spreads the copy.
  // InvalidArgument when w is not a non-empty matrix, OutOfMemory when the
  // copy cannot be allocated.
  static Status pack(const Tensor& w, ThreadPool* pool, PackedMatrix* out);

  // Packs the rows of several matrices with the same number of columns one
  // after another, as one matrix (q, k and v projections become one GEMM).
  // Their dtype, or fp32 when they differ. InvalidArgument when the column
  // counts differ.
  static Status pack(std::span<const Tensor* const> parts, ThreadPool* pool, PackedMatrix* out);

  DType dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t num_panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  // Bytes of one panel: cols * kPanelRows elements.
  int64_t panel_bytes() const { return panel_bytes_; }
  // Panel p: [cols][kPanelRows] elements of dtype() (bf16: in pairs).
  const uint8_t* panel(int64_t p) const { return data_.get() + p * panel_bytes_; }
  bool empty() const { return data_ == nullptr; }
  size_t nbytes() const { return static_cast<size_t>(num_panels() * panel_bytes_); }

 private:
  HostBuffer data_;
  DType dtype_ = DType::kF32;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  int64_t panel_bytes_ = 0;
};

}  // namespace pvllm::cpu
