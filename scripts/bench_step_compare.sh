#!/usr/bin/env bash
# Compares the engine's step times of two pvllm builds side by side on the
# CPU: `pvllm bench` runs each workload with each binary in turn (A, B, A,
# B, ...), so both see the same machine state, and the script prints each
# run's step-time p50 / p99 and wall time, then the ratio B / A of the
# medians over the runs and the range of the per-run ratios. For refactors
# that must not slow the engine down.
#
#   scripts/bench_step_compare.sh OLD/pvllm NEW/pvllm [model] [runs] [threads]
#
# model: default models/stories260K/stories260K.bin (small, so the host
# side of a step weighs most); runs: per binary and workload, default 5;
# threads: the CPU backend's, default 1 (fewer threads than cores keeps the
# scheduler's noise out of the step times). With taskset, each run is pinned
# to the last cores, one per thread.
set -euo pipefail
a="$1"
b="$2"
model="${3:-models/stories260K/stories260K.bin}"
runs="${4:-5}"
threads="${5:-1}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
workloads=("chat paged" "chat contiguous" "parallel paged" "parallel contiguous"
  "shared-prefix paged")
for w in "${workloads[@]}"; do
  read -r workload allocator <<<"$w"
  for r in $(seq "$runs"); do
    for side in a b; do
      bin="$a"
      [ "$side" = b ] && bin="$b"
      pin=()
      if command -v taskset >/dev/null; then
        pin=(taskset -c "$(($(nproc) - threads))-$(($(nproc) - 1))")
      fi
      "${pin[@]}" "$bin" bench --model "$model" --workload "$workload" --kv-allocator "$allocator" \
        --threads "$threads" --quiet --json "$out/$workload-$allocator-$side-$r.json" >/dev/null
    done
  done
done
python3 - "$out" "$runs" "${workloads[@]}" <<'PY'
import json, sys
out, runs, workloads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
import statistics
width = 7 * runs + 2
print(f"{'workload':<28}{'metric':<18}{'A (runs)':<{width}}{'B (runs)':<{width}}B/A medians, per-run range")
for w in workloads:
    workload, allocator = w.split()
    for metric in ("step_time_p50_ms", "step_time_p99_ms", "wall_s"):
        vals = {}
        for side in "ab":
            vals[side] = [json.load(open(f"{out}/{workload}-{allocator}-{side}-{r}.json"))["runs"][0][metric]
                          for r in range(1, runs + 1)]
        ratios = [b / a for a, b in zip(vals["a"], vals["b"]) if a > 0]
        fmt = lambda v: " ".join(f"{x:.2f}" for x in v)
        med = statistics.median(vals["b"]) / statistics.median(vals["a"])
        print(f"{workload + ' ' + allocator:<28}{metric:<18}{fmt(vals['a']):<{width}}{fmt(vals['b']):<{width}}"
              f"{med:.3f}  ({min(ratios):.3f}..{max(ratios):.3f})")
PY
