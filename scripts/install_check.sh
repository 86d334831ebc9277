#!/usr/bin/env bash
# Installs the existing build (no rebuild) into a fresh temporary prefix with
# `cmake --install`, checks what landed there, moves the whole prefix
# elsewhere (nothing installed may name where it was installed), and then,
# from the moved prefix and without LD_LIBRARY_PATH:
#   - runs the installed pvllm command on models/stories260K,
#   - serves a completion with the installed pvllm-server (when built),
#   - builds examples/c/generate.c as an outside C program through
#     pkg-config (packaging/consumers/c) and runs it,
#   - builds examples/cpp/generate.cc as an outside CMake project through
#     find_package(pvllm CONFIG REQUIRED) (packaging/consumers/cpp) and runs it.
# Each must print generated text. Any failure ends the script non-zero.
# Usage: scripts/install_check.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="$(cd "${1:-build}" && pwd)"
check_name=install_check
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source scripts/lib/consumers.sh

[ -f "$build/CMakeCache.txt" ] || fail "$build is not a configured build directory"
libdir="$(cache_value CMAKE_INSTALL_LIBDIR "$build/CMakeCache.txt")"
[ -n "$libdir" ] || fail "CMAKE_INSTALL_LIBDIR is not in $build/CMakeCache.txt"
# Neither the build tree nor a system-wide pvllm may stand in for the prefix.
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH pvllm_DIR pvllm_ROOT

# 1. Install.
stage="$tmp/stage"
cmake --install "$build" --prefix "$stage" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "cmake --install $build --prefix $stage"; }

# 2. What must be there.
expect=("$libdir/libpvllm.so" "$libdir/libpvllm.so.$abi"
        include/pvllm/pvllm.h include/pvllm/pvllm.hpp
        "$libdir/cmake/pvllm/pvllmConfig.cmake" "$libdir/cmake/pvllm/pvllmConfigVersion.cmake"
        "$libdir/cmake/pvllm/pvllmTargets.cmake" "$libdir/pkgconfig/pvllm.pc"
        share/doc/pvllm/LICENSE)
[ -x "$build/tools/pvllm" ] && expect+=(bin/pvllm)
[ -x "$build/tools/install/pvllm-server" ] && expect+=(bin/pvllm-server)
[ -f "$build/capi/libpvllm_cuda.so" ] && expect+=("$libdir/libpvllm_cuda.so")
for f in "${expect[@]}"; do
  [ -e "$stage/$f" ] || fail "cmake --install did not install $f"
done
soname="$(readelf -d "$stage/$libdir/libpvllm.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[ "$soname" = "libpvllm.so.$abi" ] || fail "SONAME is '$soname', expected libpvllm.so.$abi"
for program in pvllm pvllm-server; do
  [ -e "$stage/bin/$program" ] || continue
  runpath="$(readelf -d "$stage/bin/$program" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')"
  case "$runpath" in
    '$ORIGIN/'*) ;;
    *) fail "bin/$program's RUNPATH is '$runpath', expected one relative to \$ORIGIN" ;;
  esac
done
if grep -rlF "$stage" "$stage" >"$tmp/named" 2>/dev/null; then
  fail "installed files name the install prefix: $(tr '\n' ' ' <"$tmp/named")"
fi

# 3. Relocate: everything below runs from where the prefix was moved to.
prefix="$tmp/moved"
mv "$stage" "$prefix"

if [ -e "$prefix/bin/pvllm" ]; then check_cli "$prefix/bin/pvllm" "$prefix/$libdir"; fi
if [ -e "$prefix/bin/pvllm-server" ]; then check_server "$prefix/bin/pvllm-server" "$prefix/$libdir"; fi
# The CUDA module: libpvllm must find it in the moved prefix. Without a GPU
# the engine then stops at the driver or the device, not at the module.
if [ -e "$prefix/$libdir/libpvllm_cuda.so" ] && [ -e "$prefix/bin/pvllm" ]; then
  if "$prefix/bin/pvllm" generate --model "$model" --prompt "$prompt" --max-tokens 40 \
      --temperature 0 --device cuda >"$tmp/cuda.out" 2>"$tmp/cuda.err"; then
    check_text "bin/pvllm generate --device cuda" "$tmp/cuda.out"
  elif grep -q "libpvllm_cuda.so could not be loaded" "$tmp/cuda.err"; then
    cat "$tmp/cuda.err" >&2
    fail "libpvllm does not load the installed $libdir/libpvllm_cuda.so"
  else
    echo "install_check: the installed CUDA module loads; no GPU: $(tail -n 1 "$tmp/cuda.err")"
  fi
fi

# 4. A C program through pkg-config, outside the source tree.
PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" check_c_consumer "$prefix/$libdir"

# 5. A C++ program through find_package(pvllm CONFIG REQUIRED).
check_cpp_consumer "$prefix/$libdir" "$prefix/$libdir/cmake/pvllm" -DCMAKE_PREFIX_PATH="$prefix"

echo "install_check: OK (installed, relocated, pvllm command, pvllm-server and both consumers generate)"
