#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/simd.h"

// Compiled once per ISA variant (see isa.h): PVLLM_CPU_VARIANT names the
// namespace of this build's definitions.
#ifndef PVLLM_CPU_VARIANT
#error "PVLLM_CPU_VARIANT must name the variant's namespace"
#endif

namespace pvllm::cpu::PVLLM_CPU_VARIANT {
namespace {

// Eight floats from p + i, the ones at or past n zero.
inline V8 load_padded(const float* p, int64_t i, int64_t n) {
  if (i + 8 <= n) return V8::load(p + i);
  float tmp[8] = {};
  std::memcpy(tmp, p + i, static_cast<size_t>(n - i) * sizeof(float));
  return V8::load(tmp);
}

// The dot product's lanes for up to eight rows at once: lane l of acc[r] is
// the fused multiply-add chain over elements 8k + l of a and row r, k in
// order, the tail zero padded. Rows past num_rows stay zero.
inline void dot_lanes8(const float* a, const float* rows, int64_t num_rows, int64_t n, V8* acc) {
  for (int r = 0; r < 8; ++r) acc[r] = V8::zero();
  const int64_t rows_here = std::min<int64_t>(num_rows, 8);
  for (int64_t i = 0; i < n; i += 8) {
    const V8 x = load_padded(a, i, n);
    if (rows_here == 8 && i + 8 <= n) {  // the common case, unrolled
      for (int r = 0; r < 8; ++r) acc[r] = V8::fma(x, V8::load(rows + r * n + i), acc[r]);
    } else {
      for (int64_t r = 0; r < rows_here; ++r) {
        acc[r] = V8::fma(x, load_padded(rows + r * n, i, n), acc[r]);
      }
    }
  }
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  V8 acc[8];
  dot_lanes8(a, b, 1, n, acc);
  return acc[0].hsum();
}

void dot_many(const float* a, const float* rows, int64_t num_rows, int64_t n, float* out) {
  for (int64_t r = 0; r < num_rows; r += 8) {
    V8 acc[8];
    dot_lanes8(a, rows + r * n, num_rows - r, n, acc);
    const V8 sums = V8::hsum8(acc);  // lane j: acc[j].hsum()
    if (r + 8 <= num_rows) {
      sums.store(out + r);
    } else {
      float tmp[8];
      sums.store(tmp);
      std::memcpy(out + r, tmp, static_cast<size_t>(num_rows - r) * sizeof(float));
    }
  }
}

// out[t * out_stride + r] = dot(q + t * n, rows + r * n, n) for t < num_q,
// r < num_rows: attention's scores of several query vectors (used by
// paged_attention.cc of this variant). The rows stay in cache across the
// query vectors.
void dot_grid(const float* q, int64_t num_q, const float* rows, int64_t num_rows, int64_t n,
              float* out, int64_t out_stride) {
  for (int64_t t = 0; t < num_q; ++t) dot_many(q + t * n, rows, num_rows, n, out + t * out_stride);
}

void axpy(float alpha, const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if PVLLM_CPU_AVX2
  const __m256 a = _mm256_set1_ps(alpha);
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
#endif
  for (; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

// Lanes [i, i + 8 * C) of y over all rows: C independent chains, so the
// fused multiply-adds overlap instead of waiting on one another.
template <int C>
inline void axpy_chunks(const float* alpha, const float* rows, int64_t num_rows, int64_t n,
                        int64_t i, float* y) {
  V8 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = V8::load(y + i + 8 * c);
  for (int64_t t = 0; t < num_rows; ++t) {
    const V8 a = V8::broadcast(alpha[t]);
    for (int c = 0; c < C; ++c) acc[c] = V8::fma(a, V8::load(rows + t * n + i + 8 * c), acc[c]);
  }
  for (int c = 0; c < C; ++c) acc[c].store(y + i + 8 * c);
}

template <int... Cs>
void axpy_remainder(int chunks, const float* alpha, const float* rows, int64_t num_rows, int64_t n,
                    int64_t i, float* y, std::integer_sequence<int, Cs...> /*counts*/) {
  ((chunks == Cs + 1 ? axpy_chunks<Cs + 1>(alpha, rows, num_rows, n, i, y) : void()), ...);
}

void axpy_many(const float* alpha, const float* rows, int64_t num_rows, int64_t n, float* y) {
  // Each lane of y sees the same fused multiply-adds in the same order as
  // axpy() would give it, however the lanes are grouped: eight vectors of
  // lanes at a time, then the remaining whole vectors in one pass (so a
  // 48-wide head is six chains at once, not four and then one and one).
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) axpy_chunks<8>(alpha, rows, num_rows, n, i, y);
  if (const auto chunks = static_cast<int>((n - i) / 8); chunks > 0) {
    axpy_remainder(chunks, alpha, rows, num_rows, n, i, y, std::make_integer_sequence<int, 7>{});
    i += 8 * chunks;
  }
  for (; i < n; ++i) {
    float acc = y[i];
    for (int64_t t = 0; t < num_rows; ++t) acc = std::fma(alpha[t], rows[t * n + i], acc);
    y[i] = acc;
  }
}

void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float ss = dot(xr, xr, dim);
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t j = 0; j < dim; ++j) o[j] = (xr[j] * inv) * weight[j];
  }
}

