#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention on the shapes of attention_bench.

The baseline for bench/attention_bench.cc: the same decode and prefill shapes,
bf16, but with K/V contiguous ([batch, kv_heads, context, head_dim]) instead
of paged. Decode is a query of length 1 over the full context; GQA uses
enable_gqa (PyTorch >= 2.5) or repeat_interleave. Timing with torch.cuda.Event
after warm-up. Prints the same markdown tables as attention_bench and, with
--json PATH, the same JSON rows, so the two compare side by side:

    build/bench/attention_bench --json pvllm.json
    python3 bench/sdpa_reference.py --json sdpa.json
"""
import argparse
import inspect
import json

import torch
import torch.nn.functional as F

WARMUP = 3
SHAPES = [(128, 8, 32), (64, 4, 32)]  # (head_dim, kv_heads, q_heads)
BATCHES = [1, 8, 32, 128, 256]
CONTEXTS = [128, 512, 2048, 8192]
BLOCK_SIZES = [16, 32]  # no paging here; repeated so the rows line up
PREFILL_CASES = [(1, 512), (1, 2048), (1, 8192), (4, 1024), (16, 512)]
HAS_GQA = "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters


def time_ms(fn, reps):
    for _ in range(WARMUP):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def copy_bandwidth_gbs(reps):
    a = torch.ones(1 << 29, dtype=torch.bfloat16, device="cuda")  # 1 GiB
    b = torch.empty_like(a)
    ms = time_ms(lambda: b.copy_(a), reps)
    return 2.0 * a.numel() * 2 / (ms * 1e-3) / 1e9


def sdpa(q, k, v, causal):
    group = q.shape[1] // k.shape[1]
    if HAS_GQA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def bench_decode(head_dim, kv_heads, q_heads, copy_gbs, reps):
    rows = []
    for block_size in BLOCK_SIZES:
        for batch in BATCHES:
            for context in CONTEXTS:
                q = torch.randn(batch, q_heads, 1, head_dim, dtype=torch.bfloat16, device="cuda")
                k = torch.randn(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda")
                v = torch.randn_like(k)
                ms = time_ms(lambda: sdpa(q, k, v, False), reps)
                nbytes = 2.0 * k.numel() * 2 + 2.0 * q.numel() * 2
                gbs = nbytes / (ms * 1e-3) / 1e9
                rows.append(dict(kind="decode", head_dim=head_dim, num_kv_heads=kv_heads,
                                 num_heads=q_heads, num_seqs=batch, context_len=context,
                                 block_size=block_size, num_splits=0, ms=ms, gbs=gbs,
                                 fraction_of_copy=gbs / copy_gbs))
                del q, k, v
    return rows


def bench_prefill(head_dim, kv_heads, q_heads, reps):
    rows = []
    for num_seqs, prompt in PREFILL_CASES:
        q = torch.randn(num_seqs, q_heads, prompt, head_dim, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(num_seqs, kv_heads, prompt, head_dim, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        ms = time_ms(lambda: sdpa(q, k, v, True), reps)
        flops = 4.0 * num_seqs * prompt * (prompt + 1) / 2 * q_heads * head_dim
        rows.append(dict(kind="prefill", head_dim=head_dim, num_kv_heads=kv_heads,
                         num_heads=q_heads, num_seqs=num_seqs, context_len=prompt,
                         block_size=16, num_splits=1, ms=ms,
                         tflops=flops / (ms * 1e-3) / 1e12, fraction_of_copy=0.0))
    return rows


def print_tables(rows, copy_gbs):
    print(f"device-to-device copy bandwidth: {copy_gbs:.1f} GB/s\n")
    print("| kernel | head_dim | kv_heads | q_heads | batch | context | block | splits | ms | GB/s | of copy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] == "decode":
            print(f"| sdpa decode | {r['head_dim']} | {r['num_kv_heads']} | {r['num_heads']} | "
                  f"{r['num_seqs']} | {r['context_len']} | {r['block_size']} | - | "
                  f"{r['ms']:.4f} | {r['gbs']:.1f} | {r['fraction_of_copy']:.2f} |")
    print("\n| kernel | head_dim | kv_heads | q_heads | seqs | prompt | block | ms | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] == "prefill":
            print(f"| sdpa prefill | {r['head_dim']} | {r['num_kv_heads']} | {r['num_heads']} | "
                  f"{r['num_seqs']} | {r['context_len']} | - | {r['ms']:.4f} | {r['tflops']:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    copy_gbs = copy_bandwidth_gbs(args.reps)
    rows = []
    with torch.inference_mode():
        for shape in SHAPES:
            rows += bench_decode(*shape, copy_gbs, args.reps)
        for shape in SHAPES:
            rows += bench_prefill(*shape, args.reps)
    print_tables(rows, copy_gbs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(implementation="torch_sdpa", torch=torch.__version__,
                           copy_gbs=copy_gbs, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
