#!/usr/bin/env bash
# Configures and builds pvllm into ./build (one build shared by every test
# suite). Extra arguments go to cmake, e.g. -DPVLLM_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)"
