#!/usr/bin/env bash
# Installs, builds, and generates text with the default model: the real
# stories260K checkpoint kept in models/stories260K (MIT; see its
# SOURCE.md), so a fresh clone gives real text anywhere. PVLLM_MODEL points
# it at another model (an HF folder or a llama2.c .bin).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh

model="${PVLLM_MODEL:-models/stories260K/stories260K.bin}"
./build/tools/pvllm generate --model "$model" --prompt "Once upon a time" \
  --max-tokens 120 --temperature 0
