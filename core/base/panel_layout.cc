// Packing matrices into panels and back (panel_layout.h).
#include "core/base/panel_layout.h"

#include <cstring>
#include <limits>
#include <string>

namespace pvllm::panels {

Status shape_of(int64_t rows, int64_t cols, DType dtype, Shape* out) {
  if (rows <= 0 || cols <= 0) {
    return InvalidArgument("panels: a matrix of " + std::to_string(rows) + " rows and " +
                           std::to_string(cols) + " columns");
  }
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  const int64_t num_panels = (rows + kRows - 1) / kRows;
  // panel_bytes <= cols * kRows * elem + 63 and the total must fit in 63 bits.
  if (cols > (std::numeric_limits<int64_t>::max() / 2) / (kRows * elem * num_panels)) {
    return OutOfMemory("panels: a matrix of " + std::to_string(rows) + " x " +
                       std::to_string(cols) + " is too large");
  }
  Shape s;
  s.rows = rows;
  s.cols = cols;
  s.dtype = dtype;
  s.num_panels = num_panels;
  s.panel_bytes = (cols * kRows * elem + 63) / 64 * 64;
  *out = s;
  return Status::Ok();
}

Status shape_of(std::span<const Tensor* const> parts, Shape* out) {
  if (parts.empty()) return InvalidArgument("panels: no matrices");
  int64_t rows = 0;
  const int64_t cols = parts[0]->shape.size() == 2 ? parts[0]->shape[1] : 0;
  DType dtype = parts[0]->dtype;
  for (const Tensor* t : parts) {
    if (t->empty() || t->layout != Layout::kRowMajor || t->shape.size() != 2 || t->shape[0] <= 0 ||
        t->shape[1] <= 0) {
      return InvalidArgument("panels: " + t->name + " is not a non-empty row-major matrix");
    }
    if (t->shape[1] != cols) {
      return InvalidArgument("panels: " + t->name + " has " + std::to_string(t->shape[1]) +
                             " columns, " + parts[0]->name + " " + std::to_string(cols));
    }
    if (t->dtype != dtype) dtype = DType::kF32;
    if (t->shape[0] > std::numeric_limits<int64_t>::max() / 4 - rows) {
      return OutOfMemory("panels: " + t->name + " has too many rows");
    }
    rows += t->shape[0];
  }
  return shape_of(rows, cols, dtype, out);
}

void scatter_rows(const Tensor& part, int64_t row_offset, int64_t r0, int64_t r1,
                  const Shape& shape, uint8_t* panels) {
  const int64_t cols = part.shape[1];
  const DType to = shape.dtype;
  const auto elem = static_cast<int64_t>(dtype_size(to));
  const auto* src = static_cast<const uint8_t*>(part.data);
  const int64_t stride = kRows * elem;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t packed_row = row_offset + r;
    uint8_t* dst = panels + packed_row / kRows * shape.panel_bytes +
                   slot_of_row(to, packed_row % kRows) * elem;
    if (part.dtype == to && elem == 4) {
      const uint8_t* row = src + r * cols * 4;
      for (int64_t k = 0; k < cols; ++k) std::memcpy(dst + k * stride, row + k * 4, 4);
    } else if (part.dtype == to) {
      const uint8_t* row = src + r * cols * 2;
      for (int64_t k = 0; k < cols; ++k) std::memcpy(dst + k * stride, row + k * 2, 2);
    } else {  // to is fp32
      for (int64_t k = 0; k < cols; ++k) {
        const float v = load_as_float(part.dtype, part.data, r * cols + k);
        std::memcpy(dst + k * stride, &v, 4);
      }
    }
  }
}

void zero_padding(const Shape& shape, uint8_t* panels) {
  if (shape.rows % kRows != 0) {
    std::memset(panels + (shape.num_panels - 1) * shape.panel_bytes, 0,
                static_cast<size_t>(shape.panel_bytes));
  }
  const int64_t used = shape.cols * kRows * static_cast<int64_t>(dtype_size(shape.dtype));
  if (used == shape.panel_bytes) return;
  for (int64_t p = 0; p < shape.num_panels; ++p) {
    std::memset(panels + p * shape.panel_bytes + used, 0,
                static_cast<size_t>(shape.panel_bytes - used));
  }
}

void pack(std::span<const Tensor* const> parts, const Shape& shape, uint8_t* panels) {
  zero_padding(shape, panels);
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    scatter_rows(*t, offset, 0, t->shape[0], shape, panels);
    offset += t->shape[0];
  }
}

void unpack(const uint8_t* panels, const Shape& shape, uint8_t* out) {
  const auto elem = static_cast<int64_t>(dtype_size(shape.dtype));
  const int64_t stride = kRows * elem;
  for (int64_t r = 0; r < shape.rows; ++r) {
    const uint8_t* src =
        panels + r / kRows * shape.panel_bytes + slot_of_row(shape.dtype, r % kRows) * elem;
    uint8_t* row = out + r * shape.cols * elem;
    for (int64_t k = 0; k < shape.cols; ++k) {
      std::memcpy(row + k * elem, src + k * stride, static_cast<size_t>(elem));
    }
  }
}

}  // namespace pvllm::panels
