#!/usr/bin/env bash
# Remakes the GGUF fixtures in tests/data/gguf/ and their reference outputs in
# tests/data/gguf/ref/ from the repository's stories260K checkpoint,
# with llama.cpp's own tools (and, for the types llama-quantize refuses for
# this model, ggml's own quantizers through gguf_quantize_pure.cc), and the
# tiny random-weight Qwen2 and Qwen3 files (make_gguf_qwen_fixtures.sh).
# tests/data/gguf/SOURCE.md says what each file is.
#
# Usage:
#   scripts/reference/make_gguf_fixtures.sh LLAMA_CPP_BUILD LLAMA_CPP_SRC [QWEN3_BUILD QWEN3_SRC]
#   (or set LLAMA_CPP_BUILD, LLAMA_CPP_SRC, QWEN3_LLAMA_CPP_BUILD, QWEN3_LLAMA_CPP_SRC)
#
#   LLAMA_CPP_BUILD  a CPU build of llama.cpp (its bin/ holds the tools and the
#                    shared libraries), with at least the targets llama-quantize
#                    llama-tokenize llama-gguf-split llama-convert-llama2c-to-ggml
#                    llama-perplexity
#   LLAMA_CPP_SRC    its source tree (for ggml.h, gguf.h, llama.h)
#   QWEN3_BUILD/SRC  llama.cpp release b5640, built by build_llama_cpp_b5640.sh
#                    (the qwen3 fixtures: the pinned commit predates qwen3)
#
# Optional environment:
#   LLAMA_CPP_COMMIT the source's commit, when LLAMA_CPP_SRC is not a git work
#                    tree (an export of one); else `git rev-parse HEAD` there
#   GGUF_NPM_DIR     where scripts/reference/install.sh puts the npm reference
#                    packages (default build/reference)
#   OUT              output folder (default tests/data/gguf)
#
# The fixtures were made with llama.cpp at the commit pinned below (PINNED_COMMIT),
# a Release build for the CPU only, without tuning for the build machine's CPU
# (GGML_NATIVE off, so the x86-64 build has AVX2/FMA/F16C kernels) and without
# OpenMP, on x86-64 with GCC. The quantizers and dequantizers are ggml-base's
# plain C (no CPU-specific flags), so another x86-64 build should write the
# same bytes; the logits come from ggml-cpu's SIMD kernels and may differ in
# their last bits on another build or CPU.
# Another commit may write other bytes; the script says so and goes on.
#
# Deterministic: every step is a pure function of its inputs (quantization is
# row by row, one thread; the logits are computed on one thread). Running it
# twice gives the same files, byte for byte. Compare the logits with a
# tolerance all the same (see above).
#
# Needs: bash, a C++17 compiler, python3 (the standard library; numpy for
# the Qwen files), node >= 20 and npm (for @huggingface/gguf, through
# install.sh).
set -euo pipefail

PINNED_COMMIT=c392e5094deaf2d1a7c18683214f007fad3fe42b

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-${LLAMA_CPP_BUILD:-}}"
src="${2:-${LLAMA_CPP_SRC:-}}"
build3="${3:-${QWEN3_LLAMA_CPP_BUILD:-}}"
src3="${4:-${QWEN3_LLAMA_CPP_SRC:-}}"
if [ -z "$build" ] || [ -z "$src" ] || [ -z "$build3" ] || [ -z "$src3" ]; then
  sed -n '2,27p' "$0" >&2
  exit 2
fi
build="$(cd "$build" && pwd)"
src="$(cd "$src" && pwd)"
build3="$(cd "$build3" && pwd)"
src3="$(cd "$src3" && pwd)"
bin="$build/bin"
for tool in llama-quantize llama-tokenize llama-gguf-split llama-convert-llama2c-to-ggml llama-perplexity; do
  [ -x "$bin/$tool" ] || { echo "missing $bin/$tool (build that target)" >&2; exit 1; }
