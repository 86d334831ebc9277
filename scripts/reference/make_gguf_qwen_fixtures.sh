#!/usr/bin/env bash
# Makes the tiny random-weight Qwen2 and Qwen3 GGUF fixtures in OUT (default
# tests/data/gguf) and llama.cpp's logits for them in OUT/ref:
#
#   tiny-qwen2-{F32,Q8_0,Q4_K_M}.gguf  qwen2: q/k/v biases, tied classifier
#   tiny-qwen3-{F32,Q8_0,Q4_K_M}.gguf  qwen3: per-head q/k RMSNorm, head
#                                      dimension 32 != hidden 64 / 4 heads,
#                                      its own classifier
#
# The F32 files are written by make_gguf_qwen_model.py with llama.cpp's
# gguf-py, laid out as llama.cpp's Hugging Face converter lays out these
# architectures; the others by llama-quantize. The logits come from
# gguf_logits_dump.cc (see make_gguf_fixtures.sh, which calls this script
# and then writes every fixture's tensors.json, metadata.json and manifest
# entry).
#
# Usage:
#   make_gguf_qwen_fixtures.sh LLAMA_CPP_BUILD LLAMA_CPP_SRC QWEN3_BUILD QWEN3_SRC
#
#   LLAMA_CPP_BUILD/SRC  llama.cpp at the commit the other fixtures pin
#                        (make_gguf_fixtures.sh): makes the qwen2 files
#   QWEN3_BUILD/SRC      a llama.cpp that knows "qwen3" (the pinned commit,
#                        of February 2025, predates it): release b5640, as
#                        build_llama_cpp_b5640.sh builds it; makes the qwen3
#                        files, and checks that it gives the pinned build's
#                        logits on the qwen2 files
#
# Optional environment: OUT (default tests/data/gguf); MADE_BY (a file to
# which "file<TAB>command" lines are appended, for the manifest); PYTHON
# (default /usr/bin/python3; needs numpy).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ $# -ne 4 ]; then
  sed -n '2,29p' "$0" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
src="$(cd "$2" && pwd)"
build3="$(cd "$3" && pwd)"
src3="$(cd "$4" && pwd)"
out="$(cd "${OUT:-$root/tests/data/gguf}" && pwd)"
made_by="${MADE_BY:-/dev/null}"
python="${PYTHON:-/usr/bin/python3}"
ref="$out/ref"
mkdir -p "$ref"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export LC_ALL=C
log="$work/log"
for b in "$build" "$build3"; do
  [ -x "$b/bin/llama-quantize" ] || { echo "missing $b/bin/llama-quantize" >&2; exit 1; }
done

# gguf_logits_dump against each llama.cpp.
cxx="${CXX:-c++}"
dump() {  # dump BUILD SRC OUTPUT
  "$cxx" -O2 -std=c++17 "$here/gguf_logits_dump.cc" -I"$2/ggml/include" -I"$2/include" \
    -L"$1/bin" "-Wl,-rpath,$1/bin" -lllama -lggml-base -o "$3"
}
dump "$build" "$src" "$work/dump"
dump "$build3" "$src3" "$work/dump3"

printf '%s\n' \
  'Once upon a time' \
  'Lily and Ben went to the park.\nThey saw a big dog.' \
  'Tom had a red ball. He liked to throw it high in the sky and catch it with both hands. One day the ball went over the fence and into the garden of an old man. Tom was scared, but he knocked on the door and said sorry. The old man smiled and gave the ball back.' \
  'In 2025, 17 cats ate 3.5 fish: café — 日本語!' \
  >"$work/prompts.txt"

cd "$out"
text="$root/tests/data/gguf/kld_text.txt"  # the vocabulary's merges are learned from it
for arch in qwen2 qwen3; do
  if [ "$arch" = qwen2 ]; then b="$build" s="$src" d="$work/dump" by="llama.cpp c392e50"
  else b="$build3" s="$src3" d="$work/dump3" by="llama.cpp b5640"; fi
  f32="tiny-$arch-F32.gguf"
  "$python" "$here/make_gguf_qwen_model.py" "$s/gguf-py" "$arch" "$text" "$f32"
  printf '%s\tmake_gguf_qwen_model.py <gguf-py of %s> %s kld_text.txt %s\n' "$f32" "$by" "$arch" "$f32" >>"$made_by"
  for t in Q8_0 Q4_K_M; do
    f="tiny-$arch-$t.gguf"
    "$b/bin/llama-quantize" "$f32" "$f" "$t" 1 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
    printf '%s\tllama-quantize (%s) %s %s %s 1\n' "$f" "$by" "$f32" "$f" "$t" >>"$made_by"
  done
  for t in F32 Q8_0 Q4_K_M; do
    f="tiny-$arch-$t"
    "$d" "$f.gguf" "$work/prompts.txt" "$f.gguf" >"$ref/$f.logits.json"
  done
done

# The newer llama.cpp computes the pinned one's logits on the qwen2 files.
for t in F32 Q8_0 Q4_K_M; do
  "$work/dump3" "tiny-qwen2-$t.gguf" "$work/prompts.txt" "tiny-qwen2-$t.gguf" >"$work/qwen2-$t.b5640.json"
  "$python" - "$ref/tiny-qwen2-$t.logits.json" "$work/qwen2-$t.b5640.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
worst = 0.0
for pa, pb in zip(a["prompts"], b["prompts"], strict=True):
    assert pa["tokens"] == pb["tokens"], "the two llama.cpp builds tokenize differently"
    for qa, qb in zip(pa["positions"], pb["positions"], strict=True):
        assert qa["top"][0][0] == qb["top"][0][0], "the two builds' top tokens differ"
        other = dict(map(tuple, qb["top"]))
        worst = max([worst] + [abs(v - other[i]) for i, v in qa["top"] if i in other])
print("%s: b5640 against the pinned llama.cpp, largest top-10 logit difference %.3g"
      % (a["file"], worst))
assert worst < 1e-3, "the two llama.cpp builds disagree on qwen2"
PY
done
