#!/usr/bin/env bash
# Checks the vcpkg port (packaging/vcpkg/ports/pvllm) without vcpkg: runs
# what its portfile runs, with the configure OPTIONS read from
# portfile.cmake itself (so the check and the port cannot drift), no
# optional feature (CPU only), Release: configure, build and install into a
# temporary prefix in build-vcpkg; then checks the installed layout the
# portfile's fix-ups expect and builds packaging/consumers/ against it
# (find_package(pvllm CONFIG REQUIRED) and pkg-config) and runs them.
# ccache with CCACHE_BASEDIR at the checkout: the objects come from the main
# build's cache entries.
# Usage: scripts/vcpkg_port_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
port=packaging/vcpkg/ports/pvllm
check_name=vcpkg_port_check
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source scripts/lib/consumers.sh
for f in portfile.cmake vcpkg.json usage; do [ -f "$port/$f" ] || fail "no $port/$f"; done

# The port's version is the project's.
version="$(sed -n 's/^project(pvllm VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)"
grep -q "\"version\": \"$version\"" "$port/vcpkg.json" || fail "$port/vcpkg.json is not version $version"
# Every library the build looks for is a dependency of the port.
for dep in "sentencepiece:sentencepiece" "libpcre2-8:pcre2" "libutf8proc:utf8proc" \
           "nlohmann_json:nlohmann-json" "flatc:flatbuffers" "xxhash.h:xxhash"; do
  grep -rqs --include=CMakeLists.txt "[ (]${dep%%:*}[ )]" CMakeLists.txt core capi ||
    fail "the build no longer uses ${dep%%:*}: update this list and $port/vcpkg.json"
  grep -q "\"${dep#*:}\"" "$port/vcpkg.json" || fail "$port/vcpkg.json lacks the dependency ${dep#*:}"
done

# The portfile's configure options: the -D lines of vcpkg_cmake_configure,
# and each feature's variable OFF (no feature asked for).
options=()
while read -r o; do options+=("$o"); done < <(
  awk '/^vcpkg_cmake_configure\(/ { on = 1 } on && $1 ~ /^-D/ { print $1 } on && /^\)/ { on = 0 }' \
    "$port/portfile.cmake")
while read -r var; do options+=("-D$var=OFF"); done < <(
  awk '/^vcpkg_check_features\(/ { on = 1; next } on && NF == 2 && $1 !~ /^(FEATURES|OUT_)/ { print $2 }
       on && /^\)/ { on = 0 }' "$port/portfile.cmake")
[ ${#options[@]} -ge 3 ] || fail "read no configure options from $port/portfile.cmake"
config_path="$(sed -n 's/^vcpkg_cmake_config_fixup(CONFIG_PATH \([^ )]*\)).*/\1/p' "$port/portfile.cmake")"
[ -n "$config_path" ] || fail "no vcpkg_cmake_config_fixup(CONFIG_PATH ...) in $port/portfile.cmake"
echo "$check_name: options ${options[*]}"

# Configure, build, install as vcpkg_cmake_configure/_install do.
export CCACHE_BASEDIR="$(pwd)"
cmake -S . -B build-vcpkg -G Ninja -DCMAKE_BUILD_TYPE=Release "${options[@]}" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; fail "configure"; }
cmake --build build-vcpkg -j "$(nproc)" >"$tmp/build.log" 2>&1 ||
  { tail -n 50 "$tmp/build.log" >&2; fail "build"; }
grep -q '^CCACHE_PROGRAM:.*ccache' build-vcpkg/CMakeCache.txt || echo "$check_name: (no ccache)"
prefix="$tmp/packages"
cmake --install build-vcpkg --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "install"; }

# What the portfile's fix-ups and copyright step work on, and nothing the
# options turned off.
for f in "$config_path/pvllmConfig.cmake" lib/pkgconfig/pvllm.pc "lib/libpvllm.so.$abi" \
         include/pvllm/pvllm.h include/pvllm/pvllm.hpp; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
[ -f LICENSE ] || fail "no LICENSE for vcpkg_install_copyright"
[ ! -e "$prefix/bin" ] || fail "PVLLM_BUILD_TOOLS=OFF still installs bin/"
for off in tests tools bench; do
  [ ! -d "build-vcpkg/$off" ] || fail "the port's build built $off/"
done

unset LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH pvllm_DIR pvllm_ROOT
check_cpp_consumer "$prefix/lib" "$prefix/$config_path" -DCMAKE_PREFIX_PATH="$prefix"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" check_c_consumer "$prefix/lib"
echo "$check_name: OK (the portfile's configure, build and install; both consumers generate)"
