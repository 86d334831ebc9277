#!/usr/bin/env bash
# Builds the C++ suites under a sanitizer and runs them:
#   scripts/sanitize.sh asan   AddressSanitizer + LeakSanitizer + UBSan, in build-asan
#   scripts/sanitize.sh tsan   ThreadSanitizer, in build-tsan
# One build per sanitizer (CPU only, -O1 -g; ccache when CMakeLists finds it), shared by every suite
# it runs. Any report fails the run: ASan/UBSan abort on the first finding,
# TSan exits non-zero (halt_on_error). Extra arguments go to ctest, e.g.
#   scripts/sanitize.sh tsan -R 'CapiEvents|RequestEvents'
#   PVLLM_SANITIZE_TARGETS="capi_test request_events_test" scripts/sanitize.sh asan -R '^(Capi|RequestEvents)'
#
# Which suites: ASan runs every C++ suite. TSan runs the suites that start
# threads (the C ABI's concurrency tests, the event router, the engine with
# its CPU thread pool, the C++ header), where a data race can live; the
# single-threaded parsers and kernels gain nothing from it and would triple
# its time. PVLLM_TSAN_ALL=1 runs everything under TSan too.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:?usage: sanitize.sh asan|tsan [ctest args...]}"
shift
case "$kind" in
  asan) option=-DPVLLM_SANITIZE=ON ;;
  tsan) option=-DPVLLM_TSAN=ON ;;
  *) echo "sanitize.sh: unknown sanitizer '$kind' (asan or tsan)" >&2; exit 2 ;;
esac
dir="build-$kind"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DPVLLM_CUDA=OFF -DPVLLM_BUILD_BENCH=OFF "$option" >/dev/null
# PVLLM_SANITIZE_TARGETS: build only these targets (default: everything).
# shellcheck disable=SC2086
cmake --build "$dir" -j "$(nproc)" ${PVLLM_SANITIZE_TARGETS:+--target $PVLLM_SANITIZE_TARGETS}

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
filter=()
if [ "$kind" = tsan ] && [ -z "${PVLLM_TSAN_ALL:-}" ] && [ "$#" -eq 0 ]; then
  filter=(-R '^(Capi|CppHeader|RequestEvents|Engine|SlidingWindowEngine|RandomWeightsEngine)|ThreadPool')
fi
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "${filter[@]}" "$@"
