#!/usr/bin/env bash
# Runs the GPU checks and benchmarks on the bare GPU machine, from the bundle
# that scripts/gpu_bundle.sh makes (gpu-bundle/, which travels gzipped as
# gpu-pack/gpu-bundle.tar.gz; this script is copied into it): no build, no
# network, nothing from the repository or ../shared is needed.
#
#   tar -xzf gpu-pack/gpu-bundle.tar.gz -C /tmp &&
#     STEPS="0 1 2" bash /tmp/gpu-bundle/gpu_check.sh   # one device call (any cwd)
#   bash gpu-bundle/gpu_check.sh --list-inputs      # "<step> <file>" each step reads
#   bash gpu-bundle/gpu_check.sh --list-budgets     # "<step> <command> <seconds>"
#   bash gpu-bundle/gpu_check.sh --list-calls       # the STEPS of each device call
#
# Steps, and the time budget of each command in seconds (`timeout` kills it
# there; the table is plan() below):
#   0  preflight          30  nvidia-smi -L, the driver version, where cuBLAS is,
#                             `ldd` of every bundled binary and library with the
#                             loader path below (any "not found" stops the later
#                             steps), the bundle's GLIBC_/GLIBCXX_ needs (REQUIRES)
#                             against this machine's glibc and libstdc++ (warns)
#   1  cuda_kernels_test 150  every CUDA kernel against its CPU reference, and the
#                             CUDA backend against the CPU backend
#   2  capi_test          60  the C ABI suites,
#      device_test        40  device selection,
#      engine_test       120  and the engine with goldens (CPU and CUDA), all with
#                             the CUDA module;
#      fault_walk_test    30  the CUDA module's allocations failed one by one
#   3  attention_bench    80  paged decode/prefill attention (both prefill kernels)
#                             against copy bandwidth measured in the same run,
#      sdpa_reference     80  and PyTorch SDPA on the shapes attention_bench wrote,
#                             with the ratios and the goals of docs/performance.md
#   4  hf_compare        300  pvllm on CUDA against transformers, both bf16 and
#                             greedy, vLLM's rule (each side's token in the other's
#                             top 5): stories260K (real), TinyLlama-1.1B and
#                             Llama-3-8B shapes (random weights)
#   5  bench_pvllm       270  pvllm bench on CUDA: batch-1 decode, the first 128
#                             nano requests, the whole nano workload (256)
#   6  bench_hf          340  transformers generate on the same first 128 nano
#                             requests at batch 64 (stops starting groups after
#                             220 s), and batch-1
#   7  sampling_bench     60  one decode step's sampling, 256 rows at 32k and
#                             128k vocabularies: logits to the host and host
#                             sampling against device sampling (ids only)
#   8  arch_goldens       50  transformers (CPU, float32) on the tiny model of each
#                             architecture (pvllm_make_tiny_model --arch all):
#                             greedy tokens and top-5 logits per step, one JSON per
#                             model in arch_goldens/ (for tests/data/arch_goldens)
#   9  memcheck           90  cuda_kernels_test's smallest shapes of every kernel
#      racecheck          90  under compute-sanitizer (SANITIZER_FILTER below)
#  10  memory_cuda       240  the memory story on CUDA (scripts/memory_cuda.sh):
#                             paged against contiguous on one KV budget, chat,
#                             long-output, shared-prefix and n = 4 traces
#  11  latency_sweep     240  TTFT and TPOT p50/p99 at 1, 16, 64 and 256
#                             concurrent requests, CUDA graphs on and off
#  12  quant_matmul_test  60  the Q8_0 / Q4_0 / Q4_K matmul kernels (GEMV and
#                             tensor cores) against core/quant's dequantized
#                             weights (cuda_kernels_test, QUANT_FILTER below),
#      quant_matmul_bench 180 and timed against cuBLAS bf16 on Llama-3-8B's
#                             shapes at m = 1, 16 and 512
# Step 0 runs in every call, whatever STEPS says: the others need its checks;
# the rest run in the order STEPS names them. A session's device time is
# 15 minutes, machine starts included, so the calls (calls() below, each at
# most 560 s of budgets) are made in this order, as many per session as its
# time allows: STEPS="0 1 2" (430 s of budgets; the correctness suites),
# "0 4 8 9" (560 s; transformers and the sanitizers), "0 3 7" (250 s; the
# attention and sampling benchmarks), "0 5" (300 s), "0 6" (370 s), "0 10 11"
# (510 s; memory and latency on CUDA), "0 12" (270 s; the quantized
# matmuls). Budgets are kill limits: most steps
# end far inside theirs.
#
# The environment of every step: LD_LIBRARY_PATH = the bundle's lib/ plus the
# folders holding libcublas.so.13 / libcublasLt.so.13 (searched: ldconfig -p,
# /usr/local/cuda/lib64, /usr/local/cuda/targets/x86_64-linux/lib, then
# nvidia/*/lib and nvidia/*/*/lib under every site-packages of python3, where
# the nvidia-cublas wheel keeps them); PVLLM_CUDA_BACKEND = the bundle's
# libpvllm_cuda.so; PVLLM_SHARED_DIR = the bundle's shared/ (real models and
# goldens; unset when the bundle has none).
#
# Output in $OUT (default ./gpu-out; the device tool brings back at most 8
# files): summary.txt (also printed last), summary.json (per command: step,
# name, exit code, seconds, JSON file, gtest counts) and results.tar.gz with
# every command's JSON and log and preflight.json. PACK=0 leaves those as
# files in $OUT instead of the archive. Exit status 0 when every command ran
# and passed.
set -uo pipefail