void rope_cos_sin(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half,
                  float* cos_out, float* sin_out) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[j]);
      cos_out[t * half + j] = static_cast<float>(std::cos(angle));
      sin_out[t * half + j] = static_cast<float>(std::sin(angle));
    }
  }
}

void rope(float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos,
          const float* sin, RopeStyle style) {
  const int64_t half = head_dim / 2;
  // Element offsets of the two halves of pair j.
  const int64_t stride = style == RopeStyle::kInterleaved ? 2 : 1;
  const int64_t partner = style == RopeStyle::kInterleaved ? 1 : half;
  for (int64_t t = 0; t < n; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < num_heads; ++h) {
      float* head = x + (t * num_heads + h) * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        float* p = head + j * stride;
        const float a = p[0];
        const float b = p[partner];
        p[0] = a * c[j] - b * s[j];
        p[partner] = a * s[j] + b * c[j];
      }
    }
  }
}

void add_bias(float* y, int64_t n, int64_t dim, const float* bias) {
  for (int64_t r = 0; r < n; ++r) {
    float* row = y + r * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] += bias[j];
  }
}

void silu_mul(const float* gate, const float* up, int64_t count, float* out) {
  // silu(g) * u = g / (1 + e^-g) * u, eight lanes at a time; the tail goes
  // through the same lanes, zero padded, so every element gets the same
  // operations wherever it sits.
  auto eight = [](const float* g8, const float* u8, float* o8) {
    const V8 g = V8::load(g8);
    const V8 e = exp(V8::sub(V8::zero(), g));
    V8::mul(V8::div(g, V8::add(V8::broadcast(1.0f), e)), V8::load(u8)).store(o8);
  };
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) eight(gate + i, up + i, out + i);
  if (i < count) {
    float g[8] = {}, u[8] = {}, o[8];
    std::memcpy(g, gate + i, (count - i) * sizeof(float));
    std::memcpy(u, up + i, (count - i) * sizeof(float));
    eight(g, u, o);
    std::memcpy(out + i, o, (count - i) * sizeof(float));
  }
}

void load_row(const Tensor& t, int64_t offset, int64_t count, float* out) {
  if (t.dtype == DType::kF32) {
    std::memcpy(out, static_cast<const char*>(t.data) + offset * 4, count * sizeof(float));
    return;
  }
  for (int64_t j = 0; j < count; ++j) out[j] = load_as_float(t.dtype, t.data, offset + j);
}

void embedding(const Tensor& table, const int32_t* ids, int64_t n, int64_t dim, float* out) {
  for (int64_t t = 0; t < n; ++t)
    load_row(table, static_cast<int64_t>(ids[t]) * dim, dim, out + t * dim);
}

// This variant's kernel table (kernel_table.h); gemm.cc, quant_gemm.cc,
// quant_activation.cc and paged_attention.cc of the same variant define the
// rest.
void matmul(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y);
void matmul_wide(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y);
void paged_attention(const PagedAttentionParams& p, ThreadPool* pool);
void write_kv(const WriteKvParams& p);
bool quant_gemm_supports(DType t);
void quant_gemm(ThreadPool* pool, const QuantMatrix& w, const void* act, size_t act_row, int64_t n,
                float* y, int64_t ldy, QuantIntDot dot);
void quantize_activations(quant::ActivationKind kind, const float* x, int64_t n, void* dst);

const KernelTable& kernel_table() {
  static const KernelTable table{&dot,         &dot_many,
                                 &axpy,        &axpy_many,
                                 &rmsnorm,     &matmul,
                                 &matmul_wide, &rope_cos_sin,
                                 &rope,        &add_bias,
                                 &silu_mul,    &embedding,
                                 &load_row,    &paged_attention,
                                 &write_kv,    &quant_gemm_supports,
                                 &quant_gemm,  &quantize_activations};
  return table;
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
