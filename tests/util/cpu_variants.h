// The CPU kernels' ISA variants a test can call directly, each with its
// kernel table and whether this CPU runs it (the x86-64 levels by their
// defining features, as kernels/cpu/dispatch.cc checks them).
#pragma once

#include <vector>

#include "kernels/cpu/kernel_table.h"

namespace pvllm::cpu::testing {

struct Variant {
  const char* name;
  const KernelTable* table;
  bool runs_here;
};

inline std::vector<Variant> variants() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
  const bool v3 = v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return {{"x86-64-v2", &isa_x86_64_v2::kernel_table(), v2},
          {"avx2", &isa_avx2::kernel_table(), v3},
          {"avx512", &isa_avx512::kernel_table(), v4}};
#else
  return {{"generic", &isa_generic::kernel_table(), true}};
#endif
}

}  // namespace pvllm::cpu::testing
