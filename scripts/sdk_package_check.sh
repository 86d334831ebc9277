#!/usr/bin/env bash
# The Rust crates and the Go module, packaged and consumed the way their
# users do, outside the source tree, against an install of BUILD_DIR
# (default build) found only through pkg-config:
#  - `cargo package --workspace` (offline, after bindings/rust/vendor.sh
#    put the C++ sources into pvllm-sys) makes
#    pvllm-sys-<v>.crate and pvllm-<v>.crate; packaging/consumers/rust is
#    built against the unpacked .crate files and run, once linking the
#    installed library and once with the `bundled` feature, building it
#    from the packaged sources;
#  - packaging/consumers/go imports a copy of the module bindings/go (as a
#    module proxy would deliver it), cgo finds libpvllm through
#    `#cgo pkg-config: pvllm`, and the program runs.
# Each must load the installed libpvllm and generate text.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
build_dir="${1:-build}"
check_name=sdk_package_check
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=lib/consumers.sh
source scripts/lib/consumers.sh
version="$(sed -n 's/^project(pvllm VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"

cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
pc="$(find "$tmp/prefix" -name pvllm.pc | head -n 1)"
[ -n "$pc" ] || fail "the install holds no pvllm.pc"
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir="$(pkg-config --variable=libdir pvllm)"
[ -f "$libdir/libpvllm.so.$abi" ] || fail "pkg-config's libdir $libdir holds no libpvllm.so.$abi"

# Rust: package, unpack, build a consumer against the packages.
# pvllm-sys has no third-party dependency: plain --offline. pvllm's
# optional and dev dependencies (futures-core, futures-executor) must
# resolve from a registry: a directory source holding Debian's crate
# sources and the pvllm-sys just packaged (cargo package finds its
# workspace sibling in the registry it is given, and refuses to package
# against a directory replacement of crates.io without --registry).
cargo_offline=(--offline)
export CARGO_TARGET_DIR="$tmp/cargo-target"
# From a copy without bindings/rust/.cargo (development's replacement).
mkdir -p "$tmp/rust-src"
cp -r bindings/rust/Cargo.toml bindings/rust/pvllm bindings/rust/pvllm-sys "$tmp/rust-src/"
bash bindings/rust/vendor.sh "$tmp/rust-src/pvllm-sys" >/dev/null
(cd "$tmp/rust-src" && cargo package -p pvllm-sys --allow-dirty "${cargo_offline[@]}" \
  >"$tmp/package.log" 2>&1) || { tail -30 "$tmp/package.log" >&2; fail "cargo package pvllm-sys failed"; }
