#!/usr/bin/env bash
# Regenerates pvllm-sys/src/bindings.rs from pvllm.h with the Debian 12
# `bindgen` CLI (0.60). The flags are fixed so the output is reproducible:
# enums as plain integer constants (a C enum value the Rust side does not know
# must not be undefined behaviour), size_t as usize, and formatting done here
# by `rustfmt --edition 2018` with its default style rather than by whatever
# bindgen finds (Debian's rustfmt 1.5 and rustup's 1.9 agree on this file).
#
# Usage: regen-bindings.sh [OUTPUT]   (default: pvllm-sys/src/bindings.rs)
# The header comes from $PVLLM_INCLUDE_DIR/pvllm/pvllm.h, else from this
# checkout's capi/include.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
include_dir="${PVLLM_INCLUDE_DIR:-$here/../../capi/include}"
header="$include_dir/pvllm/pvllm.h"
out="${1:-$here/pvllm-sys/src/bindings.rs}"
[ -f "$header" ] || { echo "regen-bindings: no header at $header" >&2; exit 1; }

# Run from the include folder with a relative header path so that no
# machine-specific path ends up in the output.
cd "$include_dir"
bindgen pvllm/pvllm.h \
  --no-rustfmt-bindings \
  --allowlist-function '^pvllm_.*' \
  --allowlist-type '^pvllm_.*' \
  --allowlist-var '^(pvllm|PVLLM)_.*' \
  --default-enum-style consts \
  --size_t-is-usize \
  --rust-target 1.47 \
  -- -I. | rustfmt --edition 2018 > "$out.tmp"
mv "$out.tmp" "$out"
