#!/usr/bin/env bash
# Compares the engine's step times of two pvllm builds side by side on the
# CPU: `pvllm bench` runs each workload with each binary in turn (A, B, A,
# B, ...), so both see the same machine state, and the script prints each
# run's step-time p50 / p99 and wall time, then B / A as the range over the
# runs. For refactors that must not slow the engine down.
#
#   scripts/bench_step_compare.sh OLD/pvllm NEW/pvllm [model] [runs]
#
# model: default models/stories260K/stories260K.bin (small, so the host
# side of a step weighs most); runs: per binary and workload, default 3.
set -euo pipefail
a="$1"
b="$2"
model="${3:-models/stories260K/stories260K.bin}"
runs="${4:-3}"
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
      "$bin" bench --model "$model" --workload "$workload" --kv-allocator "$allocator" \
        --quiet --json "$out/$workload-$allocator-$side-$r.json" >/dev/null
    done
  done
done
python3 - "$out" "$runs" "${workloads[@]}" <<'PY'
import json, sys
out, runs, workloads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'workload':<28}{'metric':<18}{'A (runs)':<30}{'B (runs)':<30}B/A range")
for w in workloads:
    workload, allocator = w.split()
    for metric in ("step_time_p50_ms", "step_time_p99_ms", "wall_s"):
        vals = {}
        for side in "ab":
            vals[side] = [json.load(open(f"{out}/{workload}-{allocator}-{side}-{r}.json"))["runs"][0][metric]
                          for r in range(1, runs + 1)]
        ratios = [b / a for a, b in zip(vals["a"], vals["b"]) if a > 0]
        fmt = lambda v: " ".join(f"{x:.2f}" for x in v)
        print(f"{workload + ' ' + allocator:<28}{metric:<18}{fmt(vals['a']):<30}{fmt(vals['b']):<30}"
              f"{min(ratios):.3f}..{max(ratios):.3f}  (sum {sum(vals['b']) / sum(vals['a']):.3f})")
PY
