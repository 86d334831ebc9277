#!/usr/bin/env bash
# Builds the C# SDK, its NUnit tests and the examples with Mono's mcs into
# bindings/csharp/out (git-ignored), runs the tests with nunit-console and the
# streaming example on a tiny model. Called by scripts/test.sh from the repo
# root with PVLLM_LIB_DIR, PVLLM_INCLUDE_DIR, PVLLM_MAKE_TINY_MODEL,
# PVLLM_SHARED_DIR (may be empty) and LD_LIBRARY_PATH set.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$here/out"

: "${PVLLM_LIB_DIR:?PVLLM_LIB_DIR must name the folder of libpvllm.so}"
: "${PVLLM_MAKE_TINY_MODEL:?PVLLM_MAKE_TINY_MODEL must name pvllm_make_tiny_model}"
export LD_LIBRARY_PATH="$PVLLM_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

for tool in mcs mono nunit-console; do
  command -v "$tool" >/dev/null || { echo "csharp: $tool not found (install bindings/csharp/packages.txt)" >&2; exit 1; }
done

# NUnit 2.6 from Debian; prefer the GAC copy nunit-console itself loads.
nunit_framework="$(find /usr/lib/mono/gac /usr/lib/cli -name nunit.framework.dll 2>/dev/null | sort | head -n 1)"
[ -n "$nunit_framework" ] || { echo "csharp: nunit.framework.dll not found" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"
mcs_flags=(-nologo -langversion:7.2 -warnaserror+ -nowarn:1591 -debug)

echo "csharp: compiling Pvllm.dll"
mcs "${mcs_flags[@]}" -target:library -unsafe -out:"$out/Pvllm.dll" -doc:"$out/Pvllm.xml" \
  "$here"/Pvllm/*.cs
cp "$here/Pvllm/Pvllm.dll.config" "$out/"

echo "csharp: compiling Pvllm.Tests.dll"
cp "$nunit_framework" "$out/"
mcs "${mcs_flags[@]}" -target:library -out:"$out/Pvllm.Tests.dll" \
  -r:"$out/Pvllm.dll" -r:"$out/nunit.framework.dll" -r:System.Core.dll -r:System.Json.dll \
  "$here"/Pvllm.Tests/*.cs

echo "csharp: compiling examples"
for example in StreamGenerate ConcurrentRequests; do
  mcs "${mcs_flags[@]}" -target:exe -out:"$out/$example.exe" -r:"$out/Pvllm.dll" \
    "$root/examples/csharp/$example.cs"
done

# The struct layouts as the C compiler sees pvllm.h, for LayoutTests.
cc_bin="$(command -v cc || command -v gcc || command -v clang || true)"
if [ -n "$cc_bin" ] && [ -n "${PVLLM_INCLUDE_DIR:-}" ]; then
  "$cc_bin" -std=c99 -I"$PVLLM_INCLUDE_DIR" -o "$out/layout" "$here/Pvllm.Tests/layout.c"
  "$out/layout" >"$out/layout.txt"
  export PVLLM_CSHARP_LAYOUT="$out/layout.txt"
fi

echo "csharp: running the NUnit tests"
# nunit-console exits with the number of failed tests (negative on errors).
# -noshadow keeps Pvllm.dll.config beside Pvllm.dll for Mono's dllmap.
status=0
(cd "$out" && nunit-console -nologo -noshadow -labels -xml="$out/TestResult.xml" "$out/Pvllm.Tests.dll") || status=$?
if [ "$status" -ne 0 ]; then
  echo "csharp: NUnit tests failed (nunit-console exit $status)" >&2
  exit 1
fi
# A result file must exist and report no failure (guards against a runner
# that exits 0 without running anything).
grep -q '<test-results ' "$out/TestResult.xml"
if grep -Eq '<test-results [^>]*(failures|errors)="[1-9]' "$out/TestResult.xml"; then
  echo "csharp: TestResult.xml reports failures" >&2
  exit 1
fi

echo "csharp: running the streaming example on a tiny model"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PVLLM_MAKE_TINY_MODEL" "$tmp/tiny" >/dev/null
(cd "$out" && mono StreamGenerate.exe "$tmp/tiny" "Hello world" 16)
(cd "$out" && mono ConcurrentRequests.exe "$tmp/tiny" 8 >/dev/null)
echo "csharp: ok"
