#!/usr/bin/env bash
# Builds the Debian packages of an existing build with CPack
# (packaging/deb.cmake), checks their contents, control fields and, when
# lintian is installed, that lintian reports no error; then installs them
# with `apt-get install ./*.deb` into the system (/usr), runs the installed
# pvllm command, builds packaging/consumers/ against /usr through
# pkg-config and find_package and runs them, and removes the packages
# again (also when a step fails), so a rerun starts clean.
# Needs root (CI runs as root). It first purges any installed libpvllm1,
# libpvllm-dev, pvllm or libpvllm-cuda1 (a killed run may have left them).
# Any failure ends the script non-zero.
# Usage: scripts/deb_check.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="$(cd "${1:-build}" && pwd)"
check_name=deb_check
tmp="$(mktemp -d)"
packages=(libpvllm1 libpvllm-dev pvllm libpvllm-cuda1)
remove_packages() {
  local installed=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && installed+=("$p")
  done
  [ ${#installed[@]} -eq 0 ] ||
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${installed[@]}" >"$tmp/remove.log" 2>&1
}
trap 'remove_packages; rm -rf "$tmp"' EXIT
source scripts/lib/consumers.sh

[ "$(id -u)" -eq 0 ] || fail "needs root (it installs the packages with apt-get)"
[ -f "$build/CPackConfig.cmake" ] || fail "$build is not a configured build directory"
version="$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")"
[ -n "$version" ] || fail "no CPACK_PACKAGE_VERSION in $build/CPackConfig.cmake"
# A previous run that was killed may have left them installed.
remove_packages

# 1. Build the packages.
cpack --config "$build/CPackConfig.cmake" -B "$tmp/debs" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack"; }
deb() { echo "$tmp/debs/$1_${version}_$(dpkg --print-architecture).deb"; }
for p in libpvllm1 libpvllm-dev pvllm; do
  [ -f "$(deb $p)" ] || fail "cpack made no $(basename "$(deb $p)")"
done
with_cuda=0
[ -f "$build/capi/libpvllm_cuda.so" ] && with_cuda=1
[ $with_cuda -eq 0 ] || [ -f "$(deb libpvllm-cuda1)" ] || fail "the CUDA module was built, no libpvllm-cuda1"

# 2. Contents: "PACKAGE PATH [TYPE]", TYPE l = symlink, - = file (default).
expect_in() {  # PACKAGE PATH [TYPE]
  dpkg-deb -c "$(deb "$1")" | awk -v p="./usr/$2" -v t="${3:--}" \
    '$6 == p && substr($1, 1, 1) == t { ok = 1 } END { exit !ok }' ||
    fail "$1 lacks /usr/$2 (type ${3:--})"
}
expect_in libpvllm1 "lib/libpvllm.so.$version"
expect_in libpvllm1 "lib/libpvllm.so.$abi" l
expect_in libpvllm1 share/doc/libpvllm1/copyright
expect_in libpvllm1 share/doc/pvllm/LICENSE
expect_in libpvllm-dev lib/libpvllm.so l
for f in include/pvllm/pvllm.h include/pvllm/pvllm.hpp lib/pkgconfig/pvllm.pc \
         lib/cmake/pvllm/pvllmConfig.cmake lib/cmake/pvllm/pvllmConfigVersion.cmake \
         lib/cmake/pvllm/pvllmTargets.cmake share/doc/libpvllm-dev/copyright; do
  expect_in libpvllm-dev "$f"
done
expect_in pvllm bin/pvllm
[ -x "$build/tools/install/pvllm-server" ] && expect_in pvllm bin/pvllm-server
expect_in pvllm share/doc/pvllm/copyright
if [ $with_cuda -eq 1 ]; then
  expect_in libpvllm-cuda1 lib/libpvllm_cuda.so
  expect_in libpvllm-cuda1 share/doc/libpvllm-cuda1/copyright
fi
# Each package holds only what its name says: no library in the command's
# package, no headers in the library's.
dpkg-deb -c "$(deb libpvllm1)" | grep -q '/include/\|/bin/' && fail "libpvllm1 holds headers or programs"
dpkg-deb -c "$(deb pvllm)" | grep -q '\.so' && fail "pvllm holds a library"
grep -q "^License: Apache-2.0$" packaging/deb/copyright || fail "copyright names no Apache-2.0"

# 3. Control fields: the library's dependencies come from dpkg-shlibdeps.
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
for dep in libsentencepiece0 libstdc++6 libc6; do
  field libpvllm1 Depends | grep -q "\b$dep\b" || fail "libpvllm1 does not depend on $dep"
done
field libpvllm-dev Depends | grep -q "libpvllm1 (= $version)" || fail "libpvllm-dev does not depend on libpvllm1 (= $version)"
field pvllm Depends | grep -q "libpvllm1 (= $version)" || fail "pvllm does not depend on libpvllm1 (= $version)"
for p in libpvllm1 libpvllm-dev pvllm; do
  for f in Maintainer Homepage Description Section; do
    [ -n "$(field $p $f)" ] || fail "$p has no $f"
  done
done
dpkg-deb -I "$(deb libpvllm1)" shlibs | grep -q "^libpvllm $abi libpvllm1" || fail "libpvllm1 has no shlibs entry"

# 4. lintian (Debian's package checker), when installed: no errors.
if command -v lintian >/dev/null; then
  lintian --fail-on error "$tmp"/debs/*.deb >"$tmp/lintian.log" 2>&1 ||
    { cat "$tmp/lintian.log" >&2; fail "lintian reports errors"; }
  echo "deb_check: lintian: no errors ($(grep -c '^W:' "$tmp/lintian.log" || true) warnings)"
fi

# 5. Install into the system, use from /usr, remove (the trap).
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  "$(deb libpvllm1)" "$(deb libpvllm-dev)" "$(deb pvllm)" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "apt-get install"; }
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH pvllm_DIR pvllm_ROOT
check_cli /usr/bin/pvllm /usr/lib
[ -x "$build/tools/install/pvllm-server" ] && check_server /usr/bin/pvllm-server /usr/lib
check_c_consumer /usr/lib
# CMAKE_PREFIX_PATH=/usr: searched before /usr/local, where a
# `cmake --install` with the default prefix may have left another pvllm.
check_cpp_consumer /usr/lib /usr/lib/cmake/pvllm -DCMAKE_PREFIX_PATH=/usr
remove_packages
[ ! -e /usr/lib/libpvllm.so.$abi ] || fail "apt-get purge left /usr/lib/libpvllm.so.$abi"

echo "deb_check: OK ($(cd "$tmp/debs" && ls ./*.deb | tr '\n' ' ' | sed 's|\./||g')built, installed, used from /usr, removed)"
