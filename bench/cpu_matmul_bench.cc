// CPU matmul throughput: GFLOP/s and effective weight bandwidth of
// cpu::matmul over batch sizes, weight dtypes and thread counts, for the
// projection shapes of a small Llama. A benchmark that prints figures, not a
// test; run by hand (see docs/performance.md).
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
#include "kernels/cpu/thread_pool.h"

namespace {

using pvllm::DType;
using pvllm::Tensor;
using Clock = std::chrono::steady_clock;

struct Weights {
  std::vector<uint8_t> bytes;
  Tensor tensor;
};

Weights make_weights(DType dtype, int64_t out, int64_t in, std::mt19937* rng) {
  Weights w;
  const size_t elem = pvllm::dtype_size(dtype);
  w.bytes.resize(static_cast<size_t>(out * in) * elem);
  // Normal values of a weight's size (no denormals to slow the FMAs).
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (size_t i = 0; i < static_cast<size_t>(out * in); ++i) {
    const float v = normal(*rng);
    if (dtype == DType::kF32) {
      std::memcpy(&w.bytes[i * 4], &v, 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? pvllm::float_to_bf16(v) : pvllm::float_to_fp16(v);
      std::memcpy(&w.bytes[i * 2], &h, 2);
    }
  }
  w.tensor.dtype = dtype;
  w.tensor.shape = {out, in};
  w.tensor.data = w.bytes.data();
  return w;
}

// Seconds per call, the best of a few timed batches after one warm-up call.
double time_matmul(pvllm::cpu::ThreadPool* pool, const std::vector<float>& x, int64_t n,
                   const pvllm::cpu::PackedMatrix& w, std::vector<float>* y, double min_seconds) {
  pvllm::cpu::matmul(pool, x.data(), n, w, y->data());
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    int64_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      pvllm::cpu::matmul(pool, x.data(), n, w, y->data());
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
  const double min_seconds = quick ? 0.02 : 0.2;
  struct Shape {
    const char* name;
    int64_t out, in;
  };
  // hidden 512, intermediate 1408: gate/up fused and down, as in a ~25M model;
  // hidden 2048, intermediate 5632: TinyLlama-1.1B's MLP (weights past L3).
  const std::vector<Shape> shapes = {
      {"512->2816", 2816, 512}, {"1408->512", 512, 1408}, {"2048->5632", 5632, 2048}};
  const std::vector<int64_t> batches =
      quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128};
  const std::vector<DType> dtypes = {DType::kF32, DType::kBF16};
  std::mt19937 rng(1);
  std::printf("%-11s %-5s %7s %4s %10s %9s %10s\n", "shape", "dtype", "threads", "n", "us/call",
              "GFLOP/s", "weight GB/s");
  for (const int threads : {1, 0}) {
    pvllm::cpu::ThreadPool pool(threads);
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
          const double sec = time_matmul(&pool, x, n, packed, &y, min_seconds);
          const double flops = 2.0 * static_cast<double>(n * s.out * s.in);
          const double bytes = static_cast<double>(w.bytes.size());
          std::printf("%-11s %-5s %7d %4lld %10.1f %9.2f %10.2f\n", s.name,
                      pvllm::dtype_name(dtype), pool.num_threads(), static_cast<long long>(n),
                      sec * 1e6, flops / sec * 1e-9, bytes / sec * 1e-9);
        }
      }
    }
  }
  return 0;
}
