// The table of CPU kernel entry points one ISA variant provides (see
// isa.h). Each variant's ops.cc fills one from the functions of its
// namespace (defined in its ops.cc, gemm.cc, paged_attention.cc,
// quant_gemm.cc and quant_activation.cc); dispatch.cc forwards pvllm::cpu::dot and the rest to the
// chosen table.
#pragma once

#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant_matrix.h"

namespace pvllm::cpu {

// The entry points' types (declared in ops.h, paged_attention.h and
// quant_matrix.h).
using DotFn = decltype(&dot);
using DotManyFn = decltype(&dot_many);
using AxpyFn = decltype(&axpy);
using AxpyManyFn = decltype(&axpy_many);
using RmsnormFn = decltype(&rmsnorm);
using MatmulFn = decltype(&matmul);
using MatmulWideFn = decltype(&matmul_wide);
using RopeCosSinFn = decltype(&rope_cos_sin);
using RopeFn = decltype(&rope);
using AddBiasFn = decltype(&add_bias);
using SiluMulFn = decltype(&silu_mul);
using EmbeddingFn = decltype(&embedding);
using LoadRowFn = decltype(&load_row);
using PagedAttentionFn = decltype(&paged_attention);
using WriteKvFn = decltype(&write_kv);
using QuantGemmSupportsFn = decltype(&quant_gemm_supports);
using QuantGemmFn = decltype(&quant_gemm);
using QuantizeActivationsFn = decltype(&quantize_activations);

struct KernelTable {
  DotFn dot;
  DotManyFn dot_many;
  AxpyFn axpy;
  AxpyManyFn axpy_many;
  RmsnormFn rmsnorm;
  MatmulFn matmul;
  MatmulWideFn matmul_wide;
  RopeCosSinFn rope_cos_sin;
  RopeFn rope;
  AddBiasFn add_bias;
  SiluMulFn silu_mul;
  EmbeddingFn embedding;
  LoadRowFn load_row;
  PagedAttentionFn paged_attention;
  WriteKvFn write_kv;
  QuantGemmSupportsFn quant_gemm_supports;
  QuantGemmFn quant_gemm;
  QuantizeActivationsFn quantize_activations;
};

#if defined(__x86_64__)
namespace isa_x86_64_v2 {
const KernelTable& kernel_table();
}
namespace isa_avx2 {
const KernelTable& kernel_table();
}
namespace isa_avx512 {
const KernelTable& kernel_table();
}
#else
namespace isa_generic {
const KernelTable& kernel_table();
}
#endif

}  // namespace pvllm::cpu
