#!/usr/bin/env bash
# ABI discipline for libpvllm (see packaging/abi/README.md): compares the
# built libpvllm.so.<ABI> with the committed baseline
# packaging/abi/libpvllm.so.<ABI>.abi using libabigail (abidw, abidiff).
# Policy within one ABI version: additions pass (new functions, new enum
# values, fields appended to a struct_size struct); anything else fails
# (a removed or changed function, a changed type, a field added to any
# other struct, which may sit in arrays, or inserted before the end).
# Only the public types count: the suppressions are made from pvllm.h.
# Usage: scripts/abi_check.sh [BUILD_DIR]             compare (default build)
#        scripts/abi_check.sh --update [BUILD_DIR]    rewrite the baseline
#        scripts/abi_check.sh --self-test [BUILD_DIR] check that the check
#          fails on tampered copies of the baseline and passes on additions
set -euo pipefail
cd "$(dirname "$0")/.."
mode=check
case "${1:-}" in --update | --self-test) mode="${1#--}"; shift ;; esac
build="$(cd "${1:-build}" && pwd)"
header=capi/include/pvllm/pvllm.h
fail() { echo "abi_check: FAIL: $*" >&2; exit 1; }
command -v abidiff >/dev/null || fail "no abidiff (scripts/setup.sh installs abigail-tools)"
abi="$(sed -n 's/^#define PVLLM_ABI_VERSION \([0-9]*\)$/\1/p' "$header")"
[ -n "$abi" ] || fail "no PVLLM_ABI_VERSION in $header"
lib="$build/capi/libpvllm.so.$abi"
baseline="packaging/abi/libpvllm.so.$abi.abi"
[ -f "$lib" ] || fail "no $lib (build the pvllm target)"
readelf -S "$lib" | grep -q '\.debug_info' || fail "$lib has no debug info (capi/CMakeLists.txt adds -g)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Suppressions, from the header so they cannot drift from it.
opaque="$(sed -n 's/^typedef struct \(pvllm_[a-z_0-9]*\) \1;$/\1/p' "$header" | paste -sd '|')"
# Structs whose first member is `uint32_t struct_size` grow at the end.
growing="$(awk '
  /^typedef struct [a-z_0-9]+ \{/ { name = $3; body = 1; next }
  body && /^[ \t]+(const[ \t]+)?[A-Za-z_][A-Za-z_0-9]*[ \t*]+[A-Za-z_][A-Za-z_0-9]*(\[[^]]*\])?;/ {
    if ($0 ~ /^[ \t]+uint32_t[ \t]+struct_size;/) print name
    body = 0 }
  /^\}/ { body = 0 }' "$header" | paste -sd '|')"
[ -n "$opaque" ] && [ -n "$growing" ] || fail "found no opaque handles or struct_size structs in $header"
# For abidw: everything not declared in pvllm.h (the C++ internals, the
# standard library) leaves the ABI representation, except the opaque handles.
cat >"$tmp/private.abignore" <<SUPPR
[suppress_type]
  source_location_not_regexp = pvllm/pvllm\\.h\$
  name_not_regexp = ^pvllm_
  drop = yes
SUPPR
# For abidiff: what the policy allows.
cat >"$tmp/pvllm.abignore" <<SUPPR
# The opaque handles' layout is the library's own business.
[suppress_type]
  name_regexp = ^($opaque)\$

# struct_size structs grow at the end (pvllm.h, "Structs only ever grow").
[suppress_type]
  type_kind = struct
  name_regexp = ^($growing)\$
  has_data_member_inserted_at = end
  has_size_change = yes
SUPPR

dump() {  # LIBRARY OUT
  abidw --suppressions "$tmp/private.abignore" --no-corpus-path --no-comp-dir-path --no-show-locs \
    --type-id-style hash --out-file "$2" "$1"
}
# abidiff's exit status is a bit set: 4 an ABI change, 8 an incompatible
# one. Additions are not reported (--no-added-syms; added enumerators are
# harmless changes, off by default), so any remaining change fails.
# --leaf-changes-only: each changed type is judged on its own, so a grown
# pvllm_output does not hide a change of a type it points to.
compare() {  # OLD NEW REPORT
  abidiff --suppressions "$tmp/pvllm.abignore" --no-added-syms --leaf-changes-only "$1" "$2" \
    >"$3" 2>&1
}

dump "$lib" "$tmp/current.abi"
case "$mode" in
update)
  cp "$tmp/current.abi" "$baseline"
  echo "abi_check: wrote $baseline"
  exit 0 ;;
check)
  [ -f "$baseline" ] || fail "no $baseline (scripts/abi_check.sh --update makes it)"
  status=0
  compare "$baseline" "$tmp/current.abi" "$tmp/report" || status=$?
  if [ $status -ne 0 ]; then
    cat "$tmp/report" >&2
    fail "libpvllm.so.$abi is not compatible with $baseline (abidiff status $status)"
  fi
  echo "abi_check: OK (libpvllm.so.$abi is compatible with $baseline)"
  exit 0 ;;
esac

# Self-test: edit copies of the current dump the way a change of pvllm.h
# would change it, and expect the verdict the policy gives.
command -v python3 >/dev/null || fail "the self-test needs python3"
expect() {  # pass|fail WHAT OLD NEW
  local status=0
  compare "$3" "$4" "$tmp/report" || status=$?
  if { [ "$1" = pass ] && [ $status -ne 0 ]; } || { [ "$1" = fail ] && [ $status -eq 0 ]; }; then
    cat "$tmp/report" >&2
    fail "self-test: $2: expected $1, abidiff status $status"
  fi
  local verdict=fails
  [ "$1" = pass ] && verdict=passes
  echo "abi_check: self-test: $2: $verdict as it should (abidiff status $status)"
}
tamper() {  # EDIT OUT
  python3 scripts/abi_tamper.py "$1" "$tmp/current.abi" "$2" || fail "self-test: cannot $1"
}
tamper remove-function:pvllm_version "$tmp/no_fn.abi"
expect fail "a function removed" "$tmp/current.abi" "$tmp/no_fn.abi"
expect pass "a function added" "$tmp/no_fn.abi" "$tmp/current.abi"
tamper append-member:pvllm_output "$tmp/grown.abi"
expect pass "a field appended to pvllm_output (struct_size)" "$tmp/current.abi" "$tmp/grown.abi"
tamper append-member:pvllm_token_logprobs "$tmp/grown_array.abi"
expect fail "a field appended to pvllm_token_logprobs (array element)" "$tmp/current.abi" "$tmp/grown_array.abi"
tamper remove-member:pvllm_output:text_len "$tmp/no_member.abi"
expect fail "a field removed from pvllm_output" "$tmp/current.abi" "$tmp/no_member.abi"
tamper prepend-member:pvllm_sampling_params "$tmp/inserted.abi"
expect fail "a field inserted at the start of pvllm_sampling_params" "$tmp/current.abi" "$tmp/inserted.abi"
tamper append-enumerator:pvllm_status "$tmp/new_status.abi"
expect pass "a value appended to pvllm_status" "$tmp/current.abi" "$tmp/new_status.abi"
tamper remove-enumerator:pvllm_status "$tmp/no_status.abi"
expect fail "the last value of pvllm_status removed" "$tmp/current.abi" "$tmp/no_status.abi"
echo "abi_check: self-test OK"
