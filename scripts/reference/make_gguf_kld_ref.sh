#!/usr/bin/env bash
# llama.cpp's own measure of each quantized stories260K file against its F32
# source: `llama-perplexity --kl-divergence` over tests/data/gguf/kld_text.txt,
# written to tests/data/gguf/ref/kld.json, which
# tests/integration/gguf_kld_test.cc and bench/gguf_kld.cc set pvllm's KLD
# beside. make_gguf_fixtures.sh calls it last; it can run alone on existing
# fixtures.
#
# Usage:
#   scripts/reference/make_gguf_kld_ref.sh LLAMA_CPP_BUILD LLAMA_CPP_COMMIT [OUT]
#
#   LLAMA_CPP_BUILD   a CPU build of llama.cpp whose bin/ holds llama-perplexity
#                     and llama-tokenize
#   LLAMA_CPP_COMMIT  its commit, recorded in kld.json
#   OUT               the fixture folder (default tests/data/gguf)
#
# What llama-perplexity does (examples/perplexity/perplexity.cpp at the pinned
# commit), recorded in kld.json's "chunking" and reproduced by pvllm's side:
#   - The text is read whole, less one trailing newline, and tokenized with
#     BOS first (common_tokenize(..., add_special = true), special tokens not
#     parsed).
#   - n_chunk = floor(n_tokens / n_ctx) chunks of n_ctx consecutive tokens
#     (chunk i is tokens [i*n_ctx, (i+1)*n_ctx)); the tail is dropped. Each
#     chunk's first token is replaced by BOS and the chunk is evaluated
#     alone, from an empty KV cache, at positions 0..n_ctx-1.
#   - Scored: the logits at positions n_ctx/2 .. n_ctx-2, each predicting the
#     chunk's next token: n_ctx - 1 - n_ctx/2 per chunk.
#   - The base run (--kl-divergence-base FILE, without --kl-divergence) saves,
#     per scored position, the F32 model's log-softmax quantized to 16 bits
#     (log-probabilities below max - 16 clamped there; a scale and an offset
#     per row), after a header holding n_ctx, n_vocab, n_chunk and the
#     tokens.
#   - The quantized run reads them back and per position takes
#     KLD = sum over tokens with base log p > -16 of p_base * (log p_base -
#     log q) (q: the quantized model's softmax, float; sum in double), the
#     top tokens of both (first maximum) and the quantized model's NLL of the
#     next token. Reported: the means over all scored positions of every
#     chunk ("Mean KLD", "Same top p", exp(mean NLL) = "Mean PPL(Q)"), each
#     with the standard error sqrt((E[x^2] - E[x]^2) / (count - 1)).
# Both runs: -c 128 (the model's context_length), -b 128 (one batch per
# chunk, one sequence at a time), -t 1; llama.cpp's defaults otherwise (an
# F16 K/V cache).
#
# Deterministic on one build (one thread); another build or CPU may differ in
# the last digits (ggml-cpu's SIMD kernels).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ $# -lt 2 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
bin="$(cd "$1" && pwd)/bin"
commit="$2"
out="$(cd "${3:-$root/tests/data/gguf}" && pwd)"
for tool in llama-perplexity llama-tokenize; do
  [ -x "$bin/$tool" ] || { echo "missing $bin/$tool (build that target)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export LC_ALL=C

n_ctx=128
flags=(-c "$n_ctx" -b "$n_ctx" -t 1)
text=kld_text.txt
base=stories260K-F32.gguf
quantized=(Q8_0-pure Q4_0-pure Q4_1-pure Q5_0-pure Q5_1-pure IQ4_NL-pure Q2_K Q3_K_M Q4_K_S Q4_K_M
           Q5_K_M Q6_K IQ4_XS F16 BF16)

cd "$out"
# The text lives in tests/data/gguf; another OUT gets a copy.
[ -f "$text" ] || cp "$root/tests/data/gguf/$text" "$text"
"$bin/llama-perplexity" -m "$base" -f "$text" "${flags[@]}" --kl-divergence-base "$work/base.bin" \
  >"$work/base.out" 2>"$work/base.err" || { cat "$work/base.err" >&2; exit 1; }
# The text as llama-perplexity reads it (one trailing newline dropped), through
# llama-tokenize: every token, the dropped tail included.
python3 -c 'import sys; t = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(t[:-1] if t.endswith(b"\n") else t)' \
  "$text" >"$work/text"
"$bin/llama-tokenize" -m "$base" --stdin --no-escape --no-parse-special --ids --log-disable \
  <"$work/text" >"$work/tokens" 2>/dev/null
for q in "${quantized[@]}"; do
  "$bin/llama-perplexity" -m "stories260K-$q.gguf" "${flags[@]}" --kl-divergence-base "$work/base.bin" \
    --kl-divergence >"$work/$q.out" 2>"$work/$q.err" || { cat "$work/$q.err" >&2; exit 1; }
done

COMMIT="$commit" WORK="$work" N_CTX="$n_ctx" FLAGS="${flags[*]}" TEXT="$text" BASE="$base" \
  QUANTIZED="${quantized[*]}" python3 - "$out/ref/kld.json" <<'PY'
import json, os, re, struct, sys

work = os.environ["WORK"]
n_ctx = int(os.environ["N_CTX"])
flags = os.environ["FLAGS"]
text, base = os.environ["TEXT"], os.environ["BASE"]

tokens = json.loads(open(os.path.join(work, "tokens")).read().strip().splitlines()[-1])
# base.bin: "_logits_", n_ctx, n_vocab, n_chunk (int32 each), then the chunks' tokens.
raw = open(os.path.join(work, "base.bin"), "rb").read()
assert raw[:8] == b"_logits_", "base.bin: bad magic"
ctx_, n_vocab, n_chunk = struct.unpack_from("<3i", raw, 8)
assert ctx_ == n_ctx
saved = list(struct.unpack_from("<%di" % (n_chunk * n_ctx), raw, 20))
assert saved == tokens[:n_chunk * n_ctx], "llama-perplexity tokenized the text otherwise than llama-tokenize"
assert n_chunk == len(tokens) // n_ctx
scored_per_chunk = n_ctx - 1 - n_ctx // 2

log = open(os.path.join(work, "base.err")).read()
m = re.search(r"calculating perplexity over (\d+) chunks, n_ctx=(\d+), batch_size=(\d+), n_seq=(\d+)", log)
assert m and int(m.group(1)) == n_chunk and int(m.group(2)) == n_ctx, "unexpected llama-perplexity log"
m = re.search(r"Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)", log)
base_ppl = [float(m.group(1)), float(m.group(2))]

def pm(pattern, s):
    m = re.search(pattern + r"\s*:?\s*(-?[\d.]+)\s*±\s*(-?[\d.]+)", s)
    assert m, pattern
    return [float(m.group(1)), float(m.group(2))]

files = []
for q in os.environ["QUANTIZED"].split():
    s = open(os.path.join(work, q + ".out")).read()
    chunks = re.findall(r"^\s*(\d+)\s+[\d.]+ ±", s, re.M)
    assert chunks and int(chunks[-1]) == n_chunk, q + ": chunk count"
    same = pm(r"Same top p", s)
    f = "stories260K-%s.gguf" % q
    files.append({
        "file": f,
        "mean_kld": pm(r"Mean    KLD", s),
        "same_top_p": [round(same[0] / 100, 7), round(same[1] / 100, 7)],
        "ppl": pm(r"Mean PPL\(Q\)", s),
        "ppl_base": pm(r"Mean PPL\(base\)", s),
        "ln_ppl_ratio": pm(r"Mean ln\(PPL\(Q\)/PPL\(base\)\)", s),
        "command": "llama-perplexity -m %s %s --kl-divergence-base base.bin --kl-divergence" % (f, flags),
    })

doc = {
    "tool": "llama-perplexity",
    "llama_cpp_commit": os.environ["COMMIT"],
    "text": text,
    "base_file": base,
    "base_command": "llama-perplexity -m %s -f %s %s --kl-divergence-base base.bin" % (base, text, flags),
    "tokenize_command": "llama-tokenize -m %s --stdin --no-escape --no-parse-special --ids "
                        "(the text less one trailing newline on stdin)" % base,
    "n_ctx": n_ctx,
    "n_vocab": n_vocab,
    "n_tokens": len(tokens),
    "n_chunks": n_chunk,
    "n_scored": n_chunk * scored_per_chunk,
    "chunking": "the text less one trailing newline, tokenized with BOS first; chunk i = tokens "
                "[i*n_ctx, (i+1)*n_ctx) for i < floor(n_tokens/n_ctx), its first token replaced by BOS, "
                "evaluated alone from an empty KV cache at positions 0..n_ctx-1; scored: the logits at "
                "positions n_ctx/2 .. n_ctx-2, each against the chunk's next token",
    "measure": "per scored position KLD = sum_i p_base(i) * (log p_base(i) - log q(i)) over the i with "
               "log p_base(i) > -16, p_base from the base run's log-softmax saved in 16 bits, q the "
               "quantized file's softmax; same_top_p: the fraction of positions where both argmaxes "
               "(first maximum) agree; ppl: exp(mean NLL of the next token) under the quantized file, "
               "ppl_base the same from the saved base log-probs; each [mean, standard error] over all "
               "scored positions, standard error sqrt((E[x^2] - E[x]^2) / (count - 1)) (for ppl, ppl "
               "times that of the NLL)",
    "precision": "values as llama-perplexity prints them: mean_kld, ppl and their errors to 6 decimals, "
                 "same_top_p to 5 (3 of the percentage); base_ppl (its perplexity run's final estimate, "
                 "from float log-probs) to 4",
    "base_ppl": base_ppl,
    "files": files,
    "tokens": tokens,
}
with open(sys.argv[1], "w") as f:
    f.write("{\n")
    for k, v in doc.items():
        if k not in ("files", "tokens"):
            f.write(" %s: %s,\n" % (json.dumps(k), json.dumps(v, ensure_ascii=False)))
    f.write(' "files": [\n' + ",\n".join("  " + json.dumps(x) for x in files) + "\n ],\n")
    f.write(' "tokens": ' + json.dumps(tokens) + "\n}\n")
json.load(open(sys.argv[1]))
for x in files:
    print("%-32s KLD %.6f ± %.6f  same top %.3f%%  PPL %.4f" % (
        x["file"], x["mean_kld"][0], x["mean_kld"][1], 100 * x["same_top_p"][0], x["ppl"][0]))
PY
