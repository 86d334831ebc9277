// cpu_roofline [THREADS]: this machine's limits for the CPU rooflines of
// scripts/bench_cpu.sh, measured now, one "name value" line each:
//   fma_gflops_1 / fma_gflops_N   fp32 FMA peak, one thread and N threads
//                                 (N = THREADS, default all usable CPUs), with
//                                 the widest vectors the CPU has (AVX-512 or
//                                 AVX2): independent FMA chains, no memory
//   dram_gbs_1 / dram_gbs_N       read bandwidth from memory: threads summing
//                                 disjoint parts of a 512 MiB buffer, four
//                                 streams each, the best of seven passes
//   isa                           avx512 or avx2
// x86-64 with AVX2 only.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// acc = acc * 0.5 + 0.5 on independent chains (enough to cover the FMA
// latency on every pipe); converges to 1, so no denormals. Flops per call.
__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters, float* sink) {
  __m256 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], half, half);
  }
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  *sink += _mm256_cvtss_f32(s);
  return static_cast<double>(iters) * 12 * 8 * 2;
}

__attribute__((target("avx512f"))) double fma_avx512(int64_t iters, float* sink) {
  __m512 acc[24];
  for (int j = 0; j < 24; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 24; ++j) acc[j] = _mm512_fmadd_ps(acc[j], half, half);
  }
  float lanes[16];
  for (int j = 0; j < 24; ++j) {
    _mm512_storeu_ps(lanes, acc[j]);
    for (float v : lanes) *sink += v;
  }
  return static_cast<double>(iters) * 24 * 16 * 2;
}

// Sums n floats as four streams a quarter of the buffer apart (one stream
// per thread leaves bandwidth unused on many machines; the GEMM reads
// several panels at once).
__attribute__((target("avx2"))) float sum_avx2(const float* p, int64_t n) {
  const int64_t len = n / 4 / 16 * 16;
  __m256 a[8];
  for (__m256& v : a) v = _mm256_setzero_ps();
  for (int64_t i = 0; i < len; i += 16) {
    for (int s = 0; s < 4; ++s) {
      a[2 * s] = _mm256_add_ps(a[2 * s], _mm256_load_ps(p + s * len + i));
      a[2 * s + 1] = _mm256_add_ps(a[2 * s + 1], _mm256_load_ps(p + s * len + i + 8));
    }
  }
  __m256 t = a[0];
  for (int j = 1; j < 8; ++j) t = _mm256_add_ps(t, a[j]);
  return _mm256_cvtss_f32(t);
}

// Runs body(thread) on `threads` threads started together; wall seconds.
template <typename Body>
double timed(int threads, Body body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      body(t);
    });
  }
  while (ready.load() < threads) {
  }
  const auto start = Clock::now();
  go.store(true);
  for (std::thread& th : pool) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double fma_peak(int threads, bool avx512) {
  const int64_t iters = avx512 ? 20000000 : 40000000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<float> sinks(threads * 16, 0.0f);
    std::atomic<double> flops{0};
    const double s = timed(threads, [&](int t) {
      const double f = avx512 ? fma_avx512(iters, &sinks[t * 16]) : fma_avx2(iters, &sinks[t * 16]);
      double cur = flops.load();
      while (!flops.compare_exchange_weak(cur, cur + f)) {
      }
    });
    best = std::max(best, flops.load() / s * 1e-9);
  }
  return best;
}

double dram_bandwidth(int threads, const float* buf, int64_t n) {
  double best = 0;
  for (int rep = 0; rep < 7; ++rep) {
    std::vector<float> sinks(threads * 16, 0.0f);
    const int64_t part = n / threads / 64 * 64;
    const double s = timed(threads, [&](int t) { sinks[t * 16] = sum_avx2(buf + t * part, part); });
    best = std::max(best, static_cast<double>(part * threads) * sizeof(float) / s * 1e-9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "cpu_roofline: this CPU lacks AVX2/FMA\n");
    return 1;
  }
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1]))
                               : static_cast<int>(std::thread::hardware_concurrency());
  std::printf("isa %s\n", avx512 ? "avx512" : "avx2");
  std::printf("fma_gflops_1 %.1f\n", fma_peak(1, avx512));
  std::printf("fma_gflops_N %.1f\n", fma_peak(threads, avx512));
  const int64_t n = (int64_t{512} << 20) / sizeof(float);
  auto* buf = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (buf == nullptr) return 1;
  for (int64_t i = 0; i < n; ++i) buf[i] = 1.0f;  // touch every page
  std::printf("dram_gbs_1 %.1f\n", dram_bandwidth(1, buf, n));
  std::printf("dram_gbs_N %.1f\n", dram_bandwidth(threads, buf, n));
  std::printf("threads %d\n", threads);
  std::free(buf);
  return 0;
}
