#!/usr/bin/env python3
"""pvllm against Hugging Face transformers on the GPU, same model, same work.

Runs on the GPU machine (not in CI). Both engines run the TinyLlama-1.1B
shape with random bf16 weights (no download): transformers builds
LlamaForCausalLM(config) after torch.manual_seed(0); pvllm builds its own
with --random-weights tinyllama-1.1b. Throughput does not depend on the
weights' values since every request ignores EOS.

Two measurements:
  nano     nano-vllm's benchmark: 256 requests, prompt and output lengths
           uniform in [100, 1024], seed 0. The exact lengths come from
           `pvllm bench --dump-workload`, so both engines run the same
           requests. transformers has no continuous batching: it runs the
           requests in groups of B (in workload order, left-padded), each
           group generating its longest output; only each request's own
           tokens count. B is swept (--batch-sizes) and the best is reported.
  batch-1  one request, a short prompt, --decode-tokens new tokens: decode
           speed (tokens/s).

transformers uses generate() with a static KV cache (and torch.compile with
--compile). Prints one side-by-side table and writes JSON (--json).

Usage:
  python3 scripts/bench_vs_transformers.py [--pvllm build/tools/pvllm]
      [--batch-sizes 16,32,64,128] [--decode-tokens 256] [--compile] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SHAPE = "tinyllama-1.1b"
# TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json (what pvllm's shape is).
TINYLLAMA = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                 num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                 max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5,
                 tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)


def run_pvllm(args, extra, label):
    """Runs `pvllm bench` with `extra`, returns the paged run's figures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        cmd = [args.pvllm, "bench", "--random-weights", SHAPE, "--device", args.device,
               "--kv-allocator", "paged", "--kv-cache-mb", str(args.kv_cache_mb),
               "--max-num-seqs", "256", "--max-num-batched-tokens",
               str(args.max_num_batched_tokens), "--json", out, "--quiet"] + extra
        print(f"[pvllm {label}] {' '.join(cmd)}", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        with open(out) as f:
            return json.load(f)["runs"][0]


def dump_workload(args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "workload.json")
        subprocess.run([args.pvllm, "bench", "--random-weights", SHAPE, "--workload", "nano",
                        "--dump-workload", path, "--quiet"], check=True, stdout=sys.stderr)
        with open(path) as f:
            w = json.load(f)
    print(f"[workload] {w['description']}", file=sys.stderr)
    return [(r["prompt_len"], r["max_tokens"]) for r in w["requests"]]


def make_model(args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**TINYLLAMA, torch_dtype=torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    if args.compile:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    return model


def hf_generate(model, prompt_lens, new_tokens, seed):
    """One left-padded batch; returns seconds. Every row generates new_tokens."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    width = max(prompt_lens)
    ids = torch.zeros((len(prompt_lens), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(prompt_lens):
        ids[i, width - n:] = torch.randint(3, TINYLLAMA["vocab_size"], (n,), generator=g)
        mask[i, width - n:] = 1
    ids, mask = ids.cuda(), mask.cuda()
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                       cache_implementation="static")
    torch.cuda.synchronize()
    return time.perf_counter() - start


def hf_nano(model, requests, batch_size):
    """Output tokens/s on the nano requests in groups of batch_size."""
    seconds, useful = 0.0, 0
    for k in range(0, len(requests), batch_size):
        group = requests[k:k + batch_size]
        seconds += hf_generate(model, [p for p, _ in group], max(o for _, o in group), k)
        useful += sum(o for _, o in group)
    return useful / seconds, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pvllm", default="build/tools/pvllm")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch-sizes", default="16,32,64,128")
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=16, help="batch-1 prompt length")
    ap.add_argument("--kv-cache-mb", type=int, default=32768)
    ap.add_argument("--max-num-batched-tokens", type=int, default=16384)
    ap.add_argument("--compile", action="store_true", help="torch.compile the HF forward")
    ap.add_argument("--skip-hf", action="store_true", help="only run pvllm")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    requests = dump_workload(args)
    out_tokens = sum(o for _, o in requests)
    results = {"shape": SHAPE, "dtype": "bf16", "num_requests": len(requests),
               "nano_output_tokens": out_tokens}

    pv_nano = run_pvllm(args, ["--workload", "nano"], "nano")
    pv_b1 = run_pvllm(args, ["--workload", "fixed", "--num-requests", "1", "--input-len",
                             str(args.prompt_len), "--output-len", str(args.decode_tokens)],
                      "batch-1")
    results["pvllm"] = {
        "nano_output_tokens_per_s": pv_nano["output_tokens_per_s"],
        "nano_total_tokens_per_s": pv_nano["total_tokens_per_s"],
        "nano_ttft_p50_ms": pv_nano["ttft_p50_ms"], "nano_tpot_p50_ms": pv_nano["tpot_p50_ms"],
        "nano_peak_running": pv_nano["peak_running"], "nano_preemptions": pv_nano["preemptions"],
        "batch1_tokens_per_s": pv_b1["output_tokens_per_s"],
        "batch1_decode_tokens_per_s": 1000.0 / pv_b1["tpot_p50_ms"] if pv_b1["tpot_p50_ms"] else 0,
    }

    if not args.skip_hf:
        import torch
        import transformers

        model = make_model(args)
        hf_generate(model, [args.prompt_len], 8, 0)  # warm-up (and compile)
        sweep = {}
        for b in [int(x) for x in args.batch_sizes.split(",")]:
            try:
                tps, secs = hf_nano(model, requests, b)
            except torch.cuda.OutOfMemoryError:
                print(f"[transformers nano] batch {b}: out of memory", file=sys.stderr)
                torch.cuda.empty_cache()
                continue
            sweep[b] = tps
            print(f"[transformers nano] batch {b}: {tps:.0f} output tok/s ({secs:.1f} s)",
                  file=sys.stderr, flush=True)
        best = max(sweep, key=sweep.get) if sweep else None
        b1 = hf_generate(model, [args.prompt_len], args.decode_tokens, 1)
        results["transformers"] = {
            "version": transformers.__version__, "torch": torch.__version__,
            "compile": args.compile, "nano_sweep_output_tokens_per_s": sweep,
            "nano_best_batch_size": best,
            "nano_output_tokens_per_s": sweep[best] if best else None,
            "batch1_tokens_per_s": args.decode_tokens / b1,
        }

    hf = results.get("transformers", {})
    rows = [("nano: output tokens/s", "nano_output_tokens_per_s"),
            ("batch-1: output tokens/s", "batch1_tokens_per_s")]
    print(f"\n{'TinyLlama-1.1B shape, random bf16':36} {'pvllm':>12} {'transformers':>14} "
          f"{'ratio':>7}")
    for label, key in rows:
        p, h = results["pvllm"][key], hf.get(key)
        hs = f"{h:14.1f}" if h else f"{'-':>14}"
        rs = f"{p / h:6.2f}x" if h else f"{'-':>7}"
        print(f"{label:36} {p:12.1f} {hs} {rs}")
    if hf.get("nano_best_batch_size"):
        print(f"(transformers nano at its best batch size, {hf['nano_best_batch_size']})")
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