# step command budget(s): the one table of what runs and for how long.
plan() {
  cat <<'EOF'
0 preflight 30
1 cuda_kernels_test 150
2 capi_test 60
2 device_test 40
2 engine_test 120
2 fault_walk_test 30
3 attention_bench 80
3 sdpa_reference 80
4 hf_compare 300
5 bench_pvllm 270
6 bench_hf 340
7 sampling_bench 60
8 arch_goldens 50
9 memcheck 90
9 racecheck 90
10 memory_cuda 240
11 latency_sweep 240
12 quant_matmul_test 60
12 quant_matmul_bench 180
EOF
}
# The device calls that together run every step, in the order to make them:
# a session's device time is 15 minutes, machine starts included, so the
# first two calls (the GPU correctness issue: kernels, suites, sanitizers,
# then transformers) are sized to fit one session with time for a rerun;
# the benchmarks follow in later sessions. Each call is at most 560 s of
# budgets (most steps end far inside theirs).
calls() { printf '%s\n' "0 1 2" "0 4 8 9" "0 3 7" "0 5" "0 6" "0 10 11" "0 12"; }
budget() { plan | awk -v n="$1" '$2 == n { print $3 }'; }
# The kernel tests compute-sanitizer runs (memcheck, racecheck): every
# kernel family at its smallest shapes (the 8-bit KV cache's write and
# attention among them: Kv8/*), no whole-model backend tests.
# Step 12's tests: the quantized matmuls' CPU layout checks and GPU runs
# (step 1 runs them too, among everything else).
QUANT_FILTER='*QuantLayout*:*QuantMatmul*'
SANITIZER_FILTER='AllSupported/*bf16_d64_b16_g*:Generic/*bf16_d8_b8_g4*:AllSupported/*fp16_d128_b32_g4*:Shapes/*:Sizes/*:Hidden/*:CudaRmsNorm.*:CudaSampling.*:Kv8/*int8_bf16_d64*:Kv8/*fp8_f16_d8*-*LongContext*:*BenchmarkPromptLengths*'

# transformers' nano measurement: the first HF_SUBSET requests at one batch
# size, no new group after HF_MAX_SECONDS (inside bench_hf's budget).
HF_SUBSET=128
HF_BATCH=64
HF_MAX_SECONDS=220
PVLLM_MAX_SECONDS=240  # inside bench_pvllm's budget

