// Quantized matmul benchmark (GPU only): pvllm_cuda_quant_matmul on Q8_0,
// Q4_0 and Q4_K weights against cuBLAS's bf16 GEMM (cublasGemmEx, as the
// CUDA backend calls it) on the same shapes: Llama-3-8B's 4096 x 4096
// (q, o), 14336 x 4096 (gate, up) and 4096 x 14336 (down) at m = 1 and 16
// (decode) and 512 (prefill); bf16 activations and outputs. Each kernel is
// timed on the path kAuto picks (GEMV up to 8 rows, tensor cores above)
// and, at m = 16, on the GEMV too. Decode rows report GB/s of weight bytes
// (the file's bytes, or the bf16 matrix's for cuBLAS), prefill rows
// TFLOP/s (2 m n k), every row the ratio of cuBLAS's time to ours (above 1:
// faster than bf16). Times are medians of per-call event timings over
// random data; every call reads a different copy of the weights, enough
// copies to cover twice the L2 cache, so no call finds its weights there.
// Prints a markdown table; --json PATH writes the rows. Without a device
// it says so and exits 0.
//
//   cuda_quant_matmul_bench [--json PATH] [--reps N]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "core/base/tensor.h"
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/quant_repack.h"

namespace {

using pvllm::DType;
using pvllm::QuantMatmulPath;

constexpr int kWarmup = 3;

#define CUBLAS_CHECK(expr)                                                            \
  do {                                                                                \
    const cublasStatus_t st_ = (expr);                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                               \
      std::fprintf(stderr, "%s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #expr, \
                   static_cast<int>(st_));                                            \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// Median milliseconds of one call of fn(i) (i = the call's index) over
// `reps` calls, each between its own pair of events, after kWarmup calls.
template <typename Fn>
float median_ms(Fn&& fn, int reps) {
  for (int i = 0; i < kWarmup; ++i) fn(i);
  std::vector<cudaEvent_t> events(static_cast<size_t>(reps) + 1);
  for (cudaEvent_t& e : events) BENCH_CHECK(cudaEventCreate(&e));
  BENCH_CHECK(cudaEventRecord(events[0]));
  for (int i = 0; i < reps; ++i) {
    fn(i);
    BENCH_CHECK(cudaEventRecord(events[i + 1]));
  }
  BENCH_CHECK(cudaEventSynchronize(events.back()));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i)
    BENCH_CHECK(cudaEventElapsedTime(&ms[i], events[i], events[i + 1]));
  for (cudaEvent_t e : events) BENCH_CHECK(cudaEventDestroy(e));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2];
}

// A device allocation freed at scope exit.
struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { BENCH_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16))); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

// `bytes` random bytes; `scale_every` > 0: the fp16 at the start of every
// such many bytes is a small positive scale (the blocks' d, dmin), so no
// weight is NaN or infinite.
std::vector<uint8_t> random_bytes(size_t bytes, size_t scale_every, int scales_per_block,
                                  std::mt19937& rng) {
  std::vector<uint8_t> b(bytes);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    const uint32_t r = rng();
    std::memcpy(&b[i], &r, 4);
  }
  if (scale_every > 0) {
    std::uniform_real_distribution<float> u(0.001f, 0.01f);
    for (size_t off = 0; off + scale_every <= bytes; off += scale_every) {
      for (int s = 0; s < scales_per_block; ++s) {
        const uint16_t h = pvllm::float_to_fp16(u(rng));
        std::memcpy(&b[off + 2 * s], &h, 2);
      }
    }
  }
  return b;
}

// Bf16 values in [-1, 1) without NaNs: random mantissas and signs, exponents 2^-8..2^-1.
std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng) {
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) {
    const uint32_t r = rng();
    x = static_cast<uint16_t>((r & 0x807F) | ((119 + (r >> 16) % 8) << 7));
  }
  return v;
}

