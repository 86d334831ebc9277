#!/usr/bin/env python3
"""The CPU backend's throughput on the workloads of docs/performance.md, with
each figure's roofline measured in the same run, and, when they are named,
the same workloads through a baseline pvllm, llama2.c's run.c and llama.cpp.

Run through scripts/bench_cpu.sh (which builds what it needs). Options:
  --quick            one run per figure instead of the median of three
  --json FILE        also write every figure as JSON
Environment:
  PVLLM_BUILD_DIR        the build with tools/pvllm and bench/ (default build)
  PVLLM_BENCH_THREADS    threads (default: the CPUs this process may use)
  PVLLM_BENCH_MODELS     where the random-weight checkpoints are written
                         (default BUILD/bench-models)
  PVLLM_BASELINE         another pvllm binary, run on the same workloads
  PVLLM_SHARED_DIR       ../shared: the tokenizers run.c and llama.cpp need
  RUNC                   a llama2.c checkout: run.c is built -Ofast -fopenmp
                         -march=native and measured
  LLAMA_CPP_BIN          a llama.cpp build's bin/ folder (llama-bench,
                         llama-batched-bench, llama-convert-llama2c-to-ggml)

Workloads (fp32 weights, greedy unless said, EOS ignored):
  single stream  200 generated tokens (100 on the 110M shape)
  prefill        a 255-token (15M) or 512-token (110M) prompt, one output
  64 concurrent  64 prompts of 16 tokens, 128 generated tokens each (also
                 with temperature 0.8 on the 15M shape: what sampling costs)
  startup        a whole `pvllm generate` of one token, in ms (best of 5;
                 for the baseline column the ratio is baseline / pvllm)
on the real stories260K (models/stories260K) and random-weight llama2.c
checkpoints in the 15M shape (dim 288, 6 layers, 6 heads, hidden 768,
vocabulary 32000) and the 110M shape (dim 768, 12 layers, 12 heads, hidden
2048, vocabulary 32000).

Rooflines: decode, the weight bytes one token reads (every matrix and the
classifier) over the memory bandwidth measured now, as tokens/s (on the 260K
model the weights sit in cache, so it is no bound there); prefill, the
FLOP/s achieved against the FMA peak measured now.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env(name, default=None):
    v = os.environ.get(name, "")
    return v if v else default


BUILD = env("PVLLM_BUILD_DIR", os.path.join(ROOT, "build"))
PVLLM = os.path.join(BUILD, "tools", "pvllm")
MODELS = env("PVLLM_BENCH_MODELS", os.path.join(BUILD, "bench-models"))
SHARED = env("PVLLM_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


THREADS = int(env("PVLLM_BENCH_THREADS", str(usable_cpus())))

# name: (dim, hidden, layers, heads, kv_heads, vocab, seq_len)
SHAPES = {
    "260K": (64, 172, 5, 8, 4, 512, 512),
    "15M": (288, 768, 6, 6, 6, 32000, 256),
    "110M": (768, 2048, 12, 12, 12, 32000, 1024),
}


def model_path(name):
    if name == "260K":
        return os.path.join(ROOT, "models", "stories260K", "stories260K.bin")
    return os.path.join(MODELS, f"random{name}.bin")


def weight_bytes_per_token(name):
    dim, hidden, layers, heads, kv_heads, vocab, _ = SHAPES[name]
    kv_dim = dim // heads * kv_heads
    per_layer = dim * dim * 2 + dim * kv_dim * 2 + dim * hidden * 3
    return 4 * (layers * per_layer + vocab * dim)


def flops_per_prompt(name, prompt_len):
    """Matmul FLOPs of a prompt (the classifier for its last row only) plus
    causal attention's (QK^T and PV)."""
    dim, hidden, layers, heads, kv_heads, vocab, _ = SHAPES[name]
    kv_dim = dim // heads * kv_heads
    per_layer = dim * dim * 2 + dim * kv_dim * 2 + dim * hidden * 3
    matmul = 2 * prompt_len * layers * per_layer + 2 * vocab * dim
    attention = layers * 2 * 2 * dim * prompt_len * (prompt_len + 1) / 2
    return matmul + attention


def run(cmd, env_extra=None, timeout=1800):
    e = dict(os.environ)
    if env_extra:
        e.update(env_extra)
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p.stdout + p.stderr


# ---------------------------------------------------------------- machine


def roofline():
    out = run([os.path.join(BUILD, "bench", "cpu_roofline"), str(THREADS)])
    vals = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        vals[k] = v.strip()
    return {
        "isa": vals["isa"],
        "fma_gflops_1": float(vals["fma_gflops_1"]),
        "fma_gflops": float(vals["fma_gflops_N"]),
        "dram_gbs_1": float(vals["dram_gbs_1"]),
        "dram_gbs": float(vals["dram_gbs_N"]),
    }


def make_models():
    os.makedirs(MODELS, exist_ok=True)
    maker = os.path.join(BUILD, "bench", "cpu_make_llama2c_model")
    for name in ("15M", "110M"):
        path = model_path(name)
        if not os.path.exists(path):
            run([maker, path] + [str(v) for v in SHAPES[name]])


