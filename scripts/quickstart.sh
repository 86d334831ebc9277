#!/usr/bin/env bash
# README's first command: installs what building libpvllm and the pvllm
# command needs (scripts/setup.sh core), builds those two alone, and
# generates text with the default model: the real stories260K checkpoint
# kept in models/stories260K (MIT; see its SOURCE.md), so a fresh clone gives
# real text anywhere. PVLLM_MODEL points it at another model (a Hugging Face
# folder, a llama2.c .bin or a .pvllm file).
#
# The CUDA backend module is built too when this machine has both nvcc and
# an NVIDIA GPU (nvidia-smi lists one); the tests, benchmarks and the server
# are left to scripts/test.sh, which builds everything into the same folder.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup.sh core

cuda=OFF
targets=(pvllm_cli)
if { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
  nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  cuda=ON
  targets+=(pvllm_cuda)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPVLLM_BUILD_TESTS=OFF \
  -DPVLLM_BUILD_BENCH=OFF -DPVLLM_SERVER=OFF -DPVLLM_CUDA="$cuda" >/dev/null
cmake --build build -j "$(nproc)" --target "${targets[@]}"
echo "quickstart: installed and built in $(( $(date +%s) - start )) s (CUDA backend: $cuda)"

model="${PVLLM_MODEL:-models/stories260K/stories260K.bin}"
./build/tools/pvllm generate --model "$model" --prompt "Once upon a time" \
  --max-tokens 120 --temperature 0
