#!/usr/bin/env bash
# ctest script: what a new user tries first, with the repository's own
# stories260K (models/stories260K: a .bin, tok512.model beside it).
#   - every command that takes a model takes every path `generate` takes
#     (the .bin, its folder, a .pvllm made by convert) and gives the same ids;
#   - load progress in a log (stderr not a terminal) is one line per stage;
#   - beam search from the command line (--beam-width, --length-penalty,
#     --early-stopping);
#   - `chat` and `chat-template` take --chat-template for a model without one;
#   - the example in each command's --help runs as written, from the root of
#     the source tree.
# Usage: first_contact_smoke.sh PVLLM SOURCE_DIR WORK
set -euo pipefail
pvllm_bin="$1"
src="$2"
work="$3"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "first_contact_smoke: FAIL: $*" >&2; exit 1; }

bin="$src/models/stories260K/stories260K.bin"
folder="$src/models/stories260K"
packed="$work/stories260K.pvllm"
"$pvllm_bin" convert "$bin" "$packed" -q >/dev/null || fail "convert $bin"

# --- every path, the same ids ---------------------------------------------
expected="$("$pvllm_bin" tokenize "$bin" --text "Hello world")"
[ "$expected" = "1 346 306 414 263 304 341" ] || fail "tokenize $bin printed '$expected'"
for path in "$folder" "$packed" "$folder/tok512.model"; do
  got="$("$pvllm_bin" tokenize "$path" --text "Hello world")" || fail "tokenize $path"
  [ "$got" = "$expected" ] || fail "tokenize $path printed '$got', the .bin '$expected'"
  text="$(echo "$expected" | "$pvllm_bin" detokenize "$path")" || fail "detokenize $path"
  [ "$text" = "Hello world" ] || fail "detokenize $path printed '$text'"
done
for path in "$bin" "$folder" "$packed"; do
  out="$("$pvllm_bin" generate --model "$path" --prompt "Once upon a time" --max-tokens 8 \
         --temperature 0 -q)" || fail "generate --model $path"
  [ -n "${first:-}" ] || first="$out"
  [ "$out" = "$first" ] || fail "generate --model $path printed '$out', not '$first'"
  "$pvllm_bin" inspect "$path" >/dev/null || fail "inspect $path"
done
if "$pvllm_bin" tokenize "$src/tools" --text hi 2>"$work/err.txt"; then
  fail "tokenize took a folder without a model"
fi
grep -q "tokenizer.model" "$work/err.txt" || fail "the refusal does not say what was looked for: $(cat "$work/err.txt")"

# --- one progress line per stage in a log ---------------------------------
"$pvllm_bin" generate --model "$bin" --prompt "Once" --max-tokens 2 2>"$work/log.txt" >/dev/null
stages="$(grep -c '^pvllm: ' "$work/log.txt")"
distinct="$(grep '^pvllm: ' "$work/log.txt" | sed 's/ ([0-9]*%)$//' | sort -u | wc -l)"
[ "$stages" -le 8 ] || fail "$stages progress lines in a log:\n$(cat "$work/log.txt")"
[ "$stages" -eq "$distinct" ] || fail "a stage printed twice:\n$(cat "$work/log.txt")"
grep -q "reading weights" "$work/log.txt" || fail "no stage line: $(cat "$work/log.txt")"

# --- beam search ------------------------------------------------------------
"$pvllm_bin" generate --model "$bin" --prompt "Once upon a time" --max-tokens 12 \
  --beam-width 3 -n 2 --length-penalty 1.0 --early-stopping true --json -q >"$work/beam.jsonl" ||
  fail "generate --beam-width"
[ "$(wc -l <"$work/beam.jsonl")" -eq 2 ] || fail "expected 2 hypotheses: $(cat "$work/beam.jsonl")"
python3 - "$work/beam.jsonl" <<'EOF' || fail "beam output"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
scores = [r["score"] for r in rows]
assert [r["sample"] for r in rows] == [0, 1], rows
assert scores[0] >= scores[1] and scores[0] < 0, scores
assert rows[0]["token_ids"] != rows[1]["token_ids"], rows
EOF
if "$pvllm_bin" generate --model "$bin" --prompt "x" --beam-width 2 --top-k 5 -q \
  >/dev/null 2>"$work/err.txt"; then
  fail "beam search with top-k was accepted"
fi
grep -q "INVALID_ARGUMENT" "$work/err.txt" || fail "beam refusal: $(cat "$work/err.txt")"

# --- a chat template for a model that ships none ----------------------------
template="$src/examples/chat_template.jinja"
if echo '[{"role": "user", "content": "Hi"}]' |
  "$pvllm_bin" chat-template "$bin" --messages - 2>"$work/err.txt" >/dev/null; then
  fail "chat-template rendered a model without a template"
fi
grep -q "NOT_FOUND" "$work/err.txt" || fail "no NOT_FOUND: $(cat "$work/err.txt")"
prompt="$(echo '[{"role": "user", "content": "Hi"}]' |
  "$pvllm_bin" chat-template "$bin" --messages - --chat-template "$template")"
[ "$prompt" = "$(printf '<s>User: Hi\nAssistant:')" ] || fail "chat-template printed '$prompt'"
printf 'Tell me a story\n' |
  "$pvllm_bin" chat "$folder" --chat-template "$template" --max-tokens 6 --temperature 0 -q \
    --print-prompt >"$work/chat.txt" 2>"$work/chat_err.txt" || fail "chat: $(cat "$work/chat_err.txt")"
grep -q "^<s>User: Tell me a story" "$work/chat_err.txt" || fail "chat prompt: $(cat "$work/chat_err.txt")"
[ -s "$work/chat.txt" ] || fail "chat printed no reply"

# --- the examples in --help --------------------------------------------------
# Each command's help shows an example; the first one must run as written
# from the source root (in a copy of the paths it names, so nothing is
# written into the tree).
mkdir -p "$work/root"
for part in models tests examples; do ln -s "$src/$part" "$work/root/$part"; done
mkdir -p "$work/bin"
ln -s "$pvllm_bin" "$work/bin/pvllm"
for command in generate inspect convert bench tokenize detokenize chat-template chat; do
  example="$("$pvllm_bin" "$command" --help | sed -n '/^Examples\?:/,$p' | grep -m1 '^  .*pvllm ')" ||
    fail "pvllm $command --help shows no example"
  echo "first_contact_smoke: $command: $example"
  (cd "$work/root" && PATH="$work/bin:$PATH" bash -c "set -o pipefail; { ${example}; } < /dev/null" \
    >"$work/example.txt" 2>&1) || fail "the example of '$command' failed: $example\n$(cat "$work/example.txt")"
done
echo "first_contact_smoke: OK"
