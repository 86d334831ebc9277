#!/usr/bin/env bash
# Installs what building and testing pvllm needs (Debian 12): the core's
# packages below plus each SDK's list in bindings/*/packages.txt.
# Idempotent: skips apt when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build ccache pkg-config
          libsentencepiece-dev libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcli11-dev
          flatbuffers-compiler libflatbuffers-dev libxxhash-dev  # the .pvllm file format
          libgtest-dev
          clang libclang-rt-14-dev  # scripts/fuzz.sh: clang and its libFuzzer runtime
          abigail-tools lintian python3)  # abi_check.sh, deb_check.sh
for list in bindings/*/packages.txt; do
  [ -f "$list" ] || continue
  while read -r p; do
    [ -n "$p" ] && [ "${p#\#}" = "$p" ] && packages+=("$p")
  done < "$list"
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
