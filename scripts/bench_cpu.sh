#!/usr/bin/env bash
# The CPU backend's throughput beside its rooflines, and beside a baseline
# pvllm, llama2.c's run.c and llama.cpp when they are named: the table of
# docs/performance.md. Builds what it needs into build/ (Release), writes
# the random-weight checkpoints once into build/bench-models, then runs
# scripts/bench_cpu.py, whose docstring lists the workloads, the options
# (--quick, --json FILE) and the environment (PVLLM_BASELINE, RUNC,
# LLAMA_CPP_BIN, PVLLM_BENCH_THREADS). A benchmark, not a test: a few
# minutes on 2 cores (--quick: about one). --quantized runs the quantized
# rows (GGUF files made by llama.cpp's tools, pvllm beside llama.cpp) of
# scripts/bench_cpu_quant.py instead.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${PVLLM_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPVLLM_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target pvllm_cli cpu_roofline cpu_make_llama2c_model >/dev/null
# --quantized: the quantized rows instead (scripts/bench_cpu_quant.py).
script=scripts/bench_cpu.py
for arg in "$@"; do
  if [ "$arg" = "--quantized" ]; then script=scripts/bench_cpu_quant.py; fi
done
PVLLM_BUILD_DIR="$build" exec python3 "$script" "$@"
