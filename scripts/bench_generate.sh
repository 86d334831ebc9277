#!/usr/bin/env bash
# Generation throughput of `pvllm generate` on one model: one request alone,
# then 64 concurrent requests, in the same run. Each request generates
# --max-tokens tokens (EOS ignored) so both measure the same work per request.
# Usage: scripts/bench_generate.sh [MODEL] [MAX_TOKENS]
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-models/stories260K/stories260K.bin}"
max_tokens="${2:-256}"
pvllm=./build/tools/pvllm

prompts=$(mktemp)
trap 'rm -f "$prompts"' EXIT
openers=("Once upon a time" "Lily and Tom went to the park" "The cat" "Tim had a red ball. He"
         "One day, a little bird" "The sun was shining" "Sam found a big box" "Mom said")
for i in $(seq 0 63); do echo "${openers[$((i % 8))]}"; done > "$prompts"

run() {  # label, extra args...
  local label=$1; shift
  local line
  line=$("$pvllm" generate --model "$model" --max-tokens "$max_tokens" --temperature 0.8 \
          --seed 1 --ignore-eos "$@" 2>&1 >/dev/null | grep 'generated tokens/s' | tail -1)
  echo "$label: $line"
}
echo "model: $model, $max_tokens generated tokens per request, $(nproc) cores"
run "1 request   " --prompt "Once upon a time"
run "64 requests " --prompts-file "$prompts"
