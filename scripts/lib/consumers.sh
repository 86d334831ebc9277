# Sourced by the install checks (install_check.sh, deb_check.sh,
# vcpkg_port_check.sh): build packaging/consumers/ against an installed
# pvllm and check what the programs print. The caller sets `check_name`
# (the prefix of messages), `tmp` (a scratch folder), and runs from the
# repository root.
model="$(pwd)/models/stories260K/stories260K.bin"
prompt="Once upon a time"
abi="$(sed -n 's/^#define PVLLM_ABI_VERSION \([0-9]*\)$/\1/p' capi/include/pvllm/pvllm.h)"

fail() { echo "$check_name: FAIL: $*" >&2; exit 1; }
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$2"; }

[ -n "$abi" ] || fail "no PVLLM_ABI_VERSION in pvllm.h"
[ -f "$model" ] || fail "no $model"

# Output must continue the prompt with words.
check_text() {  # NAME OUTPUT_FILE
  local words
  words="$(sed "s/^$prompt//" "$2" | grep -Eo '[A-Za-z]{2,}' | wc -l)"
  [ "$words" -ge 3 ] || { cat "$2" >&2; fail "$1 generated no text"; }
  echo "$check_name: $1: $(head -c 100 "$2" | tr '\n' ' ')..."
}

# A program must load the libpvllm of the install under test, not another.
check_loads() {  # NAME PROGRAM LIBDIR
  local lib
  lib="$(ldd "$2" | awk '$1 == "libpvllm.so.'"$abi"'" { print $3 }')"
  [ -n "$lib" ] && [ "$(realpath "$lib")" = "$(realpath "$3/libpvllm.so.$abi")" ] ||
    fail "$1 loads libpvllm from '$lib', not from $3"
}

run_program() {  # NAME OUTPUT_FILE PROGRAM ARGS...
  local name="$1" out="$2"
  shift 2
  "$@" >"$out" 2>"$out.err" || { cat "$out.err" >&2; fail "$name failed"; }
}

# The pvllm command of the install generates text.
check_cli() {  # PVLLM LIBDIR
  check_loads "$1" "$1" "$2"
  run_program "$1 generate" "$tmp/cli.out" "$1" generate --model "$model" \
    --prompt "$prompt" --max-tokens 40 --temperature 0
  check_text "$1 generate" "$tmp/cli.out"
}

# examples/c/generate.c as an outside C program through pkg-config
# (whatever PKG_CONFIG_PATH the caller set), built and run.
check_c_consumer() {  # LIBDIR
  rm -rf "$tmp/c"
  cp -r packaging/consumers/c "$tmp/c"
  cp examples/c/generate.c "$tmp/c/"
  pkg-config --exists --print-errors pvllm || fail "pkg-config does not find pvllm"
  make -s -C "$tmp/c" >"$tmp/c.log" 2>&1 || { cat "$tmp/c.log" >&2; fail "building the C consumer"; }
  check_loads "the C consumer" "$tmp/c/generate" "$1"
  run_program "the C consumer" "$tmp/c.out" "$tmp/c/generate" "$model" "$prompt"
  check_text "C consumer (pkg-config)" "$tmp/c.out"
}

# examples/cpp/generate.cc as an outside CMake project through
# find_package(pvllm CONFIG REQUIRED), built and run; find_package must
# take the package from CONFIG_DIR.
check_cpp_consumer() {  # LIBDIR CONFIG_DIR CMAKE_ARGS...
  local libdir="$1" config_dir="$2" found generator=()
  shift 2
  rm -rf "$tmp/cpp"
  cp -r packaging/consumers/cpp "$tmp/cpp"
  cp examples/cpp/generate.cc "$tmp/cpp/"
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$tmp/cpp" -B "$tmp/cpp/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" \
    >"$tmp/cpp.log" 2>&1 && cmake --build "$tmp/cpp/build" >>"$tmp/cpp.log" 2>&1 ||
    { cat "$tmp/cpp.log" >&2; fail "building the C++ consumer"; }
  found="$(cache_value pvllm_DIR "$tmp/cpp/build/CMakeCache.txt")"
  [ "$found" = "$config_dir" ] || fail "find_package found pvllm in '$found', not $config_dir"
  check_loads "the C++ consumer" "$tmp/cpp/build/generate" "$libdir"
  run_program "the C++ consumer" "$tmp/cpp.out" "$tmp/cpp/build/generate" "$model" "$prompt"
  check_text "C++ consumer (find_package)" "$tmp/cpp.out"
}

# The pvllm-server of the install serves a completion over HTTP, then
# drains and exits 0 on SIGTERM.
check_server() {  # PVLLM_SERVER LIBDIR
  local server="$1" pid addr i status=0
  check_loads "$server" "$server" "$2"
  "$server" --model "$model" --port 0 --device cpu --threads 1 >"$tmp/server.out" \
    2>"$tmp/server.log" &
  pid=$!
  for i in $(seq 100); do
    addr="$(sed -n 's/.*"address":"\([^"]*\)".*"msg":"serving".*/\1/p' "$tmp/server.log")"
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log" >&2; fail "$server exited at start"; }
    sleep 0.1
  done
  [ -n "$addr" ] || { kill "$pid"; cat "$tmp/server.log" >&2; fail "$server did not listen"; }
  python3 - "$addr" "$prompt" >"$tmp/server.text" <<'PY' || { kill "$pid"; fail "$server: no completion"; }
import json, sys, urllib.request
body = json.dumps({"prompt": sys.argv[2], "max_tokens": 40, "temperature": 0}).encode()
req = urllib.request.Request(f"http://{sys.argv[1]}/v1/completions", body,
                             {"Content-Type": "application/json"})
print(sys.argv[2] + json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["text"])
PY
  kill -TERM "$pid"
  wait "$pid" || status=$?
  [ "$status" -eq 0 ] || { cat "$tmp/server.log" >&2; fail "$server exited $status on SIGTERM"; }
  grep -q '"msg":"stopped"' "$tmp/server.log" || fail "$server logged no stop"
  check_text "$server (HTTP /v1/completions)" "$tmp/server.text"
}
