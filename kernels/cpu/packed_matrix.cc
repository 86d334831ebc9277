#include "kernels/cpu/packed_matrix.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace pvllm::cpu {
namespace {

// Copies rows [r0, r1) of `part` (as dtype `to`) into their places in the
// panels: row r of the packed matrix is `row_offset + r`.
void scatter_rows(const Tensor& part, int64_t row_offset, int64_t r0, int64_t r1, DType to,
                  int64_t panel_rows, int64_t panel_bytes, uint8_t* panels) {
  const int64_t cols = part.shape[1];
  const auto elem = static_cast<int64_t>(dtype_size(to));
  const auto* src = static_cast<const uint8_t*>(part.data);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t packed_row = row_offset + r;
    uint8_t* dst = panels + packed_row / panel_rows * panel_bytes +
                   PackedMatrix::slot_of_row(to, packed_row % panel_rows) * elem;
    const int64_t stride = panel_rows * elem;
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

}  // namespace

Status PackedMatrix::pack(const Tensor& w, ThreadPool* pool, PackedMatrix* out) {
  const Tensor* parts[] = {&w};
  return pack(parts, pool, out);
}

Status PackedMatrix::pack(std::span<const Tensor* const> parts, ThreadPool* pool,
                          PackedMatrix* out) {
  if (parts.empty()) return InvalidArgument("pack: no matrices");
  int64_t rows = 0;
  const int64_t cols = parts[0]->shape.size() == 2 ? parts[0]->shape[1] : 0;
  DType dtype = parts[0]->dtype;
  for (const Tensor* t : parts) {
    if (t->empty() || t->shape.size() != 2 || t->shape[0] <= 0 || t->shape[1] <= 0) {
      return InvalidArgument("pack: " + t->name + " is not a non-empty matrix");
    }
    if (t->shape[1] != cols) {
      return InvalidArgument("pack: " + t->name + " has " + std::to_string(t->shape[1]) +
                             " columns, " + parts[0]->name + " " + std::to_string(cols));
    }
    if (t->dtype != dtype) dtype = DType::kF32;
    rows += t->shape[0];
  }
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  const int64_t num_panels = (rows + kPanelRows - 1) / kPanelRows;
  if (cols > std::numeric_limits<int64_t>::max() / 2 / (kPanelRows * elem * num_panels)) {
    return OutOfMemory("pack: " + parts[0]->name + " is too large");
  }
  PackedMatrix m;
  m.dtype_ = dtype;
  m.rows_ = rows;
  m.cols_ = cols;
  // A multiple of 64 bytes, so every panel starts 64-byte aligned.
  m.panel_bytes_ = (cols * kPanelRows * elem + 63) / 64 * 64;
  const auto total = static_cast<size_t>(m.panel_bytes_ * num_panels);
  m.data_ = allocate_host(total);
  if (m.data_ == nullptr) {
    return OutOfMemory("pack: cannot allocate " + std::to_string(total) + " bytes for " +
                       parts[0]->name);
  }
  // Padding rows of the last panel and the panels' tails stay zero.
  if (rows % kPanelRows != 0) {
    std::memset(m.data_.get() + (num_panels - 1) * m.panel_bytes_, 0,
                static_cast<size_t>(m.panel_bytes_));
  }
  const int64_t used = cols * kPanelRows * elem;
  if (used != m.panel_bytes_) {
    for (int64_t p = 0; p < num_panels; ++p) {
      std::memset(m.data_.get() + p * m.panel_bytes_ + used, 0,
                  static_cast<size_t>(m.panel_bytes_ - used));
    }
  }
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    auto copy = [&](int64_t r0, int64_t r1) {
      scatter_rows(*t, offset, r0, r1, dtype, kPanelRows, m.panel_bytes_, m.data_.get());
    };
    if (pool == nullptr) {
      copy(0, t->shape[0]);
    } else {
      pool->parallel_for(t->shape[0], copy, 16);
    }
    offset += t->shape[0];
  }
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace pvllm::cpu
