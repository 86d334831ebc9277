#include "kernels/cpu/packed_matrix.h"

#include <string>

namespace pvllm::cpu {

Status PackedMatrix::pack(const Tensor& w, ThreadPool* pool, PackedMatrix* out) {
  const Tensor* parts[] = {&w};
  return pack(parts, pool, out);
}

Status PackedMatrix::pack(std::span<const Tensor* const> parts, ThreadPool* pool,
                          PackedMatrix* out) {
  panels::Shape shape;
  const Status st = panels::shape_of(parts, &shape);
  if (!st.ok()) return Status(st.code(), "pack: " + st.message());
  PackedMatrix m;
  m.dtype_ = shape.dtype;
  m.rows_ = shape.rows;
  m.cols_ = shape.cols;
  m.panel_bytes_ = shape.panel_bytes;
  const auto total = static_cast<size_t>(shape.bytes());
  m.owned_ = allocate_host(total);
  if (m.owned_ == nullptr) {
    return OutOfMemory("pack: cannot allocate " + std::to_string(total) + " bytes for " +
                       parts[0]->name);
  }
  m.data_ = m.owned_.get();
  panels::zero_padding(shape, m.owned_.get());
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    auto copy = [&](int64_t r0, int64_t r1) {
      panels::scatter_rows(*t, offset, r0, r1, shape, m.owned_.get());
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

Status PackedMatrix::view(const Tensor& t, PackedMatrix* out) {
  if (t.empty() || t.layout != Layout::kPanels16 || t.shape.size() != 2) {
    return InvalidArgument("packed view: " + t.name + " is not a matrix in the panel layout");
  }
  panels::Shape shape;
  const Status st = panels::shape_of(t.shape[0], t.shape[1], t.dtype, &shape);
  if (!st.ok()) return Status(st.code(), "packed view: " + t.name + ": " + st.message());
  if (reinterpret_cast<uintptr_t>(t.data) % 64 != 0) {
    return InvalidArgument("packed view: " + t.name + " is not 64-byte aligned");
  }
  PackedMatrix m;
  m.dtype_ = shape.dtype;
  m.rows_ = shape.rows;
  m.cols_ = shape.cols;
  m.panel_bytes_ = shape.panel_bytes;
  m.data_ = static_cast<const uint8_t*>(t.data);
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace pvllm::cpu
