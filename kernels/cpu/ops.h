// The dense building blocks of a Llama decoder on the CPU, fp32 math.
//
// Determinism: every reduction (dot products, sums of squares) is done by
// one thread in a fixed order that depends only on the reduction length —
// for dot products eight lanes, lane l a fused multiply-add chain over
// elements 8k + l in order (the tail zero padded), then the lanes summed as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); for matmul one fused
// multiply-add chain per output (gemm.cc). A row's result is therefore
// bit-identical whether it is computed alone or with other rows, on any
// number of threads.
#pragma once

#include <cstdint>

#include "core/base/tensor.h"
#include "core/model/model_config.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/thread_pool.h"

namespace pvllm::cpu {

// sum_i a[i] * b[i] over n floats, in the fixed order above.
float dot(const float* a, const float* b, int64_t n);

// out[t] = dot(a, rows + t * n) for t < num_rows: each bit for bit what
// dot() gives, eight rows at a time (eight independent chains, then one
// transposing reduction).
void dot_many(const float* a, const float* rows, int64_t num_rows, int64_t n, float* out);

// y[i] += alpha * x[i] for i in [0, n).
void axpy(float alpha, const float* x, float* y, int64_t n);

// y += alpha[t] * (rows + t * n) for t = 0, 1, ..., num_rows - 1 in that
// order: bit for bit the same as num_rows axpy() calls.
void axpy_many(const float* alpha, const float* rows, int64_t num_rows, int64_t n, float* y);

// x [n, dim] -> out [n, dim]: out = x / sqrt(mean(x^2) + eps) * weight.
// weight [dim]. out may alias x.
void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out);

// x [n, in] fp32 times w^T, w [out, in] packed (f32, f16 or bf16, converted
// on the fly) -> y [n, out]. Parallel over groups of output panels; each
// output is one fused multiply-add chain over in, in order (gemm.cc).
void matmul(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y);

// matmul with the sixteen-lane (AVX-512) tiles, run on any CPU: as two
// eight-lane halves where AVX-512 is absent. Bit-identical to matmul; it
// exists so that the AVX-512 tiling is tested on every machine.
void matmul_wide(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y);

// cos/sin [n, head_dim / 2] of positions[i] * inv_freq[j] (angles in double,
// then rounded), for rope().
void rope_cos_sin(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half,
                  float* cos_out, float* sin_out);

// Rotates x [n, num_heads, head_dim] in place by the angles of cos/sin
// [n, head_dim / 2]. Pair j of a head is (2j, 2j+1) for kInterleaved and
// (j, j + head_dim/2) for kRotateHalf; both get
// (a, b) -> (a cos - b sin, a sin + b cos).
void rope(float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos,
          const float* sin, RopeStyle style);

// y [n, dim] += bias [dim] on every row.
void add_bias(float* y, int64_t n, int64_t dim, const float* bias);

// out[i] = silu(gate[i]) * up[i] over count floats; out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t count, float* out);

// out [n, dim] = rows ids[i] of table [vocab, dim] (any dtype) as fp32.
// ids must be in range (the caller validates).
void embedding(const Tensor& table, const int32_t* ids, int64_t n, int64_t dim, float* out);

// out[j] = element offset + j of t as fp32, for j in [0, count).
void load_row(const Tensor& t, int64_t offset, int64_t count, float* out);

}  // namespace pvllm::cpu
