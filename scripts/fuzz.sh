#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, sanitized, in build-fuzz)
# and runs each for a bounded time: scripts/fuzz.sh [seconds_per_target]
# [target...]. The default, 12 s for each of the 10 targets, keeps a CI run
# near 120 s after the build. Fails on the first crash, leak, timeout or
# sanitizer report, printing the reproducer's path. New corpus entries go
# to build-fuzz/corpus/<target> (the seeds in fuzz/corpus are only read);
# docs/fuzzing.md tells how to run for hours and how to add seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
seconds="${1:-12}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tokenizer_json tokenizer_model chat_template hf_config
                                     safetensors llama2c capi constraint pvllm_file gguf)
build="${PVLLM_FUZZ_BUILD_DIR:-$root/build-fuzz}"

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is missing (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DPVLLM_FUZZ=ON -DPVLLM_CUDA=OFF -DPVLLM_BUILD_TESTS=OFF -DPVLLM_BUILD_TOOLS=OFF >/dev/null
fi
cmake --build "$build" --target pvllm_fuzz_targets -j "$(nproc)"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=5 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  case "$t" in
    chat_template) args+=(-dict="$root/fuzz/dict/jinja.dict") ;;
    tokenizer_json | hf_config | safetensors | constraint) args+=(-dict="$root/fuzz/dict/json.dict") ;;
    gguf) args+=(-dict="$root/fuzz/dict/gguf.dict") ;;
  esac
  log="$build/artifacts/$t.log"
  echo "fuzz: $t for ${seconds} s"
  start=$(date +%s)
  if ! "$build/fuzz/fuzz_$t" "${args[@]}" "$corpus" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    grep -E "ERROR|SUMMARY|runtime error" "$log" | head -5 >&2 || true
    echo "fuzz: $t FAILED; log $log" >&2
    for a in "$artifacts"/*; do
      [ -f "$a" ] && echo "fuzz: reproduce with $build/fuzz/fuzz_$t $a" >&2
    done
    exit 1
  fi
  echo "fuzz: $t ok in $(( $(date +%s) - start )) s: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs"
done
