#!/usr/bin/env bash
# Builds pvllm with the CUDA kernels here and gathers what a run on the GPU
# machine needs into gpu-bundle/ (git-ignored, well under the 64 MiB the
# device tool carries): the libraries, the pvllm command, the CUDA and C ABI
# test binaries, the kernel benchmark, and the shared libraries of this
# machine that the GPU image lacks (sentencepiece). Then, on the GPU
# machine: bash scripts/gpu_check.sh (see that script).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPVLLM_CUDA=ON >/dev/null
cmake --build build-gpu -j "$(nproc)"

rm -rf gpu-bundle
mkdir -p gpu-bundle/lib gpu-bundle/bin
cp -a build-gpu/capi/libpvllm.so* build-gpu/capi/libpvllm_cuda.so gpu-bundle/lib/
cp -a /lib/x86_64-linux-gnu/libsentencepiece.so.0* gpu-bundle/lib/ 2>/dev/null || true
cp -a /lib/x86_64-linux-gnu/libsentencepiece_train.so.0* gpu-bundle/lib/ 2>/dev/null || true
for exe in tools/pvllm tests/cuda_kernels_test tests/capi_test tests/engine_test \
           tests/device_test tests/pvllm_make_tiny_model bench/attention_bench; do
  [ -f "build-gpu/$exe" ] && cp "build-gpu/$exe" gpu-bundle/bin/
done
git rev-parse --short HEAD > gpu-bundle/COMMIT
du -sh gpu-bundle