# Every file each step reads, relative to the bundle. shared/ entries are
# the real models and goldens: a bundle made without them runs the rest.
step_inputs() {
  case $1 in
    0) echo bin lib REQUIRES ;;
    1) echo bin/cuda_kernels_test lib/libpvllm_cuda.so ;;
    2) echo bin/capi_test bin/device_test bin/engine_test bin/fault_walk_test lib/libpvllm.so.1 lib/libpvllm_cuda.so \
         shared/golden/stories260K-greedy.json shared/models/stories260K/stories260K.bin \
         shared/models/stories260K/tok512.model shared/models/stories260K-hf/config.json \
         shared/models/stories260K-hf/model.safetensors shared/models/stories260K-hf/tokenizer.model ;;
    3) echo bin/attention_bench scripts/sdpa_reference.py ;;
    4) echo scripts/hf_compare.py scripts/model_shapes.py lib/libpvllm.so.1 lib/libpvllm_cuda.so \
         shared/models/llama2-tokenizer/tokenizer.model shared/models/stories260K-hf/config.json \
         shared/models/stories260K-hf/model.safetensors ;;
    5) echo scripts/bench_vs_transformers.py scripts/model_shapes.py bin/pvllm lib/libpvllm.so.1 lib/libpvllm_cuda.so ;;
    6) echo scripts/bench_vs_transformers.py scripts/model_shapes.py bin/pvllm lib/libpvllm.so.1 ;;
    7) echo bin/sampling_bench ;;
    8) echo bin/pvllm_make_tiny_model scripts/arch_goldens.py ;;
    9) echo bin/cuda_kernels_test ;;
    10) echo scripts/memory_cuda.sh bin/pvllm lib/libpvllm.so.1 lib/libpvllm_cuda.so ;;
    11) echo scripts/latency_sweep.py bin/pvllm lib/libpvllm.so.1 lib/libpvllm_cuda.so ;;
    12) echo bin/cuda_kernels_test bin/cuda_quant_matmul_bench ;;
  esac
}

case "${1:-}" in
  --list-inputs)
    for s in 0 1 2 3 4 5 6 7 8 9 10 11 12; do for f in $(step_inputs "$s"); do echo "$s $f"; done; done
    exit 0 ;;
  --list-budgets) plan; exit 0 ;;
  --list-calls) calls; exit 0 ;;
  "") ;;
  *) echo "usage: [STEPS=\"0 1 ...\"] [OUT=dir] [PACK=0] $0 [--list-inputs|--list-budgets|--list-calls]" >&2
     exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -d "$here/bin" ] && [ -f "$here/../gpu-bundle/gpu_check.sh" ]; then
  exec bash "$here/../gpu-bundle/gpu_check.sh" "$@"  # the repository's copy: run the bundle's
fi
if [ ! -d "$here/bin" ] || [ ! -d "$here/lib" ]; then
  echo "gpu_check: no bundle beside $0: make one with scripts/gpu_bundle.sh, carry gpu-pack" \
       "and unpack gpu-pack/gpu-bundle.tar.gz" >&2
  exit 2
fi
bundle="$here"
bin="$bundle/bin"
lib="$bundle/lib"
scripts="$bundle/scripts"

out="${OUT:-gpu-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [ "${PACK:-1}" = 0 ]; then work="$out"; else work="$(mktemp -d)"; fi
steps=" 0 ${STEPS:-1 2 3 4 5 6 7 8 9 10 11 12} "

json_str() {  # a bash string as a JSON string
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//$'\r'/}
  printf '"%s"' "$s"
}
json_list() {  # JSON list of strings from the arguments
  local first=1 x
  printf '['
  for x in "$@"; do [ $first = 1 ] || printf ', '; first=0; json_str "$x"; done
  printf ']'
}

