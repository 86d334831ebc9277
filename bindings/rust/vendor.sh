#!/usr/bin/env bash
# Copies the C++ sources the `bundled` feature builds (the CMake project
# minus tests, tools, benchmarks, fuzzers and models) into
# pvllm-sys/vendor/pvllm of the crate folder given (default: this one), so
# that a packaged pvllm-sys can build libpvllm from source. Run it before
# `cargo package`; scripts/sdk_package_check.sh does, on a copy.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
crate="${1:-$here/pvllm-sys}"
dest="$crate/vendor/pvllm"
rm -rf "$dest"
mkdir -p "$dest"
cp "$root/CMakeLists.txt" "$root/LICENSE" "$dest/"
for d in core capi kernels packaging; do cp -r "$root/$d" "$dest/"; done
rm -rf "$dest"/packaging/{consumers,abi,nuget,vcpkg,README.md}
echo "vendor: $(du -sh "$dest" | cut -f1) of sources in $dest"