# ---------------------------------------------------------------- workloads


def prompt_ids(count, offset):
    """Distinct ids (no prefix shared between prompts), BOS first."""
    return [1] + [3 + (offset * 131 + i * 7) % 31000 for i in range(count - 1)]


def workloads():
    """(key, label, model, kind, params)"""
    return [
        ("single_260K", "single stream", "260K", "decode", {"tokens": 200}),
        ("single_15M", "single stream", "15M", "decode", {"tokens": 200}),
        ("single_110M", "single stream", "110M", "decode", {"tokens": 100}),
        ("prefill_15M", "prefill (255 tokens)", "15M", "prefill", {"prompt": 255}),
        ("prefill_110M", "prefill (512 tokens)", "110M", "prefill", {"prompt": 512}),
        ("batch64_15M", "64 concurrent", "15M", "batch", {"requests": 64, "prompt": 16, "tokens": 128}),
        ("batch64_110M", "64 concurrent", "110M", "batch", {"requests": 64, "prompt": 16, "tokens": 128}),
        ("batch64_15M_t08", "64 concurrent, temperature 0.8", "15M", "batch",
         {"requests": 64, "prompt": 16, "tokens": 128, "temperature": 0.8}),
    ]


def workload_args(kind, params, text_prompt=False):
    """pvllm generate's prompts and --max-tokens for a workload: decode from
    a 5-token prompt (or a text one), prefill of params["prompt"] ids with
    one token out, or params["requests"] prompts at once."""
    if kind == "decode":
        prompt = (["--prompt", "Once upon a time"] if text_prompt
                  else ["--prompt-ids", ",".join(map(str, prompt_ids(5, 0)))])
        return prompt + ["--max-tokens", str(params["tokens"])]
    if kind == "prefill":
        return ["--prompt-ids", ",".join(map(str, prompt_ids(params["prompt"], 0))),
                "--max-tokens", "1"]
    args = []
    for r in range(params["requests"]):
        args += ["--prompt-ids", ",".join(map(str, prompt_ids(params["prompt"], r + 1)))]
    return args + ["--max-tokens", str(params["tokens"])]


SUMMARY = re.compile(
    r"generated tokens in ([0-9.]+) s: ([0-9.]+) generated tokens/s; ([0-9.]+) prompt tokens")


def pvllm_once(binary, model, kind, params, threads):
    cmd = [binary, "generate", "--model", model_path(model), "-t",
           str(params.get("temperature", 0)), "--seed", "1", "--ignore-eos", "--threads", str(threads)]
    cmd += workload_args(kind, params, text_prompt=model == "260K")
    out = run(cmd)
    m = SUMMARY.search(out)
    if not m:
        raise RuntimeError(f"no summary in the output of {' '.join(cmd[:4])}: {out[-500:]}")
    seconds, gen_rate, prompt_tokens = float(m.group(1)), float(m.group(2)), float(m.group(3))
    if kind == "prefill":
        return prompt_tokens / seconds
    return gen_rate


def startup_seconds(binary, model):
    """Wall time of a whole `pvllm generate` of one token: process start,
    load, repack, one step, exit. The best of five."""
    best = 1e9
    for _ in range(5):
        start = time.perf_counter()
        run([binary, "generate", "--model", model_path(model), "--prompt-ids", "1", "-t", "0",
             "--max-tokens", "1", "-q"])
        best = min(best, time.perf_counter() - start)
    return best


def median(fn, repeats):
    return statistics.median(fn() for _ in range(repeats))


# ---------------------------------------------------------------- peers


def runc_binary():
    src = env("RUNC")
    if not src:
        return None
    out = os.path.join(MODELS, "run")
    if not os.path.exists(out):
        run(["gcc", "-Ofast", "-fopenmp", "-march=native", os.path.join(src, "run.c"), "-lm", "-o",
             out])
    return out


def tokenizer_bin(model):
    if model == "260K":
        return os.path.join(SHARED, "models", "stories260K", "tok512.bin")
    return os.path.join(SHARED, "models", "llama2-tokenizer", "tokenizer.bin")


def runc_once(binary, model, kind, params, threads):
    if kind != "decode":
        return None  # run.c has one stream and no batched prefill
    out = run([binary, model_path(model), "-z", tokenizer_bin(model), "-t", "0", "-n",
               str(params["tokens"] + 5), "-i", "Once upon a time"],
              {"OMP_NUM_THREADS": str(threads)})
    m = re.search(r"achieved tok/s: ([0-9.]+)", out)
    return float(m.group(1)) if m else None


def gguf(model):
    bindir = env("LLAMA_CPP_BIN")
    out = os.path.join(MODELS, f"{model}.gguf")
    if not os.path.exists(out):
        run([os.path.join(bindir, "llama-convert-llama2c-to-ggml"), "--copy-vocab-from-model",
             tokenizer_bin(model), "--llama2c-model", model_path(model), "--llama2c-output-model",
             out])
    return out