# --- the loader path: the bundle's lib/ and cuBLAS, wherever the image keeps it
cublas_names=(libcublas.so.13 libcublasLt.so.13)
cublas_searched=()
declare -A cublas_at=()
cublas_dirs=()
find_in_ldconfig() { "$(command -v ldconfig || echo /sbin/ldconfig)" -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64/ { print $NF; exit }'; }
site_dirs=()
command -v python3 >/dev/null &&
  mapfile -t site_dirs < <(python3 -c 'import site,sys; print("\n".join(site.getsitepackages()))' 2>/dev/null)
python_dirs=()
for sp in "${site_dirs[@]}"; do
  for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/*/lib; do [ -d "$d" ] && python_dirs+=("$d"); done
done
for name in "${cublas_names[@]}"; do
  path="$(find_in_ldconfig "$name")"
  if [ -n "$path" ]; then
    cublas_at[$name]="$path (ldconfig cache)"
    continue
  fi
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib "${python_dirs[@]}"; do
    if [ -e "$d/$name" ]; then
      cublas_at[$name]="$d/$name"
      case " ${cublas_dirs[*]} " in *" $d "*) ;; *) cublas_dirs+=("$d") ;; esac
      break
    fi
  done
done
cublas_searched=("ldconfig -p" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
for sp in "${site_dirs[@]}"; do cublas_searched+=("$sp/nvidia/*/lib" "$sp/nvidia/*/*/lib"); done
[ ${#site_dirs[@]} != 0 ] || cublas_searched+=("(no python3 site-packages)")
# A libstdc++ older than the binaries need (REQUIRES): the bundle's copy
# (fallback-lib/, newer and backwards compatible) goes on the loader path.
need_glibcxx="$(awk '$1 == "GLIBCXX" { print $2 }' "$bundle/REQUIRES" 2>/dev/null)"
stdcxx="$(find_in_ldconfig libstdc++.so.6)"
have_glibcxx=""
[ -n "$stdcxx" ] && have_glibcxx="$(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$stdcxx" | sed 's/GLIBCXX_//' |
                                      sort -uV | tail -n 1)"
older() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" != "$2" ] &&
          [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }
use_fallback=0
if [ -z "$have_glibcxx" ] || older "$have_glibcxx" "$need_glibcxx"; then use_fallback=1; fi
loader_path="$lib"
[ $use_fallback = 1 ] && loader_path+=":$bundle/fallback-lib"
for d in "${cublas_dirs[@]}"; do loader_path+=":$d"; done
export LD_LIBRARY_PATH="$loader_path"
export PVLLM_CUDA_BACKEND="$lib/libpvllm_cuda.so"
export PVLLM_REPO_MODELS="$bundle/repo-models"
if [ -d "$bundle/shared" ]; then
  export PVLLM_SHARED_DIR="$bundle/shared"
else
  unset PVLLM_SHARED_DIR
fi
export PYTHONUNBUFFERED=1
for name in "${cublas_names[@]}"; do
  if [ -n "${cublas_at[$name]:-}" ]; then
    echo "gpu_check: $name: ${cublas_at[$name]}"
  else
    echo "gpu_check: $name: NOT FOUND (searched: ${cublas_searched[*]}); the CUDA module will not load"
  fi
done
echo "gpu_check: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "gpu_check: PVLLM_SHARED_DIR=${PVLLM_SHARED_DIR:-<unset: the bundle has no shared/>}"

# --- running commands and recording them
records=()  # one JSON object per command
lines=()    # one summary line per command
failed=0
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
gtest_counts() {  # "tests failures skipped" of a gtest JSON file
  [ -f "$1" ] && command -v python3 >/dev/null || return 0
  python3 - "$1" <<'EOF' 2>/dev/null
import json, sys
d = json.load(open(sys.argv[1]))
cases = [t for s in d.get("testsuites", []) for t in s.get("testsuite", [])]
skipped = sum(1 for t in cases if t.get("result") == "SKIPPED")
print(d.get("tests", len(cases)), d.get("failures", 0) + d.get("errors", 0), skipped)
EOF
}
record() {  # step name rc seconds json note
  local step=$1 name=$2 rc=$3 secs=$4 json=$5 note=$6 counts="" extra="" line
  [ "$rc" = 0 ] || failed=1
  [ -f "$work/$json" ] || json=""
  case $json in *_test.json) counts="$(gtest_counts "$work/$json")" ;; esac
  line="step $step $name: rc=$rc, $secs s"
  if [ -n "$counts" ]; then
    read -r t f s <<<"$counts"
    extra=", \"tests\": $t, \"failures\": $f, \"skipped\": $s"
    line+=", $t tests, $f failed, $s skipped"
  fi
  [ -n "$note" ] && line+=" ($note)"
  line+=" [${json:-no JSON}]"
  lines+=("$line")
  records+=("{\"step\": $step, \"name\": $(json_str "$name"), \"exit_code\": $rc, \"seconds\": $secs, \"json\": $(if [ -n "$json" ]; then json_str "$json"; else echo null; fi), \"note\": $(json_str "$note")$extra}")
}
run() {  # step name json command...: runs it within its budget
  local step=$1 name=$2 json=$3 limit rc start note=""
  shift 3
  limit="$(budget "$name")"
  echo "== step $step: $name (budget $limit s)"
  start="$(now)"
  timeout --kill-after=10 "$limit" "$@" > "$work/$name.log" 2>&1
  rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then note="killed at its budget of $limit s"; fi
  tail -n 12 "$work/$name.log"
  record "$step" "$name" "$rc" "$(since "$start")" "$json" "$note"
}
not_run() {  # step name reason
  failed=1
  lines+=("step $1 $2: not run ($3)")
  records+=("{\"step\": $1, \"name\": $(json_str "$2"), \"exit_code\": null, \"seconds\": 0, \"json\": null, \"note\": $(json_str "not run: $3")}")
}
gtest() {  # step name: a gtest suite of the bundle with JSON output
  run "$1" "$2" "$2.json" "$bin/$2" --gtest_brief=1 --gtest_output="json:$work/$2.json"
}

# --- step 0: preflight
gpus=""
driver=""
warnings=()
preflight() {
  local smi_rc=0 f line missing=() inputs_missing=() shared_missing=()
  # Each command has its own short limit; together they stay within the budget.
  gpus="$(timeout 10 nvidia-smi -L 2>&1)" || smi_rc=$?
  driver="$(timeout 10 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null |
            head -n 1)"
  echo "$gpus"
  [ $smi_rc = 0 ] || warnings+=("nvidia-smi failed: no GPU visible; the CUDA tests will skip")
  for f in "$bin"/* "$lib"/*; do
    if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
    while read -r line; do
      case $line in *"not found"*) missing+=("${f#"$bundle"/}: $line") ;; esac
    done < <(timeout 5 ldd "$f" 2>&1 || echo "ldd failed or timed out: not found")
  done
  for s in $steps; do
    for f in $(step_inputs "$s"); do
      [ -e "$bundle/$f" ] && continue
      case $f in shared/*) shared_missing+=("$f") ;; *) inputs_missing+=("step $s: $f") ;; esac
    done
  done
  [ ${#shared_missing[@]} = 0 ] ||
    warnings+=("no real models/goldens in the bundle (${#shared_missing[@]} files): their tests skip")
  local need_glibc have_glibc
  need_glibc="$(awk '$1 == "GLIBC" { print $2 }' "$bundle/REQUIRES" 2>/dev/null)"
  have_glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')"
  if older "$have_glibc" "$need_glibc"; then
    warnings+=("this glibc is $have_glibc, the bundle needs GLIBC_$need_glibc")
  fi
  if [ $use_fallback = 1 ]; then
    warnings+=("this libstdc++ has GLIBCXX_${have_glibcxx:-?}, the bundle needs GLIBCXX_$need_glibcxx: using the bundle's fallback-lib/")
  fi
  [ -n "${cublas_at[libcublas.so.13]:-}" ] || warnings+=("libcublas.so.13 not found")
  local ok=true
  [ ${#missing[@]} = 0 ] && [ ${#inputs_missing[@]} = 0 ] || ok=false
  local cublas_json="{"
  for name in "${cublas_names[@]}"; do
    cublas_json+="$(json_str "$name"): $(if [ -n "${cublas_at[$name]:-}" ]; then json_str "${cublas_at[$name]}"; else echo null; fi), "
  done
  cublas_json+="\"searched\": $(json_list "${cublas_searched[@]}")}"
  cat > "$work/preflight.json" <<EOF
{
  "ok": $ok,
  "commit": $(json_str "$(cat "$bundle/COMMIT" 2>/dev/null)"),
  "nvidia_smi_exit_code": $smi_rc,
  "gpus": $(json_str "$gpus"),
  "driver_version": $(json_str "$driver"),
  "cublas": $cublas_json,
  "ld_library_path": $(json_str "$LD_LIBRARY_PATH"),
  "pvllm_cuda_backend": $(json_str "$PVLLM_CUDA_BACKEND"),
  "pvllm_shared_dir": $(json_str "${PVLLM_SHARED_DIR:-}"),
  "libraries_not_found": $(json_list "${missing[@]}"),
  "inputs_missing": $(json_list "${inputs_missing[@]}"),
  "shared_inputs_missing": $(json_list "${shared_missing[@]}"),
  "glibc": {"needed": $(json_str "$need_glibc"), "here": $(json_str "$have_glibc")},
  "glibcxx": {"needed": $(json_str "$need_glibcxx"), "here": $(json_str "$have_glibcxx"),
              "libstdcxx": $(json_str "$stdcxx")},
  "warnings": $(json_list "${warnings[@]}")
}
EOF
  for line in "${missing[@]}" "${inputs_missing[@]}"; do echo "gpu_check: MISSING $line"; done
  for line in "${warnings[@]}"; do echo "gpu_check: WARNING $line"; done
  [ "$ok" = true ]
}
echo "== step 0: preflight (commit $(cat "$bundle/COMMIT" 2>/dev/null || echo unknown))"
start="$(now)"
preflight
pre_rc=$?
record 0 preflight "$pre_rc" "$(since "$start")" preflight.json \
  "$( [ $pre_rc = 0 ] || echo "libraries or inputs missing: see preflight.json" )"

# --- steps 1-9, in the order STEPS names them
for step in $steps; do
  [ "$step" = 0 ] && continue
  if [ $pre_rc != 0 ]; then
    for name in $(plan | awk -v s=$step '$1 == s { print $2 }'); do
      not_run "$step" "$name" "preflight failed"
    done
    continue
  fi
  case $step in
    1) gtest 1 cuda_kernels_test ;;
    2) gtest 2 capi_test
       gtest 2 device_test
       gtest 2 engine_test
       gtest 2 fault_walk_test ;;
    3) run 3 attention_bench attention_bench.json \
         "$bin/attention_bench" --json "$work/attention_bench.json"
       run 3 sdpa_reference sdpa_reference.json \
         python3 "$scripts/sdpa_reference.py" --shapes "$work/attention_bench.json" \
         --json "$work/sdpa_reference.json" ;;
    4) run 4 hf_compare hf_compare.json \
         python3 "$scripts/hf_compare.py" --lib "$lib/libpvllm.so.1" --json "$work/hf_compare.json" ;;
    5) run 5 bench_pvllm bench_pvllm.json \
         python3 "$scripts/bench_vs_transformers.py" --pvllm "$bin/pvllm" --skip-hf \
         --subset "$HF_SUBSET" --pvllm-max-seconds "$PVLLM_MAX_SECONDS" \
         --json "$work/bench_pvllm.json" ;;
    6) pv=()  # step 5 in the same call: print the two side by side
       [ -f "$work/bench_pvllm.json" ] && pv=(--pvllm-results "$work/bench_pvllm.json")
       run 6 bench_hf bench_hf.json \
         python3 "$scripts/bench_vs_transformers.py" --pvllm "$bin/pvllm" --skip-pvllm \
         "${pv[@]}" --subset "$HF_SUBSET" --batch-sizes "$HF_BATCH" \
         --hf-max-seconds "$HF_MAX_SECONDS" --json "$work/bench_hf.json" ;;
    7) run 7 sampling_bench sampling_bench.json \
         "$bin/sampling_bench" --json "$work/sampling_bench.json" ;;
    8) run 8 arch_goldens arch_goldens.json \
         python3 "$scripts/arch_goldens.py" --make-tiny-model "$bin/pvllm_make_tiny_model" \
         --out "$work/arch_goldens" --json "$work/arch_goldens.json" ;;
    9) sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
       if [ ! -x "$sanitizer" ]; then
         not_run 9 memcheck "no compute-sanitizer on this machine"
         not_run 9 racecheck "no compute-sanitizer on this machine"
         continue
       fi
       for tool in memcheck racecheck; do
         run 9 "$tool" "$tool.json" "$sanitizer" --tool "$tool" --error-exitcode 1 \
           "$bin/cuda_kernels_test" --gtest_brief=1 --gtest_filter="$SANITIZER_FILTER" \
           --gtest_output="json:$work/$tool.json"
       done ;;
    10) run 10 memory_cuda memory_cuda/chat.json \
          env PVLLM="$bin/pvllm" OUT="$work/memory_cuda" bash "$scripts/memory_cuda.sh" ;;
    11) run 11 latency_sweep latency_sweep.json \
          python3 "$scripts/latency_sweep.py" --pvllm "$bin/pvllm" --json "$work/latency_sweep.json" \
          --timeout 100 ;;
    12) run 12 quant_matmul_test quant_matmul_test.json "$bin/cuda_kernels_test" --gtest_brief=1 \
          --gtest_filter="$QUANT_FILTER" --gtest_output="json:$work/quant_matmul_test.json"
        run 12 quant_matmul_bench quant_matmul_bench.json \
          "$bin/cuda_quant_matmul_bench" --json "$work/quant_matmul_bench.json" ;;
    *) echo "gpu_check: no step $step" >&2 ;;
  esac
done

# --- summary, printed last
{
  echo "{"
  echo "  \"commit\": $(json_str "$(cat "$bundle/COMMIT" 2>/dev/null)"),"
  echo "  \"steps_asked\": $(json_str "${STEPS:-1 2 3 4 5 6 7 8 9 10 11 12}"),"
  echo "  \"ok\": $([ $failed = 0 ] && echo true || echo false),"
  echo "  \"archive\": $([ "${PACK:-1}" = 0 ] && echo null || echo '"results.tar.gz"'),"
  echo "  \"commands\": ["
  for i in "${!records[@]}"; do
    sep=","; [ "$i" = $((${#records[@]} - 1)) ] && sep=""
    echo "    ${records[$i]}$sep"
  done
  echo "  ]"
  echo "}"
} > "$out/summary.json"
{
  echo "gpu_check summary (commit $(head -n 1 "$bundle/COMMIT" 2>/dev/null))"
  echo "GPU: ${gpus:-none}; driver ${driver:-unknown}"
  for name in "${cublas_names[@]}"; do echo "$name: ${cublas_at[$name]:-NOT FOUND}"; done
  for line in "${warnings[@]}"; do echo "WARNING: $line"; done
  printf '%s\n' "${lines[@]}"
  [ $failed = 0 ] && echo "ALL PASSED" || echo "SOMETHING FAILED OR DID NOT RUN"
} > "$out/summary.txt"
if [ "${PACK:-1}" != 0 ]; then
  tar -czf "$out/results.tar.gz" -C "$work" . && rm -rf "$work"
fi
echo
cat "$out/summary.txt"
exit $failed
