// The panel layout of a weight matrix: the order the CPU GEMM reads
// (kernels/cpu/gemm.cc) and the order a .pvllm file may store a matrix in,
// so that the CPU backend serves it from the file's mapping without a copy
// (docs/format.md).
//
// W [rows, cols] (rows = output features, cols = input features, row-major
// as checkpoints store it) becomes panels of kRows rows: panel p holds rows
// [16p, 16p + 16) as [cols][16] elements, so that for each input index k the
// sixteen weights of a panel are one contiguous 32- or 64-byte load. bf16
// weights of a k step are stored as eight pairs (row i, row 8 + i). A panel
// takes a multiple of 64 bytes (its tail zero); the last panel's missing
// rows are zero. Several matrices with the same column count can be packed
// one after another as one matrix (q, k and v; gate and up): in their common
// dtype, or fp32 when they differ.
#pragma once

#include <cstdint>
#include <span>

#include "core/base/status.h"
#include "core/base/tensor.h"

namespace pvllm::panels {

inline constexpr int64_t kRows = 16;

// Where row r (< kRows) of a k step sits among its sixteen elements.
inline int64_t slot_of_row(DType dtype, int64_t r) {
  return dtype == DType::kBF16 ? (r < 8 ? 2 * r : 2 * (r - 8) + 1) : r;
}

// The shape of the packed matrix that `parts` make, checked: each a
// non-empty row-major matrix with the same column count. `*bytes` is
// num_panels * panel_bytes, computed without overflow (OutOfMemory when it
// does not fit in 63 bits).
struct Shape {
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::kF32;
  int64_t panel_bytes = 0;  // a multiple of 64
  int64_t num_panels = 0;
  int64_t bytes() const { return panel_bytes * num_panels; }
};
Status shape_of(std::span<const Tensor* const> parts, Shape* out);
// The same for a matrix of known rows, cols and dtype; InvalidArgument for
// a non-positive size, OutOfMemory when it overflows.
Status shape_of(int64_t rows, int64_t cols, DType dtype, Shape* out);

// Writes rows [r0, r1) of `part` into `panels` (shape.bytes() bytes) as rows
// row_offset + r of the packed matrix. Rows of one call may go in parallel
// with rows of another (they write disjoint bytes).
void scatter_rows(const Tensor& part, int64_t row_offset, int64_t r0, int64_t r1,
                  const Shape& shape, uint8_t* panels);
// Zeroes the bytes no row writes: panel tails and the last panel's missing
// rows.
void zero_padding(const Shape& shape, uint8_t* panels);
// Packs `parts` whole into `panels` (shape_of(parts).bytes() bytes).
void pack(std::span<const Tensor* const> parts, const Shape& shape, uint8_t* panels);
// The inverse: row-major [rows, cols] elements of shape.dtype into `out`.
void unpack(const uint8_t* panels, const Shape& shape, uint8_t* out);

}  // namespace pvllm::panels
