#!/usr/bin/env bash
# Installs, builds (CUDA kernels too when nvcc is present) and runs every
# test. Tests that need the real checkpoints find them through
# PVLLM_SHARED_DIR (default ../shared) and skip with a reason without it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh

if [ -z "${PVLLM_SHARED_DIR:-}" ] && [ -d ../shared ]; then
  PVLLM_SHARED_DIR="$(cd ../shared && pwd)"
fi
export PVLLM_SHARED_DIR="${PVLLM_SHARED_DIR:-}"
echo "test: PVLLM_SHARED_DIR=${PVLLM_SHARED_DIR:-<unset: shared-model tests will skip>}"

start=$(date +%s)
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "test: the suite took $(( $(date +%s) - start )) s"
