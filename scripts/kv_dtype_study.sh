#!/usr/bin/env bash
# The KV cache dtypes study of docs/memory.md and docs/performance.md:
# accuracy (bench/kv_dtype_accuracy.cc: KL divergence against the fp32
# cache over long generations on stories260K and the 15M and 110M shapes,
# the run.c goldens per dtype, the int8 scale's width) and speed
# (bench/cpu_kv_dtype_bench.cc: decode of 8 sequences at a 4096-token
# context on the 110M shape, and 64 concurrent short requests, the dtypes
# side by side) and capacity (`pvllm bench --kv-cache-dtype`: the blocks
# and sequences one 256 MiB budget holds per dtype). Builds what it needs into build/ (Release), writes the
# random-weight checkpoints once into build/kv-models and the JSON into
# OUT_DIR (default build/kv-study). A benchmark, not a test: about 15
# minutes on 2 cores. Needs $PVLLM_SHARED_DIR (or ../shared) for the
# goldens; stories260K comes from the repository's models/.
#
# Usage: scripts/kv_dtype_study.sh [OUT_DIR] [--accuracy-only|--speed-only]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${PVLLM_BUILD_DIR:-build}"
out="build/kv-study"
part=all
for arg in "$@"; do
  case "$arg" in
    --accuracy-only) part=accuracy ;;
    --speed-only) part=speed ;;
    *) out="$arg" ;;
  esac
done
shared="${PVLLM_SHARED_DIR:-../shared}"
threads="${PVLLM_BENCH_THREADS:-2}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPVLLM_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target kv_dtype_accuracy cpu_kv_dtype_bench cpu_make_llama2c_model \
  pvllm_cli >/dev/null
models="$build/kv-models"
mkdir -p "$models" "$out"
# The shapes of scripts/bench_cpu.py with longer contexts: 15M (dim 288,
# 6 layers, 6 heads) and 110M (dim 768, 12 layers, 12 heads), vocab 32000.
[ -f "$models/random15M.bin" ] ||
  "$build/bench/cpu_make_llama2c_model" "$models/random15M.bin" 288 768 6 6 6 32000 2048
[ -f "$models/random110M.bin" ] ||
  "$build/bench/cpu_make_llama2c_model" "$models/random110M.bin" 768 2048 12 12 12 32000 8192

if [ "$part" != speed ]; then
  # stories260K from natural prompts (the goldens' first words), the random
  # shapes from id prompts; the goldens batched, per dtype.
  "$build/bench/kv_dtype_accuracy" --threads "$threads" \
    --model 260K=models/stories260K/stories260K.bin --tokens 260K=500 \
    --prompt 260K=1,403,407,261,378 --prompt 260K=1,317,269,274,287,263,377 \
    --prompt 260K=1,291,280,294 --prompt 260K=1,385,328,432,261,376 \
    --model 15M="$models/random15M.bin" --tokens 15M=1024 \
    --prompt 15M=1,20,134,265,396 --prompt 15M=1,500,9000,12345,30000,77 \
    --model 110M="$models/random110M.bin" --tokens 110M=1024 \
    --prompt 110M=1,20,134,265,396 \
    --golden "$shared/golden/stories260K-greedy.json" \
    --golden-model models/stories260K/stories260K.bin \
    --json "$out/kv-dtype-accuracy.json"
fi
if [ "$part" != accuracy ]; then
  "$build/bench/cpu_kv_dtype_bench" --model "$models/random110M.bin" --threads "$threads" \
    --dtypes f32,f16,bf16,int8 --context 4096 --seqs 8 --steps 16 --repeats 3 \
    --short-dtypes f32,int8 --requests 64 --prompt 16 --tokens 128 \
    --json "$out/kv-dtype-speed.json"
fi
if [ "$part" != accuracy ]; then
  # What one budget holds: 16 requests of 512 + 16 tokens on the 110M shape.
  "$build/tools/pvllm" bench -q --model "$models/random110M.bin" --max-model-len 2048 \
    --workload fixed --input-len 512 --output-len 16 --num-requests 16 --kv-allocator paged \
    --kv-cache-mb 256 --seed 1 --kv-cache-dtype f32,f16,bf16,int8 \
    --json "$out/kv-dtype-fit.json" | tee "$out/kv-dtype-fit.txt"
fi
