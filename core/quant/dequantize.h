// Quantized (and plain) rows to float: the values GGUF files mean, bit for
// bit what ggml's own dequantizers give (the float operations are the same
// ones in the same order, each rounded to float; no FMA contraction: this
// library is built with -ffp-contract=off). quant_dequantize_test checks
// every tensor of the fixtures in tests/data/gguf against ggml's output.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"

namespace pvllm::quant {

// The n values of a row of type `t` starting at `src` (any alignment) into
// dst[0, n). n must be a multiple of dtype_block_elems(t) (a broken
// invariant otherwise: PVLLM_CHECK). F32 is copied, F16 and BF16 widened.
void dequantize_row(DType t, const void* src, int64_t n, float* dst);

// Elements [offset, offset + count) of a row-major tensor, in its
// row-major element order, as float: what an embedding lookup (one row) or
// a norm weight reads. offset and count must be multiples of the tensor's
// block (a row of a quantized tensor is a whole number of blocks, so any
// range of whole rows is) and lie within numel(); kPanels16 tensors are
// not read here. Either is a broken invariant (PVLLM_CHECK).
void tensor_to_floats(const Tensor& t, int64_t offset, int64_t count, float* out);

}  // namespace pvllm::quant
