#!/usr/bin/env python3
"""pvllm against Hugging Face transformers on the GPU, same model, same work.

Runs on the GPU machine (not in CI). Both engines run one model shape
(--shape: tinyllama-1.1b, the default, or llama-3-8b) with random bf16 weights
(no download): transformers builds LlamaForCausalLM(config) after
torch.manual_seed(0); pvllm builds its own with --random-weights. Throughput
does not depend on the weights' values since every request ignores EOS.

The bandwidth roofline: pvllm bench reports the bytes its steps had to read
(the weights once per step, and the K/V of every position each computed
sequence attended to: roofline_gb, and roofline_gbs = those bytes / the wall
time); this script measures the device-to-device copy bandwidth in the same
run (torch, 1 GiB of random bf16, bytes read + written, median of 20) and
reports roofline_fraction = roofline_gbs / copy_gbs for each pvllm run: 1.0
would be a run that moved only what it must, at copy speed.

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

transformers through all 256 requests at four batch sizes takes far longer
than a 10-minute GPU call, so it can be bounded: --subset N runs only the
first N requests of the workload (pvllm then runs those N as well, besides
the whole workload, so the two are compared on the same requests), and
--hf-max-seconds S starts no new group once S seconds of generate() have
passed (the requests measured are then fewer, and the JSON says how many).
transformers' output tokens/s = the measured requests' own output tokens /
the wall time of their groups' generate() calls (prefill included; padding
and the tokens a group generates past a request's own length not counted).

transformers uses generate() with a static KV cache (and torch.compile with
--compile). Prints one side-by-side table and writes JSON (--json), after
every measurement, so a run stopped at its time limit keeps what it has.
--skip-hf and --skip-pvllm run one side; --pvllm-results FILE takes pvllm's
figures from an earlier --skip-hf run's JSON for the table.

Usage:
  python3 scripts/bench_vs_transformers.py [--pvllm build/tools/pvllm]
      [--batch-sizes 16,32,64,128] [--subset N] [--hf-max-seconds S]
      [--decode-tokens 256] [--compile] [--skip-hf | --skip-pvllm]
      [--pvllm-results pvllm.json] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_shapes import SHAPES  # noqa: E402


def copy_bandwidth_gbs(reps=20):
    """Device-to-device copy of 1 GiB of random bf16: GB/s of bytes read + written."""
    import statistics

    import torch

    a = torch.rand(1 << 29, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    del a, b
    torch.cuda.empty_cache()
    return 2.0 * (1 << 30) / (statistics.median(times) * 1e-3) / 1e9


def run_pvllm(args, extra, label, timeout=None):
    """Runs `pvllm bench` with `extra`, returns the paged run's figures, or
    None when it ran past `timeout` seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        cmd = [args.pvllm, "bench", "--random-weights", args.shape, "--device", args.device,
               "--kv-allocator", "paged", "--kv-cache-mb", str(args.kv_cache_mb),
               "--max-num-seqs", "256", "--max-num-batched-tokens",
               str(args.max_num_batched_tokens), "--json", out, "--quiet"] + extra
        print(f"[pvllm {label}] {' '.join(cmd)}", file=sys.stderr, flush=True)
        try:
            subprocess.run(cmd, check=True, stdout=sys.stderr, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"[pvllm {label}] stopped after {timeout:.0f} s", file=sys.stderr)
            return None
        with open(out) as f:
            return json.load(f)["runs"][0]


def dump_workload(args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "workload.json")
        subprocess.run([args.pvllm, "bench", "--random-weights", args.shape, "--workload", "nano",
                        "--dump-workload", path, "--quiet"], check=True, stdout=sys.stderr)
        with open(path) as f:
            w = json.load(f)
    print(f"[workload] {w['description']}", file=sys.stderr)
    return [(r["prompt_len"], r["max_tokens"]) for r in w["requests"]]


