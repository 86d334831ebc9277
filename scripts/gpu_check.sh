#!/usr/bin/env bash
# Runs every GPU check and benchmark in one call on the GPU machine and
# leaves logs and JSON under $OUT (default ./gpu-out):
#   1. the CUDA kernel tests against their CPU references (cuda_kernels_test)
#   2. the C ABI and engine suites with the CUDA module present
#   3. decode/prefill attention bandwidth against copy bandwidth, and the
#      same shapes through PyTorch SDPA on contiguous K/V
#   4. CUDA vs transformers logits on a TinyLlama-shaped random model
#   5. pvllm vs transformers generate throughput (nano-vllm workload, batch 1)
# Uses gpu-bundle/ when it is there (made here by scripts/gpu_bundle.sh and
# carried to the device), else builds in build-gpu. STEPS (default
# "1 2 3 4 5") picks steps, so a 10-minute call can do part of the work.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
steps="${STEPS:-1 2 3 4 5}"

if [ -d gpu-bundle ]; then
  bin=gpu-bundle/bin
  lib=gpu-bundle/lib
else
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPVLLM_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/build.log" 2>&1 &&
    cmake --build build-gpu -j "$(nproc)" >> "$out/build.log" 2>&1 ||
    { echo "build failed; see $out/build.log"; tail -30 "$out/build.log"; exit 1; }
  mkdir -p build-gpu/flat
  cp build-gpu/tools/pvllm build-gpu/tests/*_test build-gpu/tests/pvllm_make_tiny_model \
    build-gpu/bench/attention_bench build-gpu/flat/ 2>/dev/null
  bin=build-gpu/flat
  lib=build-gpu/capi
fi
export LD_LIBRARY_PATH="$PWD/$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PVLLM_CUDA_BACKEND="$PWD/$lib/libpvllm_cuda.so"
[ -d ../shared ] && export PVLLM_SHARED_DIR="${PVLLM_SHARED_DIR:-$(cd ../shared && pwd)}"
nvidia-smi -L | tee "$out/gpu.txt"
cat gpu-bundle/COMMIT 2>/dev/null | sed 's/^/commit: /' | tee -a "$out/gpu.txt"

summary=()
run() {  # name, timeout seconds, command...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  summary+=("$name: rc=$rc, $((SECONDS - start)) s")
  tail -15 "$out/$name.log"
}

for step in $steps; do
  case $step in
    1) run cuda_kernels_test 300 "$bin/cuda_kernels_test" --gtest_brief=1 \
         --gtest_output="json:$out/cuda_kernels_test.json" ;;
    2) run capi_test 120 "$bin/capi_test" --gtest_brief=1
       run device_test 120 "$bin/device_test" --gtest_brief=1
       run engine_test 300 "$bin/engine_test" --gtest_brief=1 ;;
    3) run attention_bench 300 "$bin/attention_bench" --json "$out/attention_bench.json"
       run sdpa_reference 300 python3 bench/sdpa_reference.py --json "$out/sdpa_reference.json" ;;
    4) run hf_compare 400 python3 scripts/hf_compare.py --lib "$lib/libpvllm.so" ;;
    5) run bench_vs_transformers 550 python3 scripts/bench_vs_transformers.py \
         --pvllm "$bin/pvllm" --json "$out/bench_vs_transformers.json" ;;
  esac
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
