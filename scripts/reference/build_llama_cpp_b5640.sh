#!/usr/bin/env bash
# Builds llama.cpp release b5640 (June 2025), the llama.cpp that makes the
# qwen3 fixtures (make_gguf_qwen_fixtures.sh): the commit the other fixtures
# pin predates the "qwen3" architecture. Its source comes from the npm
# registry: node-llama-cpp 3.10.0 ships release b5640 as a git bundle
# (llama/gitRelease.bundle; llama/binariesGithubRelease.json names the
# release). Built as the pinned one is: Release, CPU only, GGML_NATIVE off,
# no OpenMP, shared libraries.
#
# Usage: build_llama_cpp_b5640.sh DEST
#   leaves the source in DEST and the build in DEST/build (bin/ holds
#   libllama.so, libggml*.so and llama-quantize). Needs npm, git, cmake,
#   ninja and a C++17 compiler; about 70 compilations.
set -euo pipefail
dest="${1:?usage: $0 DEST}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent node-llama-cpp@3.10.0 >/dev/null &&
  tar xzf node-llama-cpp-3.10.0.tgz package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json)
grep -q '"b5640"' "$work/package/llama/binariesGithubRelease.json" ||
  { echo "node-llama-cpp 3.10.0 no longer names release b5640" >&2; exit 1; }
[ -d "$dest/.git" ] || git clone --quiet "$work/package/llama/gitRelease.bundle" "$dest"
cmake -S "$dest" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_SERVER=OFF >/dev/null
ninja -C "$dest/build" llama llama-quantize
