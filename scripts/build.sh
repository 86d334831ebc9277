#!/usr/bin/env bash
# Configures and builds all of pvllm into ./build (one build shared by every
# test suite): the library, the tools, the tests, the benchmarks, the server
# and, when nvcc is found, the CUDA kernels. Extra arguments go to cmake,
# e.g. -DPVLLM_CUDA=OFF. The options are named here because
# scripts/quickstart.sh configures the same folder with fewer parts.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPVLLM_BUILD_TESTS=ON \
  -DPVLLM_BUILD_BENCH=ON -DPVLLM_SERVER=AUTO -DPVLLM_CUDA=AUTO "$@" >/dev/null
cmake --build build -j "$(nproc)"
