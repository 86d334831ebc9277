#!/usr/bin/env bash
# Builds pvllm-server (bindings/go/cmd/pvllm-server) offline against a
# libpvllm build:
#
#   scripts/build_server.sh OUT INCLUDE_DIR LIB_DIR RUNPATH
#
# OUT: the binary to write; INCLUDE_DIR holds pvllm/pvllm.h; LIB_DIR holds
# libpvllm.so; RUNPATH is where the binary looks for libpvllm at run time
# (an absolute folder for the build tree, '$ORIGIN/../lib/...' for an
# install).
#
# Its one third-party dependency, Prometheus' client_golang, and what that
# needs come from Debian's golang-github-prometheus-client-golang-dev, whose
# sources live under /usr/share/gocode ($PVLLM_GOCODE to use another tree):
# the build runs in GOPATH mode over that tree, as Debian builds Go
# programs, and downloads nothing. (With network access, a module-mode
# `go build` in that folder works too: its go.mod requires client_golang
# v1.14.0, the version Debian 12 ships.)
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 OUT INCLUDE_DIR LIB_DIR RUNPATH" >&2; exit 2; }
out="$1" include_dir="$2" lib_dir="$3" runpath="$4"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
# shellcheck source=lib/server_gopath.sh
source "$(dirname "$0")/lib/server_gopath.sh"
server_gopath "$(dirname "$out")/.pvllm-server-go" "$include_dir" "$lib_dir"
export CGO_LDFLAGS="-Wl,-rpath,$runpath"
cd "$server_dir"
go build -trimpath -ldflags="-linkmode=external -s -w" -o "$out.tmp" .
mv "$out.tmp" "$out"