registry="$tmp/registry"
mkdir -p "$registry"
for dir in /usr/share/cargo/registry/*/; do ln -s "$dir" "$registry/"; done
sys_crate="$CARGO_TARGET_DIR/package/pvllm-sys-$version.crate"
[ -f "$sys_crate" ] || fail "cargo package made no $sys_crate"
tar -xzf "$sys_crate" -C "$registry"
printf '{"files":{},"package":"%s"}' "$(sha256sum "$sys_crate" | cut -d' ' -f1)" \
  >"$registry/pvllm-sys-$version/.cargo-checksum.json"
(cd "$tmp/rust-src" && cargo package -p pvllm --allow-dirty "${cargo_offline[@]}" \
  --registry crates-io --config 'source.crates-io.replace-with="packaged"' \
  --config "source.packaged.directory=\"$registry\"" >>"$tmp/package.log" 2>&1) ||
  { tail -30 "$tmp/package.log" >&2; fail "cargo package pvllm failed"; }
mkdir -p "$tmp/crates"
for crate in pvllm-sys pvllm; do
  file="$CARGO_TARGET_DIR/package/$crate-$version.crate"
  [ -f "$file" ] || fail "cargo package made no $file"
  tar -xzf "$file" -C "$tmp/crates"
  mv "$tmp/crates/$crate-$version" "$tmp/crates/$crate"
done
cp -r packaging/consumers/rust "$tmp/rust-consumer"
(cd "$tmp/rust-consumer" && cargo build --release "${cargo_offline[@]}" >"$tmp/rust.log" 2>&1) ||
  { tail -30 "$tmp/rust.log" >&2; fail "the Rust consumer did not build"; }
rust_bin="$CARGO_TARGET_DIR/release/pvllm-consumer"
# No RPATH in a cargo-built program: the install's libdir goes on the
# loader's path, as it would for a prefix outside the system's.
export LD_LIBRARY_PATH="$libdir"
check_loads "Rust consumer" "$rust_bin" "$libdir"
run_program "Rust consumer" "$tmp/rust.out" "$rust_bin" "$model" "$prompt"
check_text "Rust consumer (cargo package, pkg-config)" "$tmp/rust.out"
grep -q "pvllm $version" "$tmp/rust.out.err" || fail "the Rust consumer loaded another libpvllm"

# The same consumer with the `bundled` feature: pvllm-sys builds libpvllm
# from the sources packaged in its crate (no pkg-config, no install).
grep -q "vendor/pvllm/CMakeLists.txt" <(tar -tzf "$CARGO_TARGET_DIR/package/pvllm-sys-$version.crate") ||
  fail "pvllm-sys-$version.crate holds no vendored sources"
(cd "$tmp/rust-consumer" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH \
  CARGO_TARGET_DIR="$tmp/cargo-bundled" cargo build --release --features pvllm/bundled \
  "${cargo_offline[@]}" >"$tmp/rust-bundled.log" 2>&1) ||
  { tail -30 "$tmp/rust-bundled.log" >&2; fail "the Rust consumer with 'bundled' did not build"; }
bundled_bin="$tmp/cargo-bundled/release/pvllm-consumer"
bundled_lib="$(find "$tmp/cargo-bundled" -path '*/pvllm-install/lib/*' -name "libpvllm.so.$abi" | head -n 1)"
[ -n "$bundled_lib" ] || fail "the 'bundled' build installed no libpvllm.so.$abi"
# The library lives in the build's OUT_DIR (DEP_PVLLM_LIB_DIR): the loader
# is pointed at it, as the README tells users.
export LD_LIBRARY_PATH="$(dirname "$bundled_lib")"
check_loads "the 'bundled' Rust consumer" "$bundled_bin" "$LD_LIBRARY_PATH"
run_program "the 'bundled' Rust consumer" "$tmp/rust-bundled.out" "$bundled_bin" "$model" "$prompt"
check_text "Rust consumer (feature bundled, built from the crate's sources)" "$tmp/rust-bundled.out"

# Go: a copy of the module, a consumer outside the tree, pkg-config.
cp -r bindings/go "$tmp/pvllm-go"
rm -rf "$tmp/pvllm-go/build"
cp -r packaging/consumers/go "$tmp/go-consumer"
(
  cd "$tmp/go-consumer"
  export GOPROXY=off GOFLAGS=-mod=mod GO111MODULE=on GOTOOLCHAIN=local CGO_ENABLED=1
  export GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GOENV=off
  go build -o "$tmp/go-consumer-bin" . >"$tmp/go.log" 2>&1
) || { cat "$tmp/go.log" >&2; fail "the Go consumer did not build"; }
export LD_LIBRARY_PATH="$libdir"
check_loads "Go consumer" "$tmp/go-consumer-bin" "$libdir"
run_program "Go consumer" "$tmp/go.out" "$tmp/go-consumer-bin" "$model" "$prompt"
check_text "Go consumer (module copy, #cgo pkg-config)" "$tmp/go.out"
grep -q "pvllm $version" "$tmp/go.out.err" || fail "the Go consumer loaded another libpvllm"
echo "$check_name: OK (Rust crates packaged and consumed through pkg-config and 'bundled'; Go module consumed through pkg-config)"
