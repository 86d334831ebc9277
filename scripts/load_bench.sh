#!/usr/bin/env bash
# Time to first token from a .pvllm file against its safetensors folder
# (docs/format.md, "Load time"): the real stories260K (from
# $PVLLM_SHARED_DIR/models/stories260K-hf, skipped when absent) and a 1 GB
# random-weight fp32 model made here. Also times the 1 GB conversion and
# its peak resident memory. Uses the build in build/ (scripts/build.sh).
#   scripts/load_bench.sh [ROUNDS]    writes build/load-bench/load_bench.json
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-15}"
out=build/load-bench
mkdir -p "$out"
cmake --build build --target pvllm_cli pvllm_make_tiny_model cpu_load_bench >/dev/null
pvllm=build/tools/pvllm

args=()
shared="${PVLLM_SHARED_DIR:-../shared}"
if [ -d "$shared/models/stories260K-hf" ]; then
  "$pvllm" convert "$shared/models/stories260K-hf" "$out/stories260K.pvllm" -q
  args+=(stories260K "$shared/models/stories260K-hf" "$out/stories260K.pvllm")
else
  echo "load_bench: no $shared/models/stories260K-hf: stories260K skipped" >&2
fi

# hidden 2048, intermediate 5632, 5 layers, fp32: 1.03 GB of weights.
if [ ! -f "$out/random-1g/model.safetensors" ]; then
  rm -rf "$out/random-1g"
  build/tests/pvllm_make_tiny_model --hidden 2048 --intermediate 5632 --layers 5 --heads 16 \
    --kv-heads 16 "$out/random-1g" >/dev/null
fi
/usr/bin/time -f "load_bench: converting 1 GB took %e s, peak RSS %M KB" \
  "$pvllm" convert "$out/random-1g" "$out/random-1g.pvllm" -q
args+=(random-1GB "$out/random-1g" "$out/random-1g.pvllm")

build/bench/cpu_load_bench --rounds "$rounds" --json "$out/load_bench.json" "${args[@]}"
echo "load_bench: $out/load_bench.json"
