// Quantized matmul throughput: quant_matmul (kernels/cpu/quant_matrix.h)
// on the projection shapes of the llama2.c 110M model and TinyLlama 1.1B,
// per weight type, the scalar reference (the file's rows as a view) beside
// the fast kernel (the interleaved copy), on 1 and 2 threads. n = 1
// (decode) is bound by how fast the weights stream: GB/s of weight bytes,
// read from memory (each call takes the next of copies of the weights
// filling 768 MiB), next to this machine's read bandwidth measured here
// (threads summing a 512 MiB buffer). n = 64 (prefill) is bound by the integer dot products:
// GOP/s, 2 * n * rows * cols / time. Both include quantizing the
// activations. A benchmark that prints figures, not a test.
//
// Usage: cpu_quant_matmul_bench [--quick] [TYPE...]   (TYPE: any quantized
// type, Q8_0 ... IQ4_XS; default Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/base/tensor.h"
#include "core/quant/quantize.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quant_matrix.h"
#include "kernels/cpu/thread_pool.h"

namespace {

using pvllm::DType;
// The weights n = 1 cycles through: past any last-level cache.
constexpr size_t kColdBytes = size_t{768} << 20;
using Clock = std::chrono::steady_clock;

// The calling thread's CPU time in seconds (its share of a busy machine).
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double wall = 0;  // seconds per call
  double cpu = 0;   // the calling thread's CPU seconds per call
};

// The best of three timed batches after one warm-up call.
template <typename Fn>
Timing time_calls(Fn fn, double min_seconds) {
  fn();
  Timing best{1e30, 1e30};
  for (int rep = 0; rep < 3; ++rep) {
    int64_t calls = 0;
    const auto start = Clock::now();
    const double cpu_start = thread_cpu_seconds();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < min_seconds);
    best.wall = std::min(best.wall, elapsed / static_cast<double>(calls));
    best.cpu = std::min(best.cpu, (thread_cpu_seconds() - cpu_start) / static_cast<double>(calls));
  }
  return best;
}

double seconds_per_call(auto fn, double min_seconds) { return time_calls(fn, min_seconds).wall; }

// GB/s of `threads` threads each summing its share of a buffer far larger
// than the caches (the weights' access pattern at n = 1).
double read_bandwidth(int threads) {
  const size_t words = (size_t{512} << 20) / 8;
  static std::vector<uint64_t> buf(words, 1);
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8);
  auto pass = [&] {
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] {
        const size_t begin = words / threads * i, end = words / threads * (i + 1);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t k = begin; k < end; k += 4) {
          s0 += buf[k];
          s1 += buf[k + 1];
          s2 += buf[k + 2];
          s3 += buf[k + 3];
        }
        sums[8 * i] = s0 + s1 + s2 + s3;
      });
    }
    for (std::thread& t : pool) t.join();
  };
  const double sec = seconds_per_call(pass, 0.3);
  return static_cast<double>(words * 8) / sec * 1e-9;
}

