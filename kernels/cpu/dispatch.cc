// The CPU kernels' public entry points (ops.h, paged_attention.h,
// quant_matrix.h's quant_gemm), each
// forwarding to the ISA variant chosen once per process (isa.h). Built for
// the baseline target: nothing here may use an instruction the check has not
// cleared.
#include <cstdlib>
#include <string>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_table.h"

namespace pvllm::cpu {
namespace {

struct Choice {
  CpuIsa isa = CpuIsa::kGeneric;
  const KernelTable* table = nullptr;
  Status status;
};

#if defined(__x86_64__)
// The x86-64 levels by their defining features (names both GCC and clang
// know; the runtime's check includes the OS's support for AVX and AVX-512
// register state). F16C, LZCNT and MOVBE come with every AVX2 CPU.
bool supported(CpuIsa isa) {
  __builtin_cpu_init();
  const bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
  const bool v3 = v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  switch (isa) {
    case CpuIsa::kX86_64_v2:
      return v2;
    case CpuIsa::kAvx2:
      return v3;
    case CpuIsa::kAvx512:
      return v4;
    default:
      return false;
  }
}

const KernelTable* table_of(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return &isa_avx512::kernel_table();
    case CpuIsa::kAvx2:
      return &isa_avx2::kernel_table();
    default:
      return &isa_x86_64_v2::kernel_table();
  }
}

CpuIsa best_supported() {
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    if (supported(isa)) return isa;
  }
  return CpuIsa::kX86_64_v2;
}

Choice choose() {
  Choice c;
  c.isa = best_supported();
  if (!supported(CpuIsa::kX86_64_v2)) {
    c.status = Unsupported(
        "this CPU lacks x86-64-v2 (SSE4.2, POPCNT), the oldest the CPU kernels are built for");
  }
  const char* forced = std::getenv("PVLLM_CPU_ISA");
  const std::string want = forced != nullptr ? forced : "";
  if (!want.empty() && want != "auto") {
    bool known = false;
    for (CpuIsa isa : {CpuIsa::kX86_64_v2, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (want != cpu_isa_name(isa)) continue;
      known = true;
      if (supported(isa)) {
        c.isa = isa;
      } else {
        c.status = Unsupported(std::string("PVLLM_CPU_ISA=") + want + ": this CPU cannot run the " +
                               want + " kernels (it runs " + cpu_isa_name(best_supported()) + ")");
      }
    }
    if (!known) {
      c.status = InvalidArgument(std::string("PVLLM_CPU_ISA=") + want +
                                 " names no CPU kernel variant (x86-64-v2, avx2, avx512, auto)");
    }
  }
  c.table = table_of(c.isa);
  return c;
}
#else
Choice choose() {
  Choice c;
  c.table = &isa_generic::kernel_table();
  const char* forced = std::getenv("PVLLM_CPU_ISA");
  const std::string want = forced != nullptr ? forced : "";
  if (!want.empty() && want != "auto" && want != "generic") {
    c.status = Unsupported(std::string("PVLLM_CPU_ISA=") + want +
                           ": this build has only the generic CPU kernels");
  }
  return c;
}
#endif

const Choice& choice() {
  static const Choice c = choose();
  return c;
}

const KernelTable& k() { return *choice().table; }

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kX86_64_v2:
      return "x86-64-v2";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    default:
      return "generic";
  }
}

CpuIsa active_cpu_isa() { return choice().isa; }

Status cpu_isa_status() { return choice().status; }

float dot(const float* a, const float* b, int64_t n) { return k().dot(a, b, n); }
void dot_many(const float* a, const float* rows, int64_t num_rows, int64_t n, float* out) {
  k().dot_many(a, rows, num_rows, n, out);
}
void axpy(float alpha, const float* x, float* y, int64_t n) { k().axpy(alpha, x, y, n); }
void axpy_many(const float* alpha, const float* rows, int64_t num_rows, int64_t n, float* y) {
  k().axpy_many(alpha, rows, num_rows, n, y);
}
void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) {
  k().rmsnorm(x, weight, n, dim, eps, out);
}
void matmul(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y) {
  k().matmul(pool, x, n, w, y);
}
void matmul_wide(ThreadPool* pool, const float* x, int64_t n, const PackedMatrix& w, float* y) {
  k().matmul_wide(pool, x, n, w, y);
}
void rope_cos_sin(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half,
                  float* cos_out, float* sin_out) {
  k().rope_cos_sin(positions, n, inv_freq, half, cos_out, sin_out);
}
void rope(float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos,
          const float* sin, RopeStyle style) {
  k().rope(x, n, num_heads, head_dim, cos, sin, style);
}
void add_bias(float* y, int64_t n, int64_t dim, const float* bias) {
  k().add_bias(y, n, dim, bias);
}
void silu_mul(const float* gate, const float* up, int64_t count, float* out) {
  k().silu_mul(gate, up, count, out);
}
void embedding(const Tensor& table, const int32_t* ids, int64_t n, int64_t dim, float* out) {
  k().embedding(table, ids, n, dim, out);
}
void load_row(const Tensor& t, int64_t offset, int64_t count, float* out) {
  k().load_row(t, offset, count, out);
}
void paged_attention(const PagedAttentionParams& p, ThreadPool* pool) {
  k().paged_attention(p, pool);
}
void write_kv(const WriteKvParams& p) { k().write_kv(p); }
bool quant_gemm_supports(DType t) { return k().quant_gemm_supports(t); }
void quant_gemm(ThreadPool* pool, const QuantMatrix& w, const void* act, size_t act_row, int64_t n,
                float* y, int64_t ldy, QuantIntDot dot) {
  k().quant_gemm(pool, w, act, act_row, n, y, ldy, dot);
}
void quantize_activations(quant::ActivationKind kind, const float* x, int64_t n, void* dst) {
  k().quantize_activations(kind, x, n, dst);
}

}  // namespace pvllm::cpu
