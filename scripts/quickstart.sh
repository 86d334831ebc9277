#!/usr/bin/env bash
# Installs, builds, and generates text with the default model: the real
# stories260K checkpoint from the shared folder when present, otherwise a
# tiny random-weight model this script writes (its text is gibberish).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh

shared="${PVLLM_SHARED_DIR:-../shared}"
model="$shared/models/stories260K/stories260K.bin"
if [ ! -f "$model" ]; then
  echo "quickstart: $model not found; generating a tiny random-weight model (its output is noise)"
  model="build/quickstart-model"
  ./build/tests/pvllm_make_tiny_model "$model"
fi
./build/tools/pvllm generate --model "$model" --prompt "Once upon a time" \
  --max-tokens 120 --temperature 0