// rows x cols weights of type t, quantized from normal values of a weight's size.
std::vector<uint8_t> make_weights(DType t, int64_t rows, int64_t cols, std::mt19937* rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(cols));
  const size_t row_bytes = pvllm::dtype_row_bytes(t, cols);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = normal(*rng);
    if (!pvllm::quant::quantize_row(t, x.data(), cols, bytes.data() + r * row_bytes).ok()) {
      std::abort();
    }
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<DType> types;
  for (int i = 1; i < argc; ++i) {
    DType t;
    if (std::string(argv[i]) == "--quick") {
      quick = true;
    } else if (pvllm::dtype_from_name(argv[i], &t) && pvllm::dtype_is_quantized(t)) {
      types.push_back(t);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [TYPE...]\n", argv[0]);
      return 2;
    }
  }
  if (types.empty()) types = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  const double min_seconds = quick ? 0.05 : 0.2;
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const std::vector<Shape> shapes = {{"110M q 768x768", 768, 768},
                                     {"110M gate 2048x768", 2048, 768},
                                     {"110M down 768x2048", 768, 2048},
                                     {"TinyLlama q 2048x2048", 2048, 2048},
                                     {"TinyLlama gate 5632x2048", 5632, 2048},
                                     {"TinyLlama down 2048x5632", 2048, 5632}};
  std::printf("ISA variant: %s\n", pvllm::cpu::cpu_isa_name(pvllm::cpu::active_cpu_isa()));
  for (const int threads : {1, 2}) {
    std::printf("read bandwidth, %d thread(s): %.1f GB/s\n", threads, read_bandwidth(threads));
  }
  std::printf("%-26s %-5s %3s %3s %11s %11s %9s %9s %7s %9s %9s\n", "shape", "type", "thr", "n",
              "ref us", "fast us", "ref", "fast", "speedup", "ref/cpu", "fast/cpu");
  std::mt19937 rng(1);
  for (const Shape& s : shapes) {
    for (const DType t : types) {
      const std::vector<uint8_t> bytes = make_weights(t, s.rows, s.cols, &rng);
      pvllm::Tensor tensor;
      tensor.name = "w";
      tensor.dtype = t;
      tensor.shape = {s.rows, s.cols};
      tensor.data = bytes.data();
      // Copies of the weights, together far larger than the caches: n = 1
      // runs over them in turn, so every call reads its weights from memory.
      const size_t copies = std::max<size_t>(1, kColdBytes / bytes.size());
      std::vector<uint8_t> cold(bytes.size() * copies);
      std::vector<pvllm::cpu::QuantMatrix> views(copies), packs(copies);
      for (size_t c = 0; c < copies; ++c) {
        std::memcpy(cold.data() + c * bytes.size(), bytes.data(), bytes.size());
        tensor.data = cold.data() + c * bytes.size();
        if (!pvllm::cpu::QuantMatrix::view(tensor, &views[c]).ok() ||
            !pvllm::cpu::QuantMatrix::make(tensor, nullptr, &packs[c]).ok()) {
          return 1;
        }
      }
      for (const int threads : {1, 2}) {
        pvllm::cpu::ThreadPool pool(threads);
        for (const int64_t n : {int64_t{1}, int64_t{64}}) {
          std::vector<float> x(static_cast<size_t>(n * s.cols));
          std::uniform_real_distribution<float> u(-1.0f, 1.0f);
          for (float& v : x) v = u(rng);
          std::vector<float> y(static_cast<size_t>(n * s.rows));
          auto run = [&](const std::vector<pvllm::cpu::QuantMatrix>& ws) {
            size_t next = 0;
            return time_calls(
                [&] {
                  const pvllm::cpu::QuantMatrix& w = ws[n == 1 ? next++ % ws.size() : 0];
                  if (!pvllm::cpu::quant_matmul(&pool, x.data(), n, w, y.data(), s.rows).ok()) {
                    std::abort();
                  }
                },
                min_seconds);
          };
          const Timing ref = run(views), fast = run(packs);
          // n = 1: GB/s of the file's weight bytes; n = 64: GOP/s. "per CPU s":
          // the same per second of the calling thread's CPU time (1 thread:
          // the figure an unshared core would give, bar memory contention).
          const double work = n == 1 ? static_cast<double>(bytes.size())
                                     : 2.0 * static_cast<double>(n * s.rows * s.cols);
          std::printf("%-26s %-5s %3d %3lld %11.1f %11.1f %9.1f %9.1f %6.1fx", s.name,
                      pvllm::dtype_name(t), threads, static_cast<long long>(n), ref.wall * 1e6,
                      fast.wall * 1e6, work / ref.wall * 1e-9, work / fast.wall * 1e-9,
                      ref.wall / fast.wall);
          if (threads == 1) {
            std::printf(" %9.1f %9.1f", work / ref.cpu * 1e-9, work / fast.cpu * 1e-9);
          } else {
            std::printf(" %9s %9s", "-", "-");
          }
          std::printf(" %s\n", n == 1 ? "GB/s" : "GOP/s");
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