done
commit="${LLAMA_CPP_COMMIT:-}"
if [ -z "$commit" ] && [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$src" ]; then
  commit="$(git -C "$src" rev-parse HEAD)"
fi
if [ -z "$commit" ]; then
  echo "cannot tell llama.cpp's commit: set LLAMA_CPP_COMMIT" >&2
  exit 1
fi
if [ "$commit" != "$PINNED_COMMIT" ]; then
  echo "warning: llama.cpp at $commit, the fixtures were made at $PINNED_COMMIT; outputs may differ" >&2
fi

out="${OUT:-$root/tests/data/gguf}"
ref="$out/ref"
model="$root/models/stories260K"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export LC_ALL=C

# --- the helper programs, built against this llama.cpp -----------------------
cxx="${CXX:-c++}"
inc=(-I"$src/ggml/include" -I"$src/include")
link=(-L"$bin" "-Wl,-rpath,$bin")
"$cxx" -O2 -std=c++17 "$here/gguf_dequant_dump.cc" "${inc[@]}" "${link[@]}" -lggml-base -o "$work/gguf_dequant_dump"
"$cxx" -O2 -std=c++17 "$here/gguf_quantize_pure.cc" "${inc[@]}" "${link[@]}" -lggml-base -o "$work/gguf_quantize_pure"
"$cxx" -O2 -std=c++17 "$here/gguf_logits_dump.cc" "${inc[@]}" "${link[@]}" -lllama -lggml-base -o "$work/gguf_logits_dump"
node_modules="$(dirname "$(bash "$here/install.sh" "${GGUF_NPM_DIR:-$root/build/reference}")")"

mkdir -p "$out" "$ref"
# (ref/vocab_*.tokenize.json are make_gguf_vocab_refs.sh's: kept.)
rm -f "$out"/*.gguf
find "$ref" -maxdepth 1 -name '*.json' ! -name 'vocab_*.tokenize.json' -delete
cp "$model/LICENSE" "$out/LICENSE"
cd "$out"
log="$work/log"

# --- 1. F32: llama.cpp's llama2.c converter ----------------------------------
# Its vocabulary comes from a llama2.c tokenizer.bin, made here from
# tok512.model the way llama2.c's tokenizer.py export makes it.
python3 "$here/spm_to_llama2c_vocab.py" "$model/tok512.model" "$work/tok512.bin"
(cd "$work" && "$bin/llama-convert-llama2c-to-ggml" --copy-vocab-from-model tok512.bin \
  --llama2c-model "$model/stories260K.bin" --llama2c-output-model f32.gguf >"$log" 2>&1) ||
  { cat "$log" >&2; exit 1; }
cp "$work/f32.gguf" stories260K-F32.gguf
f32=stories260K-F32.gguf

declare -A made_by
made_by[$f32]="llama-convert-llama2c-to-ggml --copy-vocab-from-model tok512.bin --llama2c-model stories260K.bin"

# --- 2. llama-quantize: the types it can make for this model -----------------
# (file name suffix = the type argument given to llama-quantize)
for t in F16 BF16 Q2_K Q3_K_M Q4_K_S Q4_K_M Q5_K_M Q6_K IQ4_XS; do
  f="stories260K-$t.gguf"
  "$bin/llama-quantize" "$f32" "$f" "$t" 1 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  made_by[$f]="llama-quantize stories260K-F32.gguf $f $t 1"
done
# These it refuses ("Unsupported tensor size encountered": ffn_down rows are
# 172 wide, not a multiple of 32, and it has no fallback for these types).
for t in Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL; do
  if "$bin/llama-quantize" "$f32" "$work/refused.gguf" "$t" 1 >"$log" 2>&1; then
    echo "llama-quantize made $t after all: add it to the list above" >&2
    exit 1
  fi
  grep -q "Unsupported tensor size encountered" "$log" || { cat "$log" >&2; exit 1; }
done

# --- 3. ggml's quantizers where llama-quantize refuses (see gguf_quantize_pure.cc)
for t in Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL; do
  f="stories260K-$t-pure.gguf"
  "$work/gguf_quantize_pure" model "$f32" "$f" "$t" 2>"$log" || { cat "$log" >&2; exit 1; }
  made_by[$f]="gguf_quantize_pure model stories260K-F32.gguf $f $t"
done
"$work/gguf_quantize_pure" zoo "$f32" ggml-type-zoo.gguf
made_by[ggml-type-zoo.gguf]="gguf_quantize_pure zoo stories260K-F32.gguf ggml-type-zoo.gguf"

# --- 4. llama-gguf-split: Q4_K_M in 3 parts --------------------------------
"$bin/llama-gguf-split" --split --split-max-tensors 20 stories260K-Q4_K_M.gguf stories260K-Q4_K_M-split \
  >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
for f in stories260K-Q4_K_M-split-0000?-of-00003.gguf; do
  made_by[$f]="llama-gguf-split --split --split-max-tensors 20 stories260K-Q4_K_M.gguf stories260K-Q4_K_M-split"
done
# Merged back, the parts give the same tensors (checked below).
"$bin/llama-gguf-split" --merge stories260K-Q4_K_M-split-00001-of-00003.gguf "$work/merged.gguf" \
  >"$log" 2>&1 || { cat "$log" >&2; exit 1; }

# --- 4b. the tiny Qwen2 and Qwen3 files, and llama.cpp's logits for them ------
OUT="$out" MADE_BY="$work/made_by_qwen" bash "$here/make_gguf_qwen_fixtures.sh" "$build" "$src" "$build3" "$src3"
while IFS=$'\t' read -r f cmd; do made_by[$f]="$cmd"; done <"$work/made_by_qwen"

# --- 5. reference outputs -----------------------------------------------------
fixtures=(*.gguf)
for f in "${fixtures[@]}"; do
  base="${f%.gguf}"
  "$work/gguf_dequant_dump" "$f" >"$ref/$base.tensors.json"
  node "$here/gguf_metadata_dump.mjs" "$node_modules" "$f" >"$ref/$base.metadata.json"
done
"$work/gguf_dequant_dump" "$work/merged.gguf" merged >"$work/merged.tensors.json"

# Logits: F32, F16, two pure legacy files, a llama-quantize mix, and the split
# file (which must give the Q4_K_M file's logits exactly).
printf '%s\n' \
  'Once upon a time' \
  'Lily and Ben went to the park.\nThey saw a big dog.' \
  'Tom had a red ball. He liked to throw it high in the sky and catch it with both hands. One day the ball went over the fence and into the garden of an old man. Tom was scared, but he knocked on the door and said sorry. The old man smiled and gave the ball back.' \
  >"$work/prompts.txt"
for f in stories260K-F32 stories260K-F16 stories260K-Q8_0-pure stories260K-Q4_0-pure stories260K-Q4_K_M; do
  "$work/gguf_logits_dump" "$f.gguf" "$work/prompts.txt" "$f.gguf" >"$ref/$f.logits.json"
done
"$work/gguf_logits_dump" stories260K-Q4_K_M-split-00001-of-00003.gguf "$work/prompts.txt" stories260K-Q4_K_M.gguf \
  >"$work/split.logits.json"
cmp -s "$work/split.logits.json" "$ref/stories260K-Q4_K_M.logits.json" ||
  { echo "the split Q4_K_M gives other logits than the single file" >&2; exit 1; }

# Tokenizer ids, and the checks and manifest, in Python (standard library).
MADE_BY="$(for k in "${!made_by[@]}"; do printf '%s\t%s\n' "$k" "${made_by[$k]}"; done)" \
COMMIT="$commit" TOKENIZE="$bin/llama-tokenize" WORK="$work" python3 - "$ref" <<'PY'
import hashlib, json, os, subprocess, sys, glob

ref = sys.argv[1]
work = os.environ["WORK"]

# (b) llama-tokenize on the F32 file, prompt bytes on stdin, no escape processing.
prompts = [
    "Once upon a time",
    "",
    " ",
    "  two  spaces  ",
    "Hello world\n",
    "\n",
    "line one\nline two\n\nline four",
    "\ttab, then a trailing space ",
    "Lily's cat said: \"Hi!\" (42% of 1234567890)",
    "caf\u00e9 na\u00efve \u2014 \u65e5\u672c\u8a9e \U0001F642",
    "<s> and </s> and <unk> as text",
    "The quick brown fox jumps over the lazy dog.",
    "a",
    "\u2581already \u2581escaped",
]
variants = {"default": [], "no_bos": ["--no-bos"], "no_parse_special": ["--no-parse-special"]}
cases = []
for p in prompts:
    case = {"prompt": p}
    for name, flags in variants.items():
        r = subprocess.run([os.environ["TOKENIZE"], "-m", "stories260K-F32.gguf", "--stdin", "--no-escape",
                            "--ids", "--log-disable"] + flags, input=p.encode("utf-8"),
                           capture_output=True, check=True)
        case[name] = json.loads(r.stdout.decode().strip().splitlines()[-1])
    cases.append(case)
with open(os.path.join(ref, "tokenize.json"), "w") as f:
    f.write('{"tool": "llama-tokenize", "model": "stories260K-F32.gguf", "llama_cpp_commit": "%s",\n'
            % os.environ["COMMIT"])
    f.write(' "flags": {"all": ["--stdin", "--no-escape", "--ids", "--log-disable"], "default": [],'
            ' "no_bos": ["--no-bos"], "no_parse_special": ["--no-parse-special"]},\n')
    f.write(' "cases": [\n')
    f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
    f.write("\n]}\n")

# The merged split gives the Q4_K_M file's tensors.
def tensors(path):
    return [{k: v for k, v in t.items()} for t in json.load(open(path))["tensors"]]
a = tensors(os.path.join(ref, "stories260K-Q4_K_M.tensors.json"))
b = tensors(os.path.join(work, "merged.tensors.json"))
strip = lambda ts: [(t["name"], t["type"], t["ne"], t["raw_sha256"]) for t in ts]
assert strip(a) == strip(b), "merged split differs from stories260K-Q4_K_M.gguf"
parts = []
for p in sorted(glob.glob(os.path.join(ref, "stories260K-Q4_K_M-split-*.tensors.json"))):
    parts += strip(tensors(p))
assert parts == strip(a), "split parts' tensors differ from stories260K-Q4_K_M.gguf"

# Manifest: every fixture, its size, SHA-256, how it was made, its tensor types.
made_by = dict(line.split("\t", 1) for line in os.environ["MADE_BY"].splitlines() if line)
files = []
for path in sorted(glob.glob("*.gguf")):
    data = open(path, "rb").read()
    ts = tensors(os.path.join(ref, path[:-5] + ".tensors.json"))
    counts = {}
    for t in ts:
        counts[t["type"]] = counts.get(t["type"], 0) + 1
    files.append({"file": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                  "made_by": made_by[path], "tensor_types": dict(sorted(counts.items()))})
with open(os.path.join(ref, "manifest.json"), "w") as f:
    f.write('{"llama_cpp_commit": "%s", "source": "models/stories260K (stories260K.bin, tok512.model);'
            ' tiny-qwen*: random weights (make_gguf_qwen_fixtures.sh)",\n' % os.environ["COMMIT"])
    f.write(' "files": [\n')
    f.write(",\n".join("  " + json.dumps(x) for x in files))
    f.write("\n]}\n")
for x in files:
    print("%-48s %9d  %s" % (x["file"], x["bytes"], " ".join("%s:%d" % kv for kv in x["tensor_types"].items())))
PY

# --- 6. llama-perplexity --kl-divergence of each quantized file against F32 ---
# over kld_text.txt (ref/kld.json; see make_gguf_kld_ref.sh).
bash "$here/make_gguf_kld_ref.sh" "$build" "$commit" "$out"
