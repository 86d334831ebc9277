// A weight matrix in the layout the CPU GEMM reads (kernels/cpu/gemm.cc):
// 16-row panels, defined in core/base/panel_layout.h. Either packed once,
// at load, from a row-major tensor (owning the copy), or a view of a matrix
// a .pvllm file already stores in that layout (served from the file's
// mapping, nothing copied).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/base/panel_layout.h"
#include "core/base/status.h"
#include "core/base/tensor.h"
#include "kernels/cpu/host_buffer.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu {

class PackedMatrix {
 public:
  static constexpr int64_t kPanelRows = panels::kRows;

  // Where row r (< kPanelRows) of a k step sits among its sixteen elements.
  static int64_t slot_of_row(DType dtype, int64_t r) { return panels::slot_of_row(dtype, r); }

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

  // Serves `t`, a kPanels16 tensor (already in this layout), in place; the
  // tensor's bytes must outlive the matrix. InvalidArgument when t is not a
  // non-empty panel matrix or its panels are not 64-byte aligned.
  static Status view(const Tensor& t, PackedMatrix* out);

  DType dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t num_panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  // Bytes of one panel: cols * kPanelRows elements.
  int64_t panel_bytes() const { return panel_bytes_; }
  // Panel p: [cols][kPanelRows] elements of dtype() (bf16: in pairs).
  const uint8_t* panel(int64_t p) const { return data_ + p * panel_bytes_; }
  bool empty() const { return data_ == nullptr; }
  // True when the panels are this matrix's own copy (false for a view).
  bool owns_data() const { return owned_ != nullptr; }
  size_t nbytes() const { return static_cast<size_t>(num_panels() * panel_bytes_); }

 private:
  HostBuffer owned_;  // empty for a view
  const uint8_t* data_ = nullptr;
  DType dtype_ = DType::kF32;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  int64_t panel_bytes_ = 0;
};

}  // namespace pvllm::cpu
