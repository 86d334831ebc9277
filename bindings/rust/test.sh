#!/usr/bin/env bash
# Tests the Rust SDK: checks that the committed bindings match pvllm.h, builds
# the workspace, runs its unit, integration and doc tests against the real
# library, then builds the examples in examples/rust and runs the streaming
# one on a tiny model.
#
# Needs (scripts/test.sh sets them): PVLLM_LIB_DIR, PVLLM_INCLUDE_DIR,
# PVLLM_MAKE_TINY_MODEL, and PVLLM_SHARED_DIR (may be empty: the stories260K
# tests then skip). Builds offline into bindings/rust/target only.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
examples="$here/../../examples/rust"

for var in PVLLM_LIB_DIR PVLLM_INCLUDE_DIR PVLLM_MAKE_TINY_MODEL; do
  if [ -z "${!var:-}" ]; then
    echo "rust: $var is not set" >&2
    exit 1
  fi
done
export LD_LIBRARY_PATH="$PVLLM_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="$here/target"
export PVLLM_SHARED_DIR="${PVLLM_SHARED_DIR:-}"
if [ -z "$PVLLM_SHARED_DIR" ]; then
  echo "rust: PVLLM_SHARED_DIR is empty: the stories260K tests will skip"
fi
# Two cores shared with other builds: keep cargo and the tests lean.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-2}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "rust: checking that pvllm-sys/src/bindings.rs is up to date"
bash "$here/regen-bindings.sh" "$tmp/bindings.rs"
if ! diff -u "$here/pvllm-sys/src/bindings.rs" "$tmp/bindings.rs"; then
  echo "rust: pvllm-sys/src/bindings.rs is stale; run bindings/rust/regen-bindings.sh" >&2
  exit 1
fi

# Run cargo from the workspace so .cargo/config.toml (offline, Debian's
# crate sources only) applies, to the examples too.
cd "$here"
cargo --version
cargo build --workspace --all-targets
# The async tests also cover the `futures` feature (futures::Stream).
cargo test --workspace --features pvllm/futures -- --nocapture

echo "rust: building the examples"
cargo build --manifest-path "$examples/Cargo.toml"
"$PVLLM_MAKE_TINY_MODEL" "$tmp/tiny" >/dev/null
out="$("$CARGO_TARGET_DIR/debug/stream" "$tmp/tiny" "Once upon a time" 12)"
echo "$out"
case "$out" in
  "Once upon a time"*"[12 tokens, finished: Length]"*) ;;
  *) echo "rust: the stream example printed something unexpected" >&2; exit 1 ;;
esac
"$CARGO_TARGET_DIR/debug/concurrent" "$tmp/tiny" 3 2 | tail -n 1
echo "rust: all tests passed"
