#!/usr/bin/env bash
# Line and branch coverage of core/ and capi/ by the C++ suites (gcovr):
#   scripts/coverage.sh [MIN_BRANCH_PERCENT]
# Builds build-cov (CPU only, -O0 --coverage), runs ctest there (with
# PVLLM_SHARED_DIR and PVLLM_REFERENCE_TOKENIZERS when set), then prints the
# summary and writes build-cov/coverage/{index.html,summary.json}. With an
# argument, fails when branch coverage of core/ and capi/ is below it.
# Branches count as C++ tools usually count them: --exclude-throw-branches
# (the compiler's exception-edge branches of every call that may throw are
# not decisions in the code) and --exclude-unreachable-branches.
# Not part of CI (a full -O0 build and run take a while on 2 cores): a
# documented command, figures in docs/guarantees.md.
set -euo pipefail
cd "$(dirname "$0")/.."
min="${1:-}"
command -v gcovr >/dev/null || { echo "coverage: gcovr not found (apt-get install gcovr)" >&2; exit 1; }
cmake -S . -B build-cov -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPVLLM_CUDA=OFF -DPVLLM_BUILD_BENCH=OFF -DPVLLM_SERVER=OFF \
  -DCMAKE_C_FLAGS="--coverage -O0" -DCMAKE_CXX_FLAGS="--coverage -O0" \
  -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage >/dev/null
cmake --build build-cov -j "$(nproc)"
find build-cov -name '*.gcda' -delete
ctest --test-dir build-cov -j "$(nproc)" >build-cov/ctest.log 2>&1 ||
  { tail -20 build-cov/ctest.log >&2; echo "coverage: some tests failed (build-cov/ctest.log)" >&2; }
mkdir -p build-cov/coverage
args=(--root . --object-directory build-cov --filter 'core/' --filter 'capi/'
  --exclude '.*_test\.cc' --exclude-throw-branches --exclude-unreachable-branches
  --gcov-ignore-parse-errors)
gcovr "${args[@]}" --print-summary --html-details build-cov/coverage/index.html \
  --json-summary build-cov/coverage/summary.json | tail -n 3
gcovr "${args[@]}" --sort-percentage --txt build-cov/coverage/by_file.txt >/dev/null
if [ -n "$min" ]; then
  branch="$(python3 -c "import json; print(json.load(open('build-cov/coverage/summary.json'))['branch_percent'])")"
  python3 -c "import sys; sys.exit(0 if float('$branch') >= float('$min') else 1)" ||
    { echo "coverage: branch coverage $branch% is below $min%" >&2; exit 1; }
fi
