// Float weights to ggml's block formats: the quantizers ggml uses to make
// model files when no importance matrix is given (ggml_quantize_chunk with
// imatrix NULL), giving byte-identical blocks. Rows are independent, so a
// tensor is quantized row by row or all at once alike. Deterministic and
// single-threaded; this library is built with -ffp-contract=off so that
// every float operation rounds where the reference's does.
// quant_quantize_test checks them against the GGUF fixtures of
// tests/data/gguf.
#pragma once

#include <cstdint>

#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/quant/block_formats.h"

namespace pvllm::quant {

// True for every DType: the plain types convert (F32 copies, F16 and BF16
// round to nearest even) and all 12 block types quantize.
bool can_quantize(DType t);

// Quantizes x[0, n) to n / dtype_block_elems(t) blocks at dst (any
// alignment; dtype_row_bytes(t, n) bytes). INVALID_ARGUMENT when n is not a
// multiple of the block, UNSUPPORTED when !can_quantize(t); dst is untouched
// then. The inputs must be finite.
Status quantize_row(DType t, const float* x, int64_t n, void* dst);

// The same, one type each: num_blocks blocks from x[0, num_blocks * kElems).
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ8_0* y);
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ4_0* y);
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ4_1* y);
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ5_0* y);
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ5_1* y);
void quantize_blocks(const float* x, int64_t num_blocks, BlockIQ4_NL* y);  // quantize_iq4.cc
void quantize_blocks(const float* x, int64_t num_blocks, BlockIQ4_XS* y);  // quantize_iq4.cc
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ2_K* y);    // quantize_k.cc
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ3_K* y);    // quantize_k.cc
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ4_K* y);    // quantize_k.cc
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ5_K* y);    // quantize_k.cc
void quantize_blocks(const float* x, int64_t num_blocks, BlockQ6_K* y);    // quantize_k.cc

}  // namespace pvllm::quant
