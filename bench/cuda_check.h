// BENCH_CHECK for the GPU benchmarks: a CUDA call (or a launcher returning
// a cudaError_t value) that fails ends the program with the place and the
// error; a benchmark has nothing sensible to do after one.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define BENCH_CHECK(expr)                                                                          \
  do {                                                                                             \
    const cudaError_t err_ = static_cast<cudaError_t>(expr);                                       \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
