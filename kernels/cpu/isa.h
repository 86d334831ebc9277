// The CPU kernels' instruction-set variants and the choice between them.
//
// ops.cc and paged_attention.cc are compiled once per variant, each into
// its own namespace (pvllm::cpu::isa_*), and the forwarding functions of
// dispatch.cc call the variant chosen once per process: the best the CPU
// (and the OS, for AVX-512 state) supports, or the one PVLLM_CPU_ISA names
// ("x86-64-v2", "avx2", "avx512", "auto"). Only the variants and nothing
// else are built with wider instructions, so the code that runs the check
// never executes an instruction the CPU lacks. Every variant runs the same
// arithmetic (8-lane fused multiply-adds, the same reduction trees), so the
// results are bit-identical whichever runs; the wider ones are faster.
#pragma once

#include "core/base/status.h"

namespace pvllm::cpu {

enum class CpuIsa {
  kGeneric,  // non-x86 builds: one variant, the compiler's default target
  kX86_64_v2,
  kAvx2,    // x86-64-v3: AVX2, FMA, F16C
  kAvx512,  // x86-64-v4: AVX-512 F/BW/CD/DQ/VL
};

// "generic", "x86-64-v2", "avx2", "avx512".
const char* cpu_isa_name(CpuIsa isa);

// The variant the kernels run with in this process (chosen on first use).
CpuIsa active_cpu_isa();

// Ok when the choice is sound; INVALID_ARGUMENT for a PVLLM_CPU_ISA value
// that names no variant, UNSUPPORTED for one this CPU cannot run or for a
// CPU below x86-64-v2. (The kernels then run the best supported variant,
// or none: the CPU backend refuses to start on such a status.)
Status cpu_isa_status();

}  // namespace pvllm::cpu
