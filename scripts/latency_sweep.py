#!/usr/bin/env python3
"""Latency under load: time to first token and time per output token, p50 and
p99, at several concurrencies, with CUDA graphs on and off.

Each point is one `pvllm bench --workload fixed` run: C requests of --input-len
random prompt tokens and --output-len output tokens, all submitted before the
first step (so C run at once when the KV budget holds them), paged KV. The
bench's client-side figures are used: TTFT from submit to the first token,
TPOT the mean gap between a request's later tokens, over every request. Prints
a markdown table and, with --json, writes every run's figures.

    python3 scripts/latency_sweep.py --pvllm build/tools/pvllm \\
        --random-weights tinyllama-1.1b --device cuda --json latency.json

Runs anywhere pvllm does (the CPU too, with --device cpu and a small model);
docs/performance.md keeps the GPU figures.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run_point(args, concurrency, graphs):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        cmd = [args.pvllm, "bench", "--device", args.device, "--workload", "fixed",
               "--num-requests", str(concurrency), "--input-len", str(args.input_len),
               "--output-len", str(args.output_len), "--kv-allocator", "paged",
               "--kv-cache-mb", str(args.kv_cache_mb), "--max-num-seqs", str(max(concurrency, 1)),
               "--dtype", args.dtype, "--json", out, "--quiet"]
        cmd += ["--model", args.model] if args.model else ["--random-weights", args.random_weights]
        if not graphs:
            cmd.append("--no-cuda-graphs")
        print(f"[latency] {' '.join(cmd)}", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=sys.stderr, timeout=args.timeout)
        with open(out) as f:
            run = json.load(f)["runs"][0]
    keys = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "output_tokens_per_s",
            "peak_running", "preemptions", "wall_s", "roofline_gbs")
    return dict({"concurrency": concurrency, "cuda_graphs": graphs},
                **{k: run.get(k) for k in keys})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pvllm", default="build/tools/pvllm")
    ap.add_argument("--model", help="a model path (or --random-weights)")
    ap.add_argument("--random-weights", default="tinyllama-1.1b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--concurrency", default="1,16,64,256")
    ap.add_argument("--graphs", default="on,off", help="on, off, or both (on,off)")
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--kv-cache-mb", type=int, default=32768)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--json", help="write the runs here")
    args = ap.parse_args()

    runs = []
    for graphs in [g.strip() == "on" for g in args.graphs.split(",")]:
        for c in [int(x) for x in args.concurrency.split(",")]:
            runs.append(run_point(args, c, graphs))
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"model": args.model or "random:" + args.random_weights,
                               "device": args.device, "dtype": args.dtype,
                               "input_len": args.input_len, "output_len": args.output_len,
                               "runs": runs}, f, indent=2)
    print("| concurrency | CUDA graphs | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | "
          "TPOT p99 (ms) | output tok/s | peak running | preemptions |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        print(f"| {r['concurrency']} | {'on' if r['cuda_graphs'] else 'off'} | "
              f"{r['ttft_p50_ms']:.1f} | {r['ttft_p99_ms']:.1f} | {r['tpot_p50_ms']:.2f} | "
              f"{r['tpot_p99_ms']:.2f} | {r['output_tokens_per_s']:.0f} | "
              f"{r['peak_running']:.0f} | {r['preemptions']:.0f} |")


if __name__ == "__main__":
    main()