def llama_cpp_once(model, kind, params, threads):
    bindir = env("LLAMA_CPP_BIN")
    m = gguf(model)
    if kind in ("decode", "prefill"):
        pp, tg = (0, params["tokens"]) if kind == "decode" else (params["prompt"], 0)
        out = run([os.path.join(bindir, "llama-bench"), "-m", m, "-p", str(pp), "-n", str(tg), "-t",
                   str(threads), "-r", "1", "-o", "json"])
        data = json.loads(out[out.index("["):out.rindex("]") + 1])
        return float(data[0]["avg_ts"])
    n, p, t = params["requests"], params["prompt"], params["tokens"]
    out = run([os.path.join(bindir, "llama-batched-bench"), "-m", m, "-c", str(n * (p + t)), "-b",
               "2048", "-ub", "512", "-npp", str(p), "-ntg", str(t), "-npl", str(n), "-t",
               str(threads)])
    # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and cells[0] == str(p) and cells[2] == str(n):
            return float(cells[7])
    return None


# ---------------------------------------------------------------- report


def fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def main():
    quick = "--quick" in sys.argv
    json_path = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    repeats = 1 if quick else 3
    make_models()
    roof = roofline()
    baseline = env("PVLLM_BASELINE")
    runc = runc_binary()
    have_llama = env("LLAMA_CPP_BIN") is not None
    print(f"# bench_cpu: {time.strftime('%Y-%m-%d %H:%M')}, {THREADS} threads, kernels "
          f"{roof['isa']}; measured now: FMA peak {roof['fma_gflops_1']:.0f} GFLOP/s on one "
          f"thread, {roof['fma_gflops']:.0f} on {THREADS}; memory bandwidth "
          f"{roof['dram_gbs_1']:.1f} GB/s on one thread, {roof['dram_gbs']:.1f} on {THREADS}")
    print(f"# figures: tokens/s, the median of {repeats} runs; x1: {THREADS} threads over one")
    head = ["work", "model", "pvllm", "1 thread", "x1"]
    if baseline:
        head += ["baseline", "/baseline"]
    if runc:
        head += ["run.c", "/run.c"]
    if have_llama:
        head += ["llama.cpp", "/llama.cpp"]
    head += ["roofline"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    results = []
    for key, label, model, kind, params in workloads():
        r = {"key": key, "work": label, "model": model, "threads": THREADS}
        r["pvllm"] = median(lambda: pvllm_once(PVLLM, model, kind, params, THREADS), repeats)
        r["pvllm_1"] = median(lambda: pvllm_once(PVLLM, model, kind, params, 1), repeats)
        row = [label, model, fmt(r["pvllm"]), fmt(r["pvllm_1"]), ratio(r["pvllm"], r["pvllm_1"])]
        if baseline:
            r["baseline"] = median(lambda: pvllm_once(baseline, model, kind, params, THREADS), repeats)
            row += [fmt(r["baseline"]), ratio(r["pvllm"], r["baseline"])]
        if runc:
            v = runc_once(runc, model, kind, params, THREADS)
            r["runc"] = None if v is None else median(
                lambda: runc_once(runc, model, kind, params, THREADS), repeats)
            row += [fmt(r["runc"]), ratio(r["pvllm"], r["runc"])]
        if have_llama:
            r["llama_cpp"] = None if "temperature" in params else median(
                lambda: llama_cpp_once(model, kind, params, THREADS), repeats)
            row += [fmt(r["llama_cpp"]), ratio(r["pvllm"], r["llama_cpp"])]
        if kind == "prefill":
            flops = flops_per_prompt(model, params["prompt"]) / params["prompt"] * r["pvllm"]
            r["gflops"] = flops * 1e-9
            r["fma_peak_fraction"] = r["gflops"] / roof["fma_gflops"]
            row.append(f"{r['gflops']:.0f} GFLOP/s = {100 * r['fma_peak_fraction']:.0f}% of FMA peak")
        elif kind == "decode":
            roof_tps = roof["dram_gbs"] * 1e9 / weight_bytes_per_token(model)
            r["roofline_tps"] = roof_tps
            note = " (weights in cache)" if model == "260K" else ""
            row.append(f"{fmt(roof_tps)} tok/s: {100 * r['pvllm'] / roof_tps:.0f}%{note}")
        else:
            row.append("-")
        print("| " + " | ".join(row) + " |", flush=True)
        results.append(r)
    for model in ("260K", "110M"):
        r = {"key": f"startup_{model}", "work": "startup (ms)", "model": model}
        r["pvllm"] = 1000 * startup_seconds(PVLLM, model)
        row = ["startup, ms (generate 1 token)", model, fmt(r["pvllm"]), "-", "-"]
        if baseline:
            r["baseline"] = 1000 * startup_seconds(baseline, model)
            row += [fmt(r["baseline"]), ratio(r["baseline"], r["pvllm"])]
        row += ["-", "-"] * (bool(runc) + have_llama) + ["-"]
        print("| " + " | ".join(row) + " |", flush=True)
        results.append(r)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"machine": roof, "threads": THREADS, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
