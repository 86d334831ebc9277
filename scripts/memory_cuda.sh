#!/usr/bin/env bash
# The memory story on the GPU (docs/memory.md): `pvllm bench --kv-allocator
# both` on the same KV budget, TinyLlama-1.1B's shape with random bf16
# weights, on CUDA: the chat trace, a long-output trace, the shared system
# prompt (prefix-cache hit rate) and n = 4 parallel samples (copy-on-write).
# Each writes its JSON (peak concurrency, throughput, KV utilization, hit
# rate, block copies; paged over contiguous) and timeline TSV into OUT.
#
# Usage: PVLLM=path/to/pvllm OUT=dir [KV_MB=2048] [DEVICE=cuda] bash scripts/memory_cuda.sh
# gpu_check.sh step 10 runs it from the bundle.
set -euo pipefail
pvllm="${PVLLM:-build/tools/pvllm}"
out="${OUT:-memory-cuda}"
kv_mb="${KV_MB:-2048}"
device="${DEVICE:-cuda}"
shape="${SHAPE:-tinyllama-1.1b}"
mkdir -p "$out"
bench() {  # name, args...
  local name=$1; shift
  echo "== $name: pvllm bench $*"
  "$pvllm" bench -q --random-weights "$shape" --device "$device" --kv-cache-mb "$kv_mb" \
    --kv-allocator both --seed 1 --json "$out/$name.json" --timeline "$out/$name.tsv" \
    --markdown "$out/$name.md" "$@"
}
bench chat --workload chat
bench long_output --workload fixed --input-len 128 --output-len 1024 --num-requests 256
bench shared_prefix --workload shared-prefix
bench parallel_n4 --workload parallel
