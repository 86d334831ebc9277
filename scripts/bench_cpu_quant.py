#!/usr/bin/env python3
"""Quantized weights on the CPU: pvllm beside llama.cpp on llama.cpp's own
files, the quantized rows of docs/performance.md. Run through
`scripts/bench_cpu.sh --quantized` (which builds what it needs); needs
LLAMA_CPP_BIN (a llama.cpp build's bin/: llama-bench, llama-batched-bench,
llama-convert-llama2c-to-ggml, llama-quantize).

Models: random-weight llama2.c checkpoints in the 110M shape (dim 768, 12
layers, 12 heads, hidden 2048) and the TinyLlama-1.1B shape (dim 2048, 22
layers, 32 heads, 4 KV heads, hidden 5632), vocabulary 32000, turned into
an F32 GGUF by llama-convert-llama2c-to-ggml (1.1B: by llama.cpp's gguf-py
through scripts/llama2c_to_gguf.py, as that converter cannot hold it;
needs python3-numpy, python3-sentencepiece and python3-yaml from Debian
for /usr/bin/python3) and quantized by
llama-quantize to Q4_0, Q8_0 and Q4_K_M (written once into
BUILD/bench-models). Both engines run the very same files.

Workloads, greedy, EOS ignored, PVLLM_BENCH_THREADS threads (default: the
CPUs this process may use):
  single stream  100 generated tokens (llama-bench -n 100)
  prefill        a 512-token prompt (llama-bench -p 512)
  64 concurrent  64 prompts of 16 tokens, 64 generated each
                 (llama-batched-bench -npl 64: its generation rate)
Roofline: decode, the bytes of the weights one token reads (every matrix
and the classifier, at their quantized sizes) over the memory bandwidth
measured now. Each figure is the median of three runs, with the range;
--quick runs once. --json FILE also writes the figures. --shapes 110M
(or 1.1B) limits the models.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu as base  # noqa: E402  (the machine's rooflines, run(), the paths)

SHAPES = {
    # dim, hidden, layers, heads, kv_heads, vocab, seq_len
    "110M": (768, 2048, 12, 12, 12, 32000, 1024),
    "1.1B": (2048, 5632, 22, 32, 4, 32000, 2048),
}
TYPES = ("Q4_0", "Q8_0", "Q4_K_M")
SMALLEST = "110M"


def bindir():
    b = base.env("LLAMA_CPP_BIN")
    if not b:
        sys.exit("bench_cpu_quant: set LLAMA_CPP_BIN to a llama.cpp build's bin/ folder")
    return b


def make_files(shape):
    """The F32 GGUF of a random checkpoint of `shape`, and its quantized files."""
    os.makedirs(base.MODELS, exist_ok=True)
    ckpt = os.path.join(base.MODELS, f"random{shape}.bin")
    if not os.path.exists(ckpt):
        base.run([os.path.join(base.BUILD, "bench", "cpu_make_llama2c_model"), ckpt] +
                 [str(v) for v in SHAPES[shape]])
    f32 = os.path.join(base.MODELS, f"random{shape}-F32.gguf")
    if not os.path.exists(f32) and shape != SMALLEST:
        # llama-convert-llama2c-to-ggml aborts past about 2 GiB of weights:
        # gguf-py writes the larger shapes, with the smallest's metadata.
        template = make_files(SMALLEST)["F32"]
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        base.run([python, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "llama2c_to_gguf.py"), ckpt, template, f32])
    if not os.path.exists(f32):
        base.run([os.path.join(bindir(), "llama-convert-llama2c-to-ggml"), "--copy-vocab-from-model",
                  os.path.join(base.SHARED, "models", "llama2-tokenizer", "tokenizer.bin"),
                  "--llama2c-model", ckpt, "--llama2c-output-model", f32])
        set_context_length(f32, SHAPES[shape][6])
    files = {"F32": f32}
    for t in TYPES:
        out = os.path.join(base.MODELS, f"random{shape}-{t}.gguf")
        if not os.path.exists(out):
            base.run([os.path.join(bindir(), "llama-quantize"), f32, out, t, str(base.THREADS)])
        files[t] = out
    return files


def set_context_length(path, n):
    """llama-convert-llama2c-to-ggml writes llama.context_length 128 whatever
    the checkpoint's seq_len; the value is set to the checkpoint's in place
    (a u32 after its key), so both engines may take 512-token prompts."""
    key = b"llama.context_length"
    with open(path, "r+b") as f:
        head = f.read(1 << 20)
        at = head.find(key)
        if at < 0 or head[at + len(key):at + len(key) + 4] != (4).to_bytes(4, "little"):
            raise RuntimeError(f"{path}: no u32 llama.context_length in its header")
        f.seek(at + len(key) + 4)
        f.write(n.to_bytes(4, "little"))


def read_bytes_per_token(path):
    """The bytes of the tensors one decoded token reads: all but the
    embedding table (unless it is also the classifier), from pvllm inspect."""
    out = base.run([base.PVLLM, "inspect", path])
    sizes = {}
    in_table = False
    for line in out.splitlines():
        if line.startswith("tensor table"):
            in_table = True
            continue
        if in_table:
            cells = line.split()
            if not cells:
                break
            if len(cells) >= 5 and cells[3].isdigit():
                sizes[cells[0]] = int(cells[3])
    tied = "output.weight" not in sizes
    return sum(v for k, v in sizes.items() if k != "token_embd.weight" or tied)


WORK = [
    ("single stream", "decode", {"tokens": 100}),
    ("prefill (512 tokens)", "prefill", {"prompt": 512}),
    ("64 concurrent", "batch", {"requests": 64, "prompt": 16, "tokens": 64}),
]

def pvllm_once(path, kind, params, threads):
    cmd = ["/usr/bin/time", "-f", "maxrss_kb %M", base.PVLLM, "generate", "--model", path, "-t",
           "0", "--ignore-eos", "--threads", str(threads)]
    cmd += base.workload_args(kind, params)
    out = base.run(cmd)
    m = base.SUMMARY.search(out)
    if not m:
        raise RuntimeError(f"no summary from pvllm generate: {out[-500:]}")
    seconds, gen_rate, prompt_tokens = float(m.group(1)), float(m.group(2)), float(m.group(3))
    rss = int(re.search(r"maxrss_kb (\d+)", out).group(1)) * 1024
    return (prompt_tokens / seconds if kind == "prefill" else gen_rate), rss


def llama_once(path, kind, params, threads):
    if kind in ("decode", "prefill"):
        pp, tg = (0, params["tokens"]) if kind == "decode" else (params["prompt"], 0)
        out = base.run([os.path.join(bindir(), "llama-bench"), "-m", path, "-p", str(pp), "-n",
                        str(tg), "-t", str(threads), "-r", "1", "-o", "json"])
        data = json.loads(out[out.index("["):out.rindex("]") + 1])
        return float(data[0]["avg_ts"])
    n, p, t = params["requests"], params["prompt"], params["tokens"]
    out = base.run([os.path.join(bindir(), "llama-batched-bench"), "-m", path, "-c",
                    str(n * (p + t)), "-b", "2048", "-ub", "512", "-npp", str(p), "-ntg", str(t),
                    "-npl", str(n), "-t", str(threads)])
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and cells[0] == str(p) and cells[2] == str(n):
            return float(cells[7])
    return None


def spread(values):
    return statistics.median(values), min(values), max(values)


def main():
    quick = "--quick" in sys.argv
    json_path = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    shapes = [sys.argv[sys.argv.index("--shapes") + 1]] if "--shapes" in sys.argv else list(SHAPES)
    repeats = 1 if quick else 3
    roof = base.roofline()
    commit = base.env("LLAMA_CPP_COMMIT", "unknown")
    print(f"# bench_cpu --quantized: {time.strftime('%Y-%m-%d %H:%M')}, {base.THREADS} threads, "
          f"kernels {roof['isa']}; memory bandwidth measured now {roof['dram_gbs']:.1f} GB/s; "
          f"llama.cpp {commit}")
    print(f"# figures: tokens/s, median of {repeats} runs [min-max]; pvllm/llama.cpp on the "
          "medians; pvllm's peak resident memory (weights, KV cache, activations, tokenizer) "
          "beside the file's size")
    print("| model | type | work | pvllm | llama.cpp | pvllm/llama.cpp | roofline | pvllm RSS / file |")
    print("|---|---|---|---|---|---|---|---|")
    results = []
    for shape in shapes:
        files = make_files(shape)
        for t in TYPES:
            path = files[t]
            token_bytes = read_bytes_per_token(path)
            for label, kind, params in WORK:
                ours, rss = [], 0
                for _ in range(repeats):
                    v, r = pvllm_once(path, kind, params, base.THREADS)
                    ours.append(v)
                    rss = max(rss, r)
                theirs = [llama_once(path, kind, params, base.THREADS) for _ in range(repeats)]
                o, olo, ohi = spread(ours)
                l, llo, lhi = spread(theirs) if all(theirs) else (None, None, None)
                row = {"model": shape, "type": t, "work": label, "pvllm": ours, "llama_cpp": theirs,
                       "weight_bytes_per_token": token_bytes, "max_rss": rss}
                roof_txt = "-"
                if kind == "decode":
                    roof_tps = roof["dram_gbs"] * 1e9 / token_bytes
                    row["roofline_tps"] = roof_tps
                    roof_txt = f"{roof_tps:.1f} tok/s: {100 * o / roof_tps:.0f}%"
                file_bytes = os.path.getsize(path)
                theirs_txt = f"{l:.1f} [{llo:.1f}-{lhi:.1f}]" if l else "-"
                ratio_txt = f"{o / l:.2f}" if l else "-"
                print(f"| {shape} | {t} | {label} | {o:.1f} [{olo:.1f}-{ohi:.1f}] | {theirs_txt} | "
                      f"{ratio_txt} | {roof_txt} | {rss / 2**20:.0f} / {file_bytes / 2**20:.0f} MiB |",
                      flush=True)
                results.append(row)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"machine": roof, "threads": base.THREADS, "llama_cpp": commit,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
