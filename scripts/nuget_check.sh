#!/usr/bin/env bash
# The NuGet package, packed and consumed the way a user would:
#  1. stage it from an install of BUILD_DIR (default build): Pvllm.dll built
#     with Mono's mcs; libpvllm.so.1 as `libpvllm.so`, the one name both
#     .NET and Mono probe for DllImport("pvllm") (a package holds no
#     symlinks; its SONAME stays libpvllm.so.1), with every library it needs
#     beyond the C and C++ runtimes (found with ldd), each given the RPATH
#     $ORIGIN so they find each other in runtimes/linux-x64/native/;
#  2. `nuget pack` packaging/nuget/Pvllm.nuspec into out/nuget/ (the staged
#     natives are kept in out/nuget/native for Pvllm.csproj), then write
#     the SPDX licence expression into the packed nuspec (Debian's nuget 2.8
#     cannot pack a <license> element; packaging/nuget/license_expression.py);
#  3. `nuget install` it from that folder into a scratch folder, build
#     packaging/consumers/dotnet against the restored lib/net462/Pvllm.dll,
#     copy the natives beside it (what build/Pvllm.targets does for an
#     MSBuild project) and run it on Mono with no LD_LIBRARY_PATH and no
#     dllmap: it must load the package's libpvllm and generate text.
# Needs nuget, mono-devel and patchelf (bindings/csharp/packages.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
check_name=nuget_check
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=lib/consumers.sh
source scripts/lib/consumers.sh
for tool in nuget mono mcs patchelf; do
  command -v "$tool" >/dev/null || fail "$tool not found (install bindings/csharp/packages.txt)"
done
version="$(sed -n 's/^project(pvllm VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
[ -n "$version" ] || fail "no version in CMakeLists.txt"

# 1. Stage.
cmake --install "$build_dir" --prefix "$tmp/prefix" --component runtime >/dev/null
staging="$tmp/staging"
mkdir -p "$staging/lib" "$staging/native"
mcs -nologo -langversion:7.2 -warnaserror+ -nowarn:1591 -target:library -unsafe \
  -out:"$staging/lib/Pvllm.dll" -doc:"$staging/lib/Pvllm.xml" bindings/csharp/Pvllm/*.cs
cp LICENSE "$staging/"
mkdir -p "$staging/build"
cp packaging/nuget/build/Pvllm.targets "$staging/build/"
lib="$(find "$tmp/prefix" -name "libpvllm.so.$abi" | head -n 1)"
[ -n "$lib" ] || fail "the install holds no libpvllm.so.$abi"
native_name=libpvllm.so
cp -L "$lib" "$staging/native/$native_name"
# Everything ldd resolves, except the C and C++ runtimes every Linux has.
system='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.'
bundled=()
queue=("$staging/native/$native_name")
while [ "${#queue[@]}" -gt 0 ]; do
  current="${queue[0]}"
  queue=("${queue[@]:1}")
  while read -r name path; do
    [[ "$name" =~ $system ]] && continue
    [ -f "$staging/native/$name" ] && continue
    [ -n "$path" ] && [ -f "$path" ] || fail "ldd cannot resolve $name for $(basename "$current")"
    cp -L "$path" "$staging/native/$name"
    bundled+=("$name")
    queue+=("$staging/native/$name")
  done < <(ldd "$current" | awk '/=>/ { print $1, $3 }')
done
for so in "$staging"/native/*; do patchelf --set-rpath '$ORIGIN' "$so"; done
echo "$check_name: bundled beside $native_name: ${bundled[*]:-nothing}"

# 2. Pack. The staged natives stay in out/nuget/native for
# `dotnet pack -p:PvllmNativeDir=...` (bindings/csharp/Pvllm/Pvllm.csproj).
out="out/nuget"
mkdir -p "$out"
rm -rf "$out"/Pvllm.*.nupkg "$out/native"
cp -r "$staging/native" "$out/native"
nuget pack packaging/nuget/Pvllm.nuspec -NonInteractive -NoDefaultExcludes -BasePath "$staging" \
  -Properties "version=$version" -OutputDirectory "$out" >"$tmp/pack.log" 2>&1 ||
  { cat "$tmp/pack.log" >&2; fail "nuget pack failed"; }
package="$out/Pvllm.$version.nupkg"
[ -f "$package" ] || fail "nuget pack made no $package"
python3 packaging/nuget/license_expression.py "$package" Apache-2.0
unzip -p "$package" Pvllm.nuspec | grep -q '<license type="expression">Apache-2.0</license>' ||
  fail "$package names no SPDX licence expression"
contents="$(unzip -Z1 "$package")"
for want in lib/net462/Pvllm.dll lib/netstandard2.0/Pvllm.dll \
  "runtimes/linux-x64/native/$native_name" build/net462/Pvllm.targets LICENSE; do
  grep -qx "$want" <<<"$contents" || fail "$package lacks $want"
done
for name in "${bundled[@]}"; do
  grep -qx "runtimes/linux-x64/native/$name" <<<"$contents" || fail "$package lacks $name"
done

# 3. Consume, outside the tree.
nuget install Pvllm -Version "$version" -Source "$(realpath "$out")" -OutputDirectory "$tmp/packages" \
  -NonInteractive >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "nuget install failed"; }
restored="$tmp/packages/Pvllm.$version"
app="$tmp/app"
mkdir -p "$app"
cp packaging/consumers/dotnet/Program.cs "$app/"
cp "$restored"/lib/net462/* "$app/"
cp "$restored"/runtimes/linux-x64/native/* "$app/"
# No dllmap: Mono must find the native by the name DllImport("pvllm") probes.
[ ! -e "$app/Pvllm.dll.config" ] || fail "the package ships a Pvllm.dll.config"
(cd "$app" && mcs -nologo -target:exe -out:Program.exe -r:Pvllm.dll Program.cs)
(cd "$app" && env -u LD_LIBRARY_PATH mono Program.exe "$model" "$prompt" >"$tmp/run.out" 2>"$tmp/run.err") ||
  { cat "$tmp/run.err" >&2; fail "the .NET consumer failed"; }
check_text ".NET consumer (NuGet package, Mono)" "$tmp/run.out"
grep -q "pvllm $version" "$tmp/run.err" || { cat "$tmp/run.err" >&2; fail "the consumer loaded another libpvllm"; }
# The dynamic loader's own account: libpvllm and the bundled libraries come
# from the package's files beside the program, not from the system.
(cd "$app" && env -u LD_LIBRARY_PATH LD_DEBUG=libs mono Program.exe "$model" "$prompt" \
  >/dev/null 2>"$tmp/ld.log") || fail "the .NET consumer failed under LD_DEBUG"
for name in "$native_name" "${bundled[@]}"; do
  grep -q "calling init: $app/$name" "$tmp/ld.log" || fail "$name was not loaded from the package"
done
echo "$check_name: OK ($package: packed, restored, consumed on Mono)"
