#!/usr/bin/env bash
# Installs what pvllm needs on Debian 12, and nothing that is already there.
#
#   scripts/setup.sh core   what building libpvllm and the pvllm command
#                           needs (scripts/quickstart.sh)
#   scripts/setup.sh        everything the test suites need besides: the
#                           core list plus GoogleTest, the fuzzing, packaging
#                           and ABI tools, and each SDK's list in
#                           bindings/*/packages.txt (scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-all}"
case "$mode" in
  core | all) ;;
  *) echo "usage: $0 [core|all]" >&2; exit 2 ;;
esac

packages=(build-essential cmake ninja-build ccache pkg-config
          libsentencepiece-dev libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcli11-dev
          flatbuffers-compiler libflatbuffers-dev libxxhash-dev)  # .pvllm: FlatBuffers, XXH3
if [ "$mode" = all ]; then
  packages+=(libgtest-dev
             libssl-dev  # tests: SHA-256 (libcrypto) of dequantized GGUF tensors
             clang libclang-rt-14-dev  # scripts/fuzz.sh: clang and its libFuzzer runtime
             abigail-tools lintian python3)  # abi_check.sh, deb_check.sh
  for list in bindings/*/packages.txt; do
    [ -f "$list" ] || continue
    while read -r p; do
      [ -n "$p" ] && [ "${p#\#}" = "$p" ] && packages+=("$p")
    done < "$list"
  done
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  # The core list is what a first build needs: without the packages Debian
  # merely recommends, it installs in a fraction of the time.
  extra=()
  [ "$mode" = core ] && extra=(--no-install-recommends)
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${extra[@]}" "${missing[@]}" \
    >/dev/null
fi
