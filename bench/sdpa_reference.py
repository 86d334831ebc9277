#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention on the shapes attention_bench measured.

The baseline for bench/attention_bench.cc. It reads that program's JSON
(--shapes) and times SDPA on every shape in it, bf16, with K/V contiguous
([batch, kv_heads, context, head_dim]) instead of paged: decode is a query of
length 1 over the whole context, prefill a fresh causal prompt. Each shape
runs on SDPA's flash and memory-efficient backends where they accept it, and
the faster one is the baseline (GQA through enable_gqa). Times are medians of
per-call torch.cuda.Event timings after warm-up, on random data. Then it
prints, row by row, pvllm's time beside SDPA's (speedup = SDPA ms / pvllm ms),
and the goals of docs/performance.md: decode at batch x context >= 32k at
least 0.80 of the copy bandwidth attention_bench measured and at least 1.0x
SDPA; prefill (the default kernel, mma) at least 0.8x SDPA.

    build/bench/attention_bench --json pvllm.json
    python3 bench/sdpa_reference.py --shapes pvllm.json --json sdpa.json
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

WARMUP = 3
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
DECODE_GOAL_TOKENS = 32 * 1024
DECODE_GOAL_OF_COPY = 0.80
DECODE_GOAL_SPEEDUP = 1.0
PREFILL_GOAL_SPEEDUP = 0.8


def median_ms(fn, reps):
    for _ in range(WARMUP):
        fn()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    events[0].record()
    for i in range(reps):
        fn()
        events[i + 1].record()
    events[-1].synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(reps))


def time_sdpa(q, k, v, causal, reps):
    """(ms, backend) of the fastest backend that accepts these inputs."""
    gqa = q.shape[1] != k.shape[1]
    best = None
    for name, backend in BACKENDS:
        try:
            with sdpa_kernel([backend]):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
                fn()
                torch.cuda.synchronize()
                ms = median_ms(fn, reps)
        except RuntimeError:
            continue  # this backend refuses the shape
        if best is None or ms < best[0]:
            best = (ms, name)
    if best is None:
        raise RuntimeError(f"no SDPA backend ran q {tuple(q.shape)} k {tuple(k.shape)}")
    return best


def shape_key(r):
    return (r["kind"], r["head_dim"], r["num_kv_heads"], r["num_heads"], r["num_seqs"],
            r["context_len"])


def measure(shape, reps):
    kind, head_dim, kv_heads, q_heads, batch, context = shape
    q_len = 1 if kind == "decode" else context
    q = torch.rand(batch, q_heads, q_len, head_dim, dtype=torch.bfloat16, device="cuda") * 2 - 1
    k = torch.rand(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda") * 2 - 1
    v = torch.rand_like(k) * 2 - 1
    ms, backend = time_sdpa(q, k, v, kind == "prefill", reps)
    del q, k, v
    return dict(zip(("kind", "head_dim", "num_kv_heads", "num_heads", "num_seqs", "context_len"),
                    shape), ms=ms, backend=backend)


def compare(pvllm, sdpa_by_shape):
    """pvllm's rows with SDPA's time, the speedup and, for decode, the fraction of copy."""
    rows = []
    for r in pvllm["rows"]:
        s = sdpa_by_shape[shape_key(r)]
        rows.append(dict(r, sdpa_ms=s["ms"], sdpa_backend=s["backend"],
                         speedup=s["ms"] / r["ms"]))
    return rows


def goals(rows):
    decode = [r for r in rows if r["kind"] == "decode"
              and r["num_seqs"] * r["context_len"] >= DECODE_GOAL_TOKENS]
    prefill = [r for r in rows if r["kind"] == "prefill" and r["variant"] == "mma"]
    out = {}
    if decode:
        out["decode_min_fraction_of_copy"] = min(r["fraction_of_copy"] for r in decode)
        out["decode_min_speedup_vs_sdpa"] = min(r["speedup"] for r in decode)
        out["decode_met"] = (out["decode_min_fraction_of_copy"] >= DECODE_GOAL_OF_COPY
                             and out["decode_min_speedup_vs_sdpa"] >= DECODE_GOAL_SPEEDUP)
    if prefill:
        out["prefill_min_speedup_vs_sdpa"] = min(r["speedup"] for r in prefill)
        out["prefill_met"] = out["prefill_min_speedup_vs_sdpa"] >= PREFILL_GOAL_SPEEDUP
    return out


def print_tables(rows, copy_gbs, device, summary):
    print(f"{device}; device-to-device copy bandwidth (attention_bench): {copy_gbs:.1f} GB/s\n")
    print("| decode | head_dim | kv_heads | q_heads | batch | context | block | splits | pvllm ms | "
          "GB/s | of copy | SDPA ms | SDPA backend | speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] == "decode":
            print(f"| | {r['head_dim']} | {r['num_kv_heads']} | {r['num_heads']} | {r['num_seqs']} | "
                  f"{r['context_len']} | {r['block_size']} | {r['num_splits']} | {r['ms']:.4f} | "
                  f"{r['gbs']:.1f} | {r['fraction_of_copy']:.2f} | {r['sdpa_ms']:.4f} | "
                  f"{r['sdpa_backend']} | {r['speedup']:.2f} |")
    print("\n| prefill | kernel | head_dim | kv_heads | q_heads | seqs | prompt | pvllm ms | TFLOP/s | "
          "SDPA ms | SDPA TFLOP/s | SDPA backend | speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] == "prefill":
            sdpa_tflops = r["tflops"] * r["ms"] / r["sdpa_ms"]
            print(f"| | {r['variant']} | {r['head_dim']} | {r['num_kv_heads']} | {r['num_heads']} | "
                  f"{r['num_seqs']} | {r['context_len']} | {r['ms']:.4f} | {r['tflops']:.1f} | "
                  f"{r['sdpa_ms']:.4f} | {sdpa_tflops:.1f} | {r['sdpa_backend']} | "
                  f"{r['speedup']:.2f} |")
    print("\ngoals:", json.dumps(summary))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", required=True, help="attention_bench's JSON")
    parser.add_argument("--json", help="write the compared rows here")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    try:
        with open(args.shapes) as f:
            pvllm = json.load(f)
        rows = pvllm["rows"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"sdpa_reference: cannot read attention_bench's rows from {args.shapes}: {e}")
    if not rows:
        sys.exit(f"sdpa_reference: {args.shapes} has no rows to compare")
    torch.backends.cuda.matmul.allow_tf32 = False
    shapes = sorted({shape_key(r) for r in pvllm["rows"]})
    with torch.inference_mode():
        sdpa_by_shape = {s: measure(s, args.reps) for s in shapes}
    rows = compare(pvllm, sdpa_by_shape)
    summary = goals(rows)
    device = pvllm.get("device", torch.cuda.get_device_name())
    print_tables(rows, pvllm["copy_gbs"], device, summary)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(implementation="torch_sdpa", torch=torch.__version__, device=device,
                           copy_gbs=pvllm["copy_gbs"], goals=summary, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
