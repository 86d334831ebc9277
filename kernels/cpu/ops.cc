#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/simd.h"

// Compiled once per ISA variant (see isa.h): PVLLM_CPU_VARIANT names the
// namespace of this build's definitions.
#ifndef PVLLM_CPU_VARIANT
#error "PVLLM_CPU_VARIANT must name the variant's namespace"
#endif

namespace pvllm::cpu::PVLLM_CPU_VARIANT {
namespace {

// The last count (< 8) elements from i, zero padded to eight lanes.
template <DType D>
V8 load_tail(const void* row, int64_t i, int64_t count) {
  float tmp[8] = {};
  for (int64_t k = 0; k < count; ++k) tmp[k] = load_as_float(D, row, i + k);
  return V8::load(tmp);
}

// y[t * y_stride + r] = dot(w + r * w_stride bytes, x + t * x_stride) for
// t < NT, r < NR, over `in` elements. Every (t, r) gets exactly the
// arithmetic dot() does, whatever NT and NR are: lanes of acc0 take elements
// 16k..16k+7, lanes of acc1 16k+8..16k+15, then a final 8-wide step into acc0
// and a zero-padded tail into acc1. A weight load feeds NT tokens and an x
// load NR rows, so a 3 x 2 tile does 12 FMAs per 10 loads where a 4 x 1 tile
// does 8.
template <DType D, int NT, int NR>
inline void dot_tile(const void* w, int64_t w_stride, int64_t in, const float* x, int64_t x_stride,
                     float* y, int64_t y_stride) {
  const char* wr[NR];
  for (int r = 0; r < NR; ++r) wr[r] = static_cast<const char*>(w) + r * w_stride;
  V8 acc0[NT][NR];
  V8 acc1[NT][NR];
  for (int t = 0; t < NT; ++t) {
    for (int r = 0; r < NR; ++r) acc0[t][r] = acc1[t][r] = V8::zero();
  }
  int64_t i = 0;
  for (; i + 16 <= in; i += 16) {
    V8 w0[NR], w1[NR];
    for (int r = 0; r < NR; ++r) {
      w0[r] = load_weights<V8, D>(wr[r], i);
      w1[r] = load_weights<V8, D>(wr[r], i + 8);
    }
    for (int t = 0; t < NT; ++t) {
      const V8 x0 = V8::load(x + t * x_stride + i);
      const V8 x1 = V8::load(x + t * x_stride + i + 8);
      for (int r = 0; r < NR; ++r) {
        acc0[t][r] = V8::fma(w0[r], x0, acc0[t][r]);
        acc1[t][r] = V8::fma(w1[r], x1, acc1[t][r]);
      }
    }
  }
  if (i + 8 <= in) {
    for (int r = 0; r < NR; ++r) {
      const V8 w0 = load_weights<V8, D>(wr[r], i);
      for (int t = 0; t < NT; ++t) {
        acc0[t][r] = V8::fma(w0, V8::load(x + t * x_stride + i), acc0[t][r]);
      }
    }
    i += 8;
  }
  if (i < in) {
    for (int r = 0; r < NR; ++r) {
      const V8 w1 = load_tail<D>(wr[r], i, in - i);
      for (int t = 0; t < NT; ++t) {
        const V8 xt = load_tail<DType::kF32>(x + t * x_stride, i, in - i);
        acc1[t][r] = V8::fma(w1, xt, acc1[t][r]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = V8::add(acc0[t][r], acc1[t][r]).hsum();
  }
}

// One weight row against NT tokens: y[t * y_stride] = dot(w, x + t * x_stride).
template <DType D, int NT>
inline void dot_rows(const void* w, int64_t in, const float* x, int64_t x_stride, float* y,
                     int64_t y_stride) {
  dot_tile<D, NT, 1>(w, 0, in, x, x_stride, y, y_stride);
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  float r;
  dot_rows<DType::kF32, 1>(a, n, b, 0, &r, 0);
  return r;
}

void dot_many(const float* a, const float* rows, int64_t num_rows, int64_t n, float* out) {
  int64_t t = 0;
  for (; t + 4 <= num_rows; t += 4) dot_rows<DType::kF32, 4>(a, n, rows + t * n, n, out + t, 1);
  for (; t < num_rows; ++t) dot_rows<DType::kF32, 1>(a, n, rows + t * n, n, out + t, 1);
}

// out[t * out_stride + r] = dot(q + t * n, rows + r * n, n) for t < num_q,
// r < num_rows: attention's scores of several query vectors (used by
// paged_attention.cc of this variant).
void dot_grid(const float* q, int64_t num_q, const float* rows, int64_t num_rows, int64_t n,
              float* out, int64_t out_stride) {
  // Tiles of 3 vectors x 2 rows (each K row loaded once for three query
  // vectors), then the edges; every entry is dot()'s arithmetic.
  const int64_t row_bytes = n * static_cast<int64_t>(sizeof(float));
  int64_t t = 0;
  for (; t + 3 <= num_q; t += 3) {
    int64_t r = 0;
    for (; r + 2 <= num_rows; r += 2) {
      dot_tile<DType::kF32, 3, 2>(rows + r * n, row_bytes, n, q + t * n, n,
                                  out + t * out_stride + r, out_stride);
    }
    if (r < num_rows) {
      dot_tile<DType::kF32, 3, 1>(rows + r * n, row_bytes, n, q + t * n, n,
                                  out + t * out_stride + r, out_stride);
    }
  }
  for (; t < num_q; ++t) {
    dot_many(q + t * n, rows, num_rows, n, out + t * out_stride);
  }
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

void axpy_many(const float* alpha, const float* rows, int64_t num_rows, int64_t n, float* y) {
  int64_t i = 0;
#if PVLLM_CPU_AVX2
  // Eight lanes of y stay in a register across the rows; each lane sees the
  // same fused multiply-adds in the same order as axpy().
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_loadu_ps(y + i);
    for (int64_t t = 0; t < num_rows; ++t) {
      acc = _mm256_fmadd_ps(_mm256_set1_ps(alpha[t]), _mm256_loadu_ps(rows + t * n + i), acc);
    }
    _mm256_storeu_ps(y + i, acc);
  }
#endif
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

// This variant's kernel table (kernel_table.h); gemm.cc and
// paged_attention.cc of the same variant define the rest.
void matmul(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y);
void matmul_wide(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y);
void paged_attention(const PagedAttentionParams& p, ThreadPool* pool);
void write_kv(const WriteKvParams& p);

const KernelTable& kernel_table() {
  static const KernelTable table{&dot,      &dot_many,        &axpy,        &axpy_many,
                                 &rmsnorm,  &matmul,          &matmul_wide, &rope_cos_sin,
                                 &rope,     &add_bias,        &silu_mul,    &embedding,
                                 &load_row, &paged_attention, &write_kv};
  return table;
}

}  // namespace pvllm::cpu::PVLLM_CPU_VARIANT
