// CPU matmul throughput: cpu::matmul (the packed GEMM, gemm.cc) over batch
// sizes, weight dtypes and thread counts on the projection shapes of the
// llama2.c 15M and 110M models, as GFLOP/s and as a share of the FMA peak
// that cpu_roofline measures; beside it, where the build found them
// (Debian's libopenblas-dev, libdnnl-dev), OpenBLAS's cblas_sgemm and
// oneDNN's dnnl_sgemm on the same fp32 operands, with the same threads. A
// benchmark that prints figures, not a test (docs/performance.md).
//
// Usage: cpu_matmul_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/thread_pool.h"

#if PVLLM_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int num_threads);
#endif
#if PVLLM_BENCH_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

namespace {

using pvllm::DType;
using pvllm::Tensor;
using Clock = std::chrono::steady_clock;

struct Weights {
  std::vector<uint8_t> bytes;
  Tensor tensor;
  std::vector<float> f32;  // the same values as fp32, for the BLAS runs
};

Weights make_weights(DType dtype, int64_t out, int64_t in, std::mt19937* rng) {
  Weights w;
  const size_t elem = pvllm::dtype_size(dtype);
  const auto count = static_cast<size_t>(out * in);
  w.bytes.resize(count * elem);
  w.f32.resize(count);
  // Normal values of a weight's size (no denormals to slow the FMAs).
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (size_t i = 0; i < count; ++i) {
    const float v = normal(*rng);
    if (dtype == DType::kF32) {
      std::memcpy(&w.bytes[i * 4], &v, 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? pvllm::float_to_bf16(v) : pvllm::float_to_fp16(v);
      std::memcpy(&w.bytes[i * 2], &h, 2);
    }
    w.f32[i] = pvllm::load_as_float(dtype, w.bytes.data(), static_cast<int64_t>(i));
  }
  w.tensor.name.assign(1, 'w');
  w.tensor.dtype = dtype;
  w.tensor.shape = {out, in};
  w.tensor.data = w.bytes.data();
  return w;
}

// Seconds per call: the best of three timed batches after one warm-up call.
template <typename Fn>
double seconds_per_call(Fn fn, double min_seconds) {
  fn();
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    int64_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < min_seconds);
    best = std::min(best, elapsed / static_cast<double>(calls));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const double min_seconds = quick ? 0.05 : 0.3;
  struct Shape {
    const char* name;
    int64_t out, in;
  };
  // 110M: q/k/v fused, gate/up fused, down, the classifier; 15M: q/k/v fused.
  const std::vector<Shape> shapes = {{"110M qkv 768->2304", 2304, 768},
                                     {"110M gate_up 768->4096", 4096, 768},
                                     {"110M down 2048->768", 768, 2048},
                                     {"110M classifier 768->32000", 32000, 768},
                                     {"15M qkv 288->864", 864, 288}};
  const std::vector<int64_t> batches =
      quick ? std::vector<int64_t>{1, 64, 512} : std::vector<int64_t>{1, 6, 16, 64, 255, 512};
  const std::vector<DType> dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  std::mt19937 rng(1);
  std::printf("%-27s %-5s %7s %4s %10s %9s", "shape", "dtype", "threads", "n", "us/call",
              "GFLOP/s");
#if PVLLM_BENCH_OPENBLAS
  std::printf(" %9s", "OpenBLAS");
#endif
#if PVLLM_BENCH_DNNL
  std::printf(" %9s", "oneDNN");
#endif
  std::printf("   (GFLOP/s)\n");
  for (const int threads : {1, 0}) {
    pvllm::cpu::ThreadPool pool(threads);
    const int n_threads = pool.num_threads();
#if PVLLM_BENCH_OPENBLAS
    openblas_set_num_threads(n_threads);
#endif
#if PVLLM_BENCH_DNNL
    omp_set_num_threads(n_threads);
#endif
    for (const Shape& s : shapes) {
      for (const DType dtype : dtypes) {
        const Weights w = make_weights(dtype, s.out, s.in, &rng);
        pvllm::cpu::PackedMatrix packed;
        if (!pvllm::cpu::PackedMatrix::pack(w.tensor, &pool, &packed).ok()) return 1;
        for (const int64_t n : batches) {
          std::vector<float> x(static_cast<size_t>(n * s.in));
          std::uniform_real_distribution<float> u(-1.0f, 1.0f);
          for (float& v : x) v = u(rng);
          std::vector<float> y(static_cast<size_t>(n * s.out));
          const double flops = 2.0 * static_cast<double>(n * s.out * s.in);
          const double sec = seconds_per_call(
              [&] { pvllm::cpu::matmul(&pool, x.data(), n, packed, y.data()); }, min_seconds);
          std::printf("%-27s %-5s %7d %4lld %10.1f %9.1f", s.name, pvllm::dtype_name(dtype),
                      n_threads, static_cast<long long>(n), sec * 1e6, flops / sec * 1e-9);
          // The libraries take fp32 weights only: compared on the fp32 rows.
#if PVLLM_BENCH_OPENBLAS
          if (dtype == DType::kF32) {
            const double t = seconds_per_call(
                [&] {
                  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                              static_cast<int>(s.out), static_cast<int>(s.in), 1.0f, x.data(),
                              static_cast<int>(s.in), w.f32.data(), static_cast<int>(s.in), 0.0f,
                              y.data(), static_cast<int>(s.out));
                },
                min_seconds);
            std::printf(" %9.1f", flops / t * 1e-9);
          } else {
            std::printf(" %9s", "-");
          }
#endif
#if PVLLM_BENCH_DNNL
          if (dtype == DType::kF32) {
            const double t = seconds_per_call(
                [&] {
                  dnnl_sgemm('N', 'T', n, s.out, s.in, 1.0f, x.data(), s.in, w.f32.data(), s.in,
                             0.0f, y.data(), s.out);
                },
                min_seconds);
            std::printf(" %9.1f", flops / t * 1e-9);
          } else {
            std::printf(" %9s", "-");
          }
#endif
          std::printf("\n");
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
