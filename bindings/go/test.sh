#!/usr/bin/env bash
# Tests the Go SDK (bindings/go/pvllm), pvllm-server (bindings/go/cmd/
# pvllm-server: its Go tests; scripts/server_check.sh drives the built
# server with real clients) and the Go examples (examples/go):
# go vet, go test -race (real generation on a tiny model), builds the example
# binaries and streams one prompt with the generate example.
#
# Environment (scripts/test.sh sets it): PVLLM_LIB_DIR, PVLLM_INCLUDE_DIR,
# PVLLM_MAKE_TINY_MODEL, PVLLM_SHARED_DIR (optional: stories260K tests skip
# without it), LD_LIBRARY_PATH including PVLLM_LIB_DIR.
# The SDK and the examples use only the standard library; pvllm-server also
# uses Prometheus' client_golang from Debian. Nothing is downloaded. Build outputs go
# to bindings/go/build and examples/go/bin (both git-ignored) and a temp dir.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

: "${PVLLM_LIB_DIR:?set PVLLM_LIB_DIR to the folder of libpvllm.so}"
: "${PVLLM_INCLUDE_DIR:?set PVLLM_INCLUDE_DIR to the folder containing pvllm/pvllm.h}"
: "${PVLLM_MAKE_TINY_MODEL:?set PVLLM_MAKE_TINY_MODEL to the tiny-model maker}"
export PVLLM_SHARED_DIR="${PVLLM_SHARED_DIR:-}"
export LD_LIBRARY_PATH="$PVLLM_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

command -v go >/dev/null || { echo "go not found: install golang-go" >&2; exit 1; }

export GOPROXY=off GOFLAGS=-buildvcs=false GO111MODULE=on GOTOOLCHAIN=local
export GOCACHE="$here/build/cache" GOPATH="$here/build/gopath" GOENV=off
export CGO_ENABLED=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp"
# The package finds libpvllm through `#cgo pkg-config: pvllm`; here a
# pvllm.pc for the uninstalled build (scripts/sdk_package_check.sh builds a
# program out of tree against an installed one).
mkdir -p "$tmp/pkgconfig"
cat >"$tmp/pkgconfig/pvllm.pc" <<PC
Name: pvllm
Description: pvllm from the build tree
Version: 0
Cflags: -I$PVLLM_INCLUDE_DIR
Libs: -L$PVLLM_LIB_DIR -lpvllm
PC
export PKG_CONFIG_PATH="$tmp/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

echo "go: $(go version)"

unformatted="$(cd "$root" && gofmt -l bindings/go examples/go)"
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "go: vet and test -race bindings/go"
(cd "$here" && go vet ./... && go test -race -count=1 -timeout 5m ./...)

echo "go: vet and test -race examples/go"
(cd "$root/examples/go" && go vet ./... && go test -race -count=1 -timeout 5m ./...)

echo "go: vet and test -race bindings/go/cmd/pvllm-server (GOPATH mode over Debian's Go sources)"
(
  # shellcheck source=../../scripts/lib/server_gopath.sh
  source "$root/scripts/lib/server_gopath.sh"
  server_gopath "$here/build/server" "$PVLLM_INCLUDE_DIR" "$PVLLM_LIB_DIR"
  cd "$server_dir"
  go vet . && go test -race -count=1 -timeout 5m .
)

echo "go: build examples"
bin="$root/examples/go/bin"
(cd "$root/examples/go" && go build -o "$bin/" ./...)

echo "go: stream one prompt with examples/go/generate on a tiny model"
"$PVLLM_MAKE_TINY_MODEL" "$tmp/tiny" >/dev/null
"$bin/generate" -model "$tmp/tiny" -prompt "Hello" -max-tokens 16 -threads 1 \
  >"$tmp/generate.out" 2>"$tmp/generate.err"
cat "$tmp/generate.out" "$tmp/generate.err"
grep -q '^Hello' "$tmp/generate.out"
grep -Eq '^\[[0-9]+ tokens, finish: (length|stop)\]$' "$tmp/generate.err"
echo "go: ok"