def make_model(args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**SHAPES[args.shape], torch_dtype=torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    if args.compile:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    return model


def hf_generate(model, prompt_lens, new_tokens, seed, vocab):
    """One left-padded batch; returns seconds. Every row generates new_tokens."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    width = max(prompt_lens)
    ids = torch.zeros((len(prompt_lens), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(prompt_lens):
        ids[i, width - n:] = torch.randint(3, vocab, (n,), generator=g)
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


def hf_nano(model, requests, batch_size, deadline, vocab):
    """Output tokens/s on the nano requests in groups of batch_size, in
    workload order. No group starts when the last one's time would pass
    `deadline` (time.perf_counter(); None: no limit); at least one runs."""
    seconds, useful, generated, measured, last = 0.0, 0, 0, 0, 0.0
    for k in range(0, len(requests), batch_size):
        if deadline is not None and measured and time.perf_counter() + last > deadline:
            break
        group = requests[k:k + batch_size]
        new_tokens = max(o for _, o in group)
        last = hf_generate(model, [p for p, _ in group], new_tokens, k, vocab)
        seconds += last
        useful += sum(o for _, o in group)
        generated += new_tokens * len(group)
        measured += len(group)
        print(f"[transformers nano] batch {batch_size}: requests {k}..{k + len(group) - 1} "
              f"in {last:.1f} s", file=sys.stderr, flush=True)
    return {"output_tokens_per_s": useful / seconds, "seconds": seconds,
            "num_requests": measured, "num_groups": -(-measured // batch_size),
            "output_tokens": useful, "generated_tokens_with_padding_rows": generated,
            "stopped_by_time_limit": measured < len(requests)}


def pvllm_figures(run, copy_gbs):
    f = {"output_tokens_per_s": run["output_tokens_per_s"],
         "total_tokens_per_s": run["total_tokens_per_s"],
         "ttft_p50_ms": run["ttft_p50_ms"], "tpot_p50_ms": run["tpot_p50_ms"],
         "peak_running": run["peak_running"], "preemptions": run["preemptions"],
         "wall_s": run["wall_s"], "roofline_gb": run["roofline_gb"],
         "roofline_gbs": run["roofline_gbs"]}
    if copy_gbs:
        f["roofline_fraction"] = run["roofline_gbs"] / copy_gbs
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pvllm", default="build/tools/pvllm")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shape", default="tinyllama-1.1b", choices=sorted(SHAPES))
    ap.add_argument("--batch-sizes", default="16,32,64,128")
    ap.add_argument("--subset", type=int, default=0,
                    help="transformers runs only the first N nano requests (0: all); pvllm "
                         "runs them too")
    ap.add_argument("--hf-max-seconds", type=float, default=0,
                    help="no new transformers group after this many seconds (0: no limit)")
    ap.add_argument("--pvllm-max-seconds", type=float, default=0,
                    help="stop a pvllm run after this many seconds in all (0: no limit)")
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=16, help="batch-1 prompt length")
    ap.add_argument("--kv-cache-mb", type=int, default=32768)
    ap.add_argument("--max-num-batched-tokens", type=int, default=16384)
    ap.add_argument("--compile", action="store_true", help="torch.compile the HF forward")
    ap.add_argument("--skip-hf", action="store_true", help="only run pvllm")
    ap.add_argument("--skip-pvllm", action="store_true", help="only run transformers")
    ap.add_argument("--pvllm-results", help="pvllm's figures from an earlier --skip-hf JSON")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    requests = dump_workload(args)
    subset = requests[:args.subset] if 0 < args.subset < len(requests) else requests
    results = {"shape": args.shape, "dtype": "bf16", "num_requests": len(requests),
               "nano_output_tokens": sum(o for _, o in requests), "complete": False}

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)

    if args.pvllm_results:
        with open(args.pvllm_results) as f:
            results["pvllm"] = json.load(f)["pvllm"]
    elif not args.skip_pvllm:
        copy_gbs = None
        try:
            import torch

            if torch.cuda.is_available():
                copy_gbs = copy_bandwidth_gbs()
        except ImportError:
            pass
        results["copy_gbs"] = copy_gbs
        start = time.perf_counter()

        def left():  # seconds left of --pvllm-max-seconds, or None
            if not args.pvllm_max_seconds:
                return None
            return max(1.0, args.pvllm_max_seconds - (time.perf_counter() - start))

        pv = results["pvllm"] = {
            "method": "pvllm bench (paged KV, continuous batching): output tokens / wall time "
                      "from the first submit to the last token",
        }
        b1 = run_pvllm(args, ["--workload", "fixed", "--num-requests", "1", "--input-len",
                              str(args.prompt_len), "--output-len", str(args.decode_tokens)],
                       "batch-1", left())
        if b1:
            pv["batch1_tokens_per_s"] = b1["output_tokens_per_s"]
            pv["batch1_decode_tokens_per_s"] = 1000.0 / b1["tpot_p50_ms"] if b1["tpot_p50_ms"] else 0
            pv["batch1"] = pvllm_figures(b1, copy_gbs)
        save()
        if len(subset) < len(requests):
            run = run_pvllm(args, ["--workload", "nano", "--num-requests", str(len(subset))],
                            f"nano first {len(subset)}", left())
            if run:
                pv["subset_num_requests"] = len(subset)
                pv["subset"] = pvllm_figures(run, copy_gbs)
                pv["subset_output_tokens_per_s"] = run["output_tokens_per_s"]
            save()
        run = run_pvllm(args, ["--workload", "nano"], "nano", left())
        if run:
            pv.update({"nano_" + k: v for k, v in pvllm_figures(run, copy_gbs).items()})
        save()

    if not args.skip_hf:
        import torch
        import transformers

        model = make_model(args)
        vocab = SHAPES[args.shape]["vocab_size"]
        hf_generate(model, [args.prompt_len], 8, 0, vocab)  # warm-up (and compile)
        hf = results["transformers"] = {
            "version": transformers.__version__, "torch": torch.__version__,
            "compile": args.compile,
            "nano_subset": len(subset) < len(requests),
            "nano_requests": (f"the first {len(subset)} of the {len(requests)} nano requests"
                              if len(subset) < len(requests) else
                              f"all {len(requests)} nano requests"),
            "tokens_per_s_method": (
                "groups of B requests in workload order, left-padded, each generating its "
                "longest request's output (static cache, greedy, min_new_tokens = "
                "max_new_tokens); output tokens/s = the measured requests' own output tokens "
                "/ the summed wall time of their groups' generate() calls (prefill included; "
                "padding and tokens past a request's own length not counted)"),
        }
        b1 = hf_generate(model, [args.prompt_len], args.decode_tokens, 1, vocab)
        hf["batch1_tokens_per_s"] = args.decode_tokens / b1
        save()
        deadline = time.perf_counter() + args.hf_max_seconds if args.hf_max_seconds else None
        sweep, details = {}, {}
        for b in [int(x) for x in args.batch_sizes.split(",")]:
            if deadline is not None and time.perf_counter() >= deadline:
                print(f"[transformers nano] batch {b}: skipped, past --hf-max-seconds",
                      file=sys.stderr)
                continue
            try:
                r = hf_nano(model, subset, b, deadline, vocab)
            except torch.cuda.OutOfMemoryError:
                print(f"[transformers nano] batch {b}: out of memory", file=sys.stderr)
                torch.cuda.empty_cache()
                continue
            sweep[b], details[b] = r["output_tokens_per_s"], r
            print(f"[transformers nano] batch {b}: {sweep[b]:.0f} output tok/s over "
                  f"{r['num_requests']} requests ({r['seconds']:.1f} s)", file=sys.stderr,
                  flush=True)
            hf["nano_sweep_output_tokens_per_s"] = sweep
            hf["nano_sweep"] = details
            save()
        best = max(sweep, key=sweep.get) if sweep else None
        hf["nano_best_batch_size"] = best
        hf["nano_output_tokens_per_s"] = sweep[best] if best else None
        hf["nano_num_requests_measured"] = details[best]["num_requests"] if best else 0

    # Side by side, on the same requests where transformers ran a subset.
    pv, hf = results.get("pvllm", {}), results.get("transformers", {})
    n_hf = hf.get("nano_num_requests_measured")
    pv_nano, nano_label = pv.get("nano_output_tokens_per_s"), f"nano ({len(requests)} requests)"
    if hf.get("nano_subset") or (n_hf and n_hf < len(requests)):
        same = pv.get("subset_num_requests") == n_hf
        pv_nano = pv.get("subset_output_tokens_per_s") if same else None
        nano_label = f"nano, first {n_hf} requests" + ("" if same else " (pvllm: not run)")
    rows = [(f"{nano_label}: output tok/s", pv_nano, hf.get("nano_output_tokens_per_s")),
            ("batch-1: output tokens/s", pv.get("batch1_tokens_per_s"),
             hf.get("batch1_tokens_per_s"))]
    results["side_by_side"] = [{"row": label, "pvllm": p, "transformers": h,
                                "ratio": p / h if p and h else None} for label, p, h in rows]
    print(f"\n{args.shape + ' shape, random bf16':44} {'pvllm':>10} {'transformers':>13} "
          f"{'ratio':>7}")
    for label, p, h in rows:
        ps = f"{p:10.1f}" if p else f"{'-':>10}"
        hs = f"{h:13.1f}" if h else f"{'-':>13}"
        rs = f"{p / h:6.2f}x" if p and h else f"{'-':>7}"
        print(f"{label:44} {ps} {hs} {rs}")
    if hf.get("nano_best_batch_size"):
        print(f"(transformers nano at batch size {hf['nano_best_batch_size']})")
    if results.get("copy_gbs"):
        print(f"device-to-device copy: {results['copy_gbs']:.0f} GB/s; pvllm's share of the "
              f"bandwidth roofline: nano {pv.get('nano_roofline_fraction', 0):.2f}, batch-1 "
              f"{pv.get('batch1', {}).get('roofline_fraction', 0):.2f}")
    results["complete"] = True
    print(json.dumps(results, indent=2))
    save()


if __name__ == "__main__":
    main()
