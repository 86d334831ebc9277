#include "kernels/cpu/linear.h"

#include <cstring>
#include <new>
#include <string>

#include "kernels/cpu/ops.h"

namespace pvllm::cpu {

Status Linear::make(std::span<const Tensor* const> parts, ThreadPool* pool, Linear* out) {
  Linear l;
  for (const Tensor* t : parts) {
    if (t->empty() || t->shape.size() != 2) {
      return InvalidArgument("linear: " + t->name + " is not a matrix");
    }
    if (l.cols_ != 0 && t->shape[1] != l.cols_) {
      return InvalidArgument("linear: " + t->name + " has " + std::to_string(t->shape[1]) +
                             " columns, " + parts[0]->name + " " + std::to_string(l.cols_));
    }
    l.cols_ = t->shape[1];
  }
  // Runs of plain tensors are packed as one matrix; each quantized tensor
  // is a part of its own.
  size_t i = 0;
  while (i < parts.size()) {
    Part p;
    p.row0 = l.rows_;
    if (dtype_is_quantized(parts[i]->dtype)) {
      PVLLM_RETURN_IF_ERROR(QuantMatrix::make(*parts[i], pool, &p.quant));
      if (p.quant.packed()) l.copied_.push_back(parts[i]);
      l.rows_ += p.quant.rows();
      ++i;
    } else {
      size_t j = i;
      while (j < parts.size() && !dtype_is_quantized(parts[j]->dtype)) ++j;
      PVLLM_RETURN_IF_ERROR(PackedMatrix::pack(parts.subspan(i, j - i), pool, &p.packed));
      l.copied_.insert(l.copied_.end(), parts.begin() + static_cast<std::ptrdiff_t>(i),
                       parts.begin() + static_cast<std::ptrdiff_t>(j));
      l.rows_ += p.packed.rows();
      i = j;
    }
    l.parts_.push_back(std::move(p));
  }
  *out = std::move(l);
  return Status::Ok();
}

Status Linear::view_packed(const Tensor& t, Linear* out) {
  Linear l;
  Part p;
  PVLLM_RETURN_IF_ERROR(PackedMatrix::view(t, &p.packed));
  l.rows_ = p.packed.rows();
  l.cols_ = p.packed.cols();
  l.parts_.push_back(std::move(p));
  *out = std::move(l);
  return Status::Ok();
}

size_t Linear::weight_bytes() const {
  size_t total = 0;
  for (const Part& p : parts_) {
    total += p.packed.empty() ? p.quant.nbytes() : p.packed.nbytes();
  }
  return total;
}

Status Linear::apply(ThreadPool* pool, const float* x, int64_t n, float* y) const {
  if (parts_.size() == 1 && !parts_[0].packed.empty()) {
    matmul(pool, x, n, parts_[0].packed, y);
    return Status::Ok();
  }
  for (const Part& p : parts_) {
    if (!p.packed.empty()) {
      // The GEMM writes whole rows of its own width: through a scratch
      // buffer into this part's columns.
      thread_local std::vector<float> scratch;
      const size_t need = static_cast<size_t>(n * p.packed.rows());
      try {
        if (scratch.size() < need) scratch.resize(need);
      } catch (const std::bad_alloc&) {
        return OutOfMemory("linear: cannot allocate " + std::to_string(need * sizeof(float)) +
                           " bytes of scratch");
      }
      matmul(pool, x, n, p.packed, scratch.data());
      for (int64_t t = 0; t < n; ++t) {
        std::memcpy(y + t * rows_ + p.row0, scratch.data() + t * p.packed.rows(),
                    static_cast<size_t>(p.packed.rows()) * sizeof(float));
      }
    } else {
      PVLLM_RETURN_IF_ERROR(quant_matmul(pool, x, n, p.quant, y + p.row0, rows_));
    }
  }
  return Status::Ok();
}

}  // namespace pvllm::cpu