struct Row {
  std::string type;  // Q8_0, Q4_0, Q4_K, or BF16 (cuBLAS)
  std::string path;  // gemv, mma, cublas
  int64_t m, n, k;
  double us;
  double weight_bytes;
  double cublas_us;
  double gbs() const { return weight_bytes / (us * 1e3); }
  double tflops() const { return 2.0 * m * n * k / (us * 1e6); }
};

// How many copies of `bytes` cover twice the L2 cache (at least 1, at most 16).
int copies_for(size_t bytes) {
  int device = 0, l2 = 0;
  BENCH_CHECK(cudaGetDevice(&device));
  BENCH_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  const size_t want = 2 * static_cast<size_t>(l2) / bytes + 1;
  return static_cast<int>(std::min<size_t>(16, std::max<size_t>(1, want)));
}

float time_cublas(cublasHandle_t h, int64_t m, int64_t n, int64_t k, int reps, std::mt19937& rng) {
  const size_t w_bytes = static_cast<size_t>(n * k) * 2;
  const int copies = copies_for(w_bytes);
  Device w(w_bytes * copies), x(static_cast<size_t>(m * k) * 2), y(static_cast<size_t>(m * n) * 2);
  const std::vector<uint16_t> wh = random_bf16(static_cast<size_t>(n * k), rng);
  for (int c = 0; c < copies; ++c) {
    BENCH_CHECK(cudaMemcpy(static_cast<char*>(w.p) + c * w_bytes, wh.data(), w_bytes,
                           cudaMemcpyHostToDevice));
  }
  const std::vector<uint16_t> xh = random_bf16(static_cast<size_t>(m * k), rng);
  BENCH_CHECK(cudaMemcpy(x.p, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
  const float alpha = 1.0f, beta = 0.0f;
  return median_ms(
      [&](int i) {
        const void* wi = static_cast<const char*>(w.p) + (i % copies) * w_bytes;
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                  static_cast<int>(m), static_cast<int>(k), &alpha, wi, CUDA_R_16BF,
                                  static_cast<int>(k), x.p, CUDA_R_16BF, static_cast<int>(k), &beta,
                                  y.p, CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
      },
      reps);
}

// Our kernel on weights of `type` at each m of `ms` (one repack per shape).
void bench_quant(DType type, int64_t n, int64_t k, const std::vector<int64_t>& ms,
                 const std::vector<float>& cublas_ms, int reps, std::mt19937& rng,
                 std::vector<Row>* rows) {
  const size_t block_bytes = pvllm::dtype_block_bytes(type);
  const std::vector<uint8_t> file =
      random_bytes(static_cast<size_t>(pvllm::dtype_row_bytes(type, k) * n), block_bytes,
                   type == DType::kQ4_K ? 2 : 1, rng);
  pvllm::QuantRepacked w;
  const pvllm::Status s = pvllm::quant_repack(type, file.data(), n, k, &w);
  if (!s.ok()) {
    std::fprintf(stderr, "repack: %s\n", s.message().c_str());
    std::exit(1);
  }
  const size_t codes_bytes = w.codes.size(), scales_bytes = w.scales.size();
  const size_t scales_at = (codes_bytes + 15) / 16 * 16;  // in each copy
  const size_t stride = (scales_at + scales_bytes + 255) / 256 * 256;
  const int copies = copies_for(stride);
  Device weights(stride * copies);
  for (int c = 0; c < copies; ++c) {
    char* base = static_cast<char*>(weights.p) + c * stride;
    BENCH_CHECK(cudaMemcpy(base, w.codes.data(), codes_bytes, cudaMemcpyHostToDevice));
    BENCH_CHECK(
        cudaMemcpy(base + scales_at, w.scales.data(), scales_bytes, cudaMemcpyHostToDevice));
  }
  for (size_t mi = 0; mi < ms.size(); ++mi) {
    const int64_t m = ms[mi];
    Device x(static_cast<size_t>(m * k) * 2), y(static_cast<size_t>(m * n) * 2);
    const std::vector<uint16_t> xh = random_bf16(static_cast<size_t>(m * k), rng);
    BENCH_CHECK(cudaMemcpy(x.p, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
    std::vector<QuantMatmulPath> paths = {m <= pvllm::kQuantGemvMaxRows ? QuantMatmulPath::kGemv
                                                                        : QuantMatmulPath::kMma};
    if (m > pvllm::kQuantGemvMaxRows && m <= 32) paths.push_back(QuantMatmulPath::kGemv);
    for (QuantMatmulPath path : paths) {
      pvllm::QuantMatmulParams p;
      p.weight_dtype = type;
      p.x = x.p;
      p.y = y.p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.x_stride = k;
      p.y_stride = n;
      p.x_dtype = DType::kBF16;
      p.y_dtype = DType::kBF16;
      p.path = path;
      const float ms_ours = median_ms(
          [&](int i) {
            const char* base = static_cast<const char*>(weights.p) + (i % copies) * stride;
            p.codes = base;
            p.scales = base + scales_at;
            BENCH_CHECK(pvllm::pvllm_cuda_quant_matmul(p, nullptr));
          },
          reps);
      rows->push_back({pvllm::dtype_name(type), path == QuantMatmulPath::kGemv ? "gemv" : "mma", m,
                       n, k, ms_ours * 1e3, static_cast<double>(codes_bytes + scales_bytes),
                       cublas_ms[mi] * 1e3});
    }
  }
}

void print_table(const std::vector<Row>& rows) {
  std::printf(
      "| weights | path | m | n | k | us | weight GB/s | TFLOP/s | cuBLAS bf16 us | cuBLAS / ours "
      "|\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %lld | %lld | %lld | %.1f | %.0f | %.1f | %.1f | %.2f |\n",
                r.type.c_str(), r.path.c_str(), static_cast<long long>(r.m),
                static_cast<long long>(r.n), static_cast<long long>(r.k), r.us, r.gbs(), r.tflops(),
                r.cublas_us, r.cublas_us / r.us);
  }
}

void write_json(const std::string& path, const std::vector<Row>& rows, const char* device) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"activations\": \"bf16\",\n  \"rows\": [\n",
               device);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(
        f,
        "    {\"weights\": \"%s\", \"path\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
        "\"us\": %.3f, \"weight_bytes\": %.0f, \"weight_gbs\": %.2f, \"tflops\": %.3f, "
        "\"cublas_bf16_us\": %.3f, \"cublas_over_ours\": %.4f}%s\n",
        r.type.c_str(), r.path.c_str(), static_cast<long long>(r.m), static_cast<long long>(r.n),
        static_cast<long long>(r.k), r.us, r.weight_bytes, r.gbs(), r.tflops(), r.cublas_us,
        r.cublas_us / r.us, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("cuda_quant_matmul_bench: no CUDA device (%s); nothing measured\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  std::mt19937 rng(5);
  const std::vector<int64_t> ms = {1, 16, 512};
  const int64_t shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};  // n, k
  std::vector<Row> rows;
  for (const auto& nk : shapes) {
    std::vector<float> cublas_ms;
    for (int64_t m : ms) {
      cublas_ms.push_back(time_cublas(handle, m, nk[0], nk[1], reps, rng));
      rows.push_back({"BF16", "cublas", m, nk[0], nk[1], cublas_ms.back() * 1e3,
                      static_cast<double>(nk[0] * nk[1] * 2), cublas_ms.back() * 1e3});
    }
    for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K}) {
      bench_quant(type, nk[0], nk[1], ms, cublas_ms, reps, rng, &rows);
    }
  }
  CUBLAS_CHECK(cublasDestroy(handle));
  std::printf("# quantized matmul on %s (bf16 activations and outputs)\n\n", prop.name);
  print_table(rows);
  if (!json_path.empty()) write_json(json_path, rows, prop.name);
  return 0;
}
