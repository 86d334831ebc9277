#!/usr/bin/env bash
# Makes gpu-bundle/ (git-ignored): everything the GPU machine runs, and
# gpu-pack/gpu-bundle.tar.gz (git-ignored), the same folder gzipped for the
# device tool to carry there (it carries at most 64 MiB with the working
# tree; the binaries shrink about threefold). On the GPU machine:
#   tar -xzf gpu-pack/gpu-bundle.tar.gz -C /tmp && bash /tmp/gpu-bundle/gpu_check.sh
# (docs/gpu_run.md).
#
#   bash scripts/gpu_bundle.sh            # build (CUDA required) and bundle
#   bash scripts/gpu_bundle.sh --verify   # and check the bundle here, no GPU
#
# Builds in ./build with scripts/build.sh -DPVLLM_CUDA=ON (the one build
# every suite shares), then gathers:
#   bin/      the suites that reach the GPU (cuda_kernels_test, capi_test,
#             device_test, engine_test, fault_walk_test, cpp_header_test), pvllm_make_tiny_model,
#             the pvllm command and the programs of build/bench/ that a
#             gpu_check.sh step runs (its --list-inputs)
#   lib/      libpvllm.so*, libpvllm_cuda.so and each shared library those
#             need that is none of: the NVIDIA driver (libcuda), cuBLAS(Lt)
#             (gpu_check.sh finds the GPU image's), and the base system
#             (glibc's libraries, libstdc++, libgcc_s) — found with ldd
#   shared/   models/{stories260K,stories260K-hf,llama2-tokenizer} and golden/
#             from ${PVLLM_SHARED_DIR:-../shared} (left out, with a note, when
#             that folder is absent)
#   repo-models/  the repository's models/stories260K ($PVLLM_REPO_MODELS there)
#   scripts/  hf_compare.py, bench_vs_transformers.py, sdpa_reference.py,
#             arch_goldens.py (scripts/hf_reference/; step 8 makes its tiny
#             models with bin/pvllm_make_tiny_model), memory_cuda.sh,
#             latency_sweep.py, model_shapes.py (the shapes the transformers
#             scripts share)
#   fallback-lib/  this build's libstdc++ and libgcc_s, used on the GPU
#             machine only when its own libstdc++ is older than REQUIRES says
#   gpu_check.sh, COMMIT (git rev-parse HEAD), REQUIRES (the highest
#   GLIBC_/GLIBCXX_ versions the binaries need) and MANIFEST (every file and
#   its size). Prints the bundle's size.
#
# --verify then checks, in a few seconds (the build aside):
#   - ldd with LD_LIBRARY_PATH=gpu-bundle/lib alone: every dependency of
#     every bundled binary and library resolves into the bundle, or is
#     libcuda / libcublas / libcublasLt, or is a base-system library;
#   - no bundled binary holds the absolute path of this checkout or of the
#     build tree (strings), except the CUDA line tables (-lineinfo) naming
#     kernels/cuda/*.cu for profilers;
#   - every input gpu_check.sh --list-inputs names is in the bundle, the
#     step budgets fit (each step <= 480 s, each listed device call
#     <= 560 s, every step in some call), and the bundle is under 64 MiB;
#   - a copy of the bundle in a fresh temporary folder, run from there with
#     a clean environment (nothing of this checkout or ../shared reachable):
#     gpu_check.sh STEPS="0 1 2" on the CPU (preflight, cuda_kernels_test
#     whose GPU cases skip, capi_test, device_test, engine_test), each exit 0,
#     the CPU golden tests run and passed (not skipped) when the bundle has the
#     models, the CUDA module's export test not skipped; and py_compile of
#     the Python scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd -P)"
root_as_named="$(pwd)"
verify=0
case "${1:-}" in
  --verify) verify=1 ;;
  "") ;;
  *) echo "usage: $0 [--verify]" >&2; exit 2 ;;
esac
limit_mib=64

bash scripts/setup.sh
bash scripts/build.sh -DPVLLM_CUDA=ON
build="$root/build"
[ -f "$build/capi/libpvllm_cuda.so" ] || { echo "gpu_bundle: no libpvllm_cuda.so in build/" >&2; exit 1; }

# What is never bundled: the driver, cuBLAS, and the base system (a
# bundled libstdc++ on LD_LIBRARY_PATH would break torch in the Python steps).
is_external() {
  case $1 in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libstdc++.so.* | libgcc_s.so.* | libcuda.so.* | libcublas.so.* | \
      libcublasLt.so.*) return 0 ;;
  esac
  return 1
}

bundle="$root/gpu-bundle"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/scripts"

# Programs.
# The suites that run code on the GPU (gpu_check.sh runs the first four);
# the CPU-only ones stay home, for the 64 MiB the device tool carries.
programs=()
for t in cuda_kernels_test capi_test device_test engine_test fault_walk_test cpp_header_test; do
  programs+=("$build/tests/$t")
done
programs+=("$build/tests/pvllm_make_tiny_model" "$build/tools/pvllm")
# Of build/bench/, only the programs a gpu_check.sh step runs: the CPU
# benches stay home, and with them what they link when it is installed
# (OpenBLAS and oneDNN alone are 76 MiB, over what the device tool carries).
while read -r _ f; do
  case $f in bin/*) [ -f "$build/bench/${f#bin/}" ] && programs+=("$build/bench/${f#bin/}") ;; esac
done < <(bash scripts/gpu_check.sh --list-inputs | sort -u -k2)
for f in "${programs[@]}"; do
  if [ ! -f "$f" ] || [ ! -x "$f" ]; then echo "gpu_bundle: missing $f" >&2; exit 1; fi
  cp "$f" "$bundle/bin/"
done
# Libraries: ours (the links and the one file they name: a build folder
# keeps the libpvllm.so.0.x.y of every earlier version), then what ldd says
# everything needs.
cp -a "$build/capi/libpvllm.so" "$build/capi/libpvllm.so.1" "$(readlink -f "$build/capi/libpvllm.so.1")" \
  "$build/capi/libpvllm_cuda.so" "$bundle/lib/"
# Debug info stays home (symbols stay, for backtraces): it would take the
# bundle past what the device tool carries (libpvllm is built with -g for
# the ABI check).
for f in "$bundle"/bin/* "$bundle"/lib/libpvllm*; do
  [ -L "$f" ] || strip --strip-debug "$f"
done
for f in "$bundle"/bin/* "$bundle"/lib/*; do
  [ -L "$f" ] && continue
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_external "$name" && continue
    case $name in libpvllm*) continue ;; esac
    [ -e "$bundle/lib/$name" ] && continue
    [ -f "$path" ] || { echo "gpu_bundle: $f needs $name, which ldd does not find" >&2; exit 1; }
    cp -L "$path" "$bundle/lib/$name"
  done < <(LD_LIBRARY_PATH="$build/capi" ldd "$f")
done

# The C++ runtime this build links, kept aside: gpu_check.sh puts it on the
# loader path only where the machine's libstdc++ is older than the binaries
# need (a newer one is backwards compatible, so torch keeps working with it).
mkdir -p "$bundle/fallback-lib"
while read -r name arrow path _; do
  case $name in
    libstdc++.so.* | libgcc_s.so.*) [ "$arrow" = "=>" ] && cp -L "$path" "$bundle/fallback-lib/$name" ;;
  esac
done < <(LD_LIBRARY_PATH="$build/capi" ldd "$bundle/bin/pvllm")
[ -f "$bundle/fallback-lib/libstdc++.so.6" ] ||
  { echo "gpu_bundle: ldd does not name libstdc++.so.6 for pvllm" >&2; exit 1; }

# The repository's own stories260K (always there: engine_test's tests that
# must never skip read it through $PVLLM_REPO_MODELS, which gpu_check.sh sets).
mkdir -p "$bundle/repo-models"
cp -r --no-preserve=mode models/stories260K "$bundle/repo-models/"

# The real models and goldens.
shared="${PVLLM_SHARED_DIR:-../shared}"
if [ -d "$shared/models" ] && [ -d "$shared/golden" ]; then
  mkdir -p "$bundle/shared/models"
  for m in stories260K stories260K-hf llama2-tokenizer; do
    cp -r --no-preserve=mode "$shared/models/$m" "$bundle/shared/models/"
  done
  cp -r --no-preserve=mode "$shared/golden" "$bundle/shared/"
  echo "gpu_bundle: models and goldens from $shared"
else
  echo "gpu_bundle: NOTE no models/ and golden/ under $shared: the bundle has no real" \
       "models; their tests will skip on the GPU machine"
fi

# Scripts.
cp scripts/gpu_check.sh "$bundle/"
cp scripts/hf_compare.py scripts/bench_vs_transformers.py bench/sdpa_reference.py \
  scripts/hf_reference/arch_goldens.py scripts/memory_cuda.sh scripts/latency_sweep.py \
  scripts/model_shapes.py \
  "$bundle/scripts/"

# What the binaries need of the C and C++ runtime.
highest() {  # prefix: the highest version of that prefix any bundled ELF file needs
  local f
  for f in "$bundle"/bin/* "$bundle"/lib/*; do
    [ -L "$f" ] || objdump -T "$f"
  done | grep -o "(${1}_[0-9][0-9.]*)" | tr -d '()' | sed "s/^${1}_//" | sort -uV | tail -n 1
}
{
  echo "GLIBC $(highest GLIBC)"
  echo "GLIBCXX $(highest GLIBCXX)"
} > "$bundle/REQUIRES"

commit="$(git rev-parse HEAD)"
git diff --quiet HEAD -- 2>/dev/null || commit+=" (with uncommitted changes)"
echo "$commit" > "$bundle/COMMIT"
(cd "$bundle" && find . -mindepth 1 \( -type f -o -type l \) ! -name MANIFEST | sort |
   while read -r f; do
     if [ -L "$f" ]; then echo "link ${f#./} -> $(readlink "$f")"; else echo "$(stat -c %s "$f") ${f#./}"; fi
   done) > "$bundle/MANIFEST"

# What travels: the folder gzipped, beside the working tree.
pack_dir="$root/gpu-pack"
mkdir -p "$pack_dir"
tar -czf "$pack_dir/gpu-bundle.tar.gz" -C "$(dirname "$bundle")" "$(basename "$bundle")"
bytes="$(du -sb "$bundle" | cut -f1)"
pack_bytes="$(stat -c %s "$pack_dir/gpu-bundle.tar.gz")"
tree_bytes="$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "gpu_bundle: $bundle: $(mib "$bytes") in $(grep -c '' "$bundle/MANIFEST") files," \
     "gpu-pack/gpu-bundle.tar.gz $(mib "$pack_bytes") (with the working tree's" \
     "$(mib "$tree_bytes"): $(mib $((pack_bytes + tree_bytes))) of the ${limit_mib} MiB the" \
     "device tool carries); $(tr '\n' ' ' < "$bundle/REQUIRES")"
if [ $((pack_bytes + tree_bytes)) -ge $((limit_mib * 1048576)) ]; then
  echo "gpu_bundle: too big to carry" >&2
  exit 1
fi
[ $verify = 1 ] || exit 0

# ---------------------------------------------------------------- --verify
start=$SECONDS
problems=()
fail() { problems+=("$*"); echo "gpu_bundle: verify: FAIL $*" >&2; }

# 1. Every dependency resolves into the bundle or is allowed outside it.
for f in "$bundle"/bin/* "$bundle"/lib/*; do
  [ -L "$f" ] && continue
  # "name => path (address)", "name => not found", or no arrow (vdso, ld-linux).
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_external "$name" && continue
    case $path in
      "$bundle"/lib/*) ;;
      not) fail "${f#"$bundle"/} needs $name: not found with LD_LIBRARY_PATH=lib" ;;
      *) fail "${f#"$bundle"/} needs $name from $path, outside the bundle" ;;
    esac
  done < <(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$bundle/lib" ldd "$f" 2>&1)
done

# 2. No bundled binary names this checkout or the build tree. nvcc's
#    -lineinfo line tables name the CUDA sources (kernels/cuda/*.cu and
#    their folder) for profilers; nothing opens them at run time.
for dir in "$root" "$root_as_named" "$build"; do
  for f in "$bundle"/bin/* "$bundle"/lib/* "$bundle"/gpu_check.sh "$bundle"/scripts/*; do
    [ -L "$f" ] && continue
    hits="$(strings -a "$f" | grep -F "$dir" |
            grep -Ev "^$root/kernels/cuda(/common)?(/[A-Za-z0-9_]+\.(cu|cuh|h))?$" | sort -u | head -n 3 || true)"
    [ -z "$hits" ] || fail "${f#"$bundle"/} holds the path $dir: $(echo "$hits" | tr '\n' ' ')"
  done
done

# 3. Every step's inputs are there; the budgets fit.
shared_missing=0
while read -r step f; do
  [ -e "$bundle/$f" ] && continue
  case $f in
    shared/*) [ -d "$bundle/shared" ] && fail "step $step reads $f, not in the bundle"
              shared_missing=$((shared_missing + 1)) ;;
    *) fail "step $step reads $f, not in the bundle" ;;
  esac
done < <(bash "$bundle/gpu_check.sh" --list-inputs)
budgets="$(bash "$bundle/gpu_check.sh" --list-budgets)"
while read -r step total; do
  [ "$total" -le 480 ] || fail "step $step's budget is $total s, over 480"
done < <(echo "$budgets" | awk '{ t[$1] += $3 } END { for (s in t) print s, t[s] }')
calls="$(bash "$bundle/gpu_check.sh" --list-calls)"
while read -r call; do
  secs="$(echo "$budgets" | awk -v c=" $call " 'index(c, " " $1 " ") { t += $3 } END { print t }')"
  [ "$secs" -le 560 ] || fail "the device call STEPS=\"$call\" needs $secs s, over 560"
done <<<"$calls"
for step in $(echo "$budgets" | awk '{ print $1 }' | sort -u); do
  echo " $(echo "$calls" | tr '\n' ' ') " | grep -q " $step " ||
    fail "step $step is in no device call of gpu_check.sh --list-calls"
done

# 4. The bundle alone, unpacked from what travels into a folder away from
#    this checkout, with a clean environment: gpu_check.sh's CPU-runnable
#    steps, then Python syntax.
tmp="$(mktemp -d /tmp/pvllm-bundle-verify.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$pack_dir/gpu-bundle.tar.gz" -C "$tmp"
copy="$tmp/gpu-bundle"
rc=0
(cd "$tmp" && env -i PATH="$PATH" HOME="$tmp" LANG=C.UTF-8 OUT="$tmp/out" PACK=0 STEPS="0 1 2" \
   bash "$copy/gpu_check.sh") > "$tmp/gpu_check.log" 2>&1 || rc=$?
if [ $rc != 0 ]; then
  fail "gpu_check.sh STEPS=\"0 1 2\" in a copy exited $rc:"
  tail -n 40 "$tmp/gpu_check.log" >&2
fi
python3 - "$tmp/out" "$copy" "$([ -d "$copy/shared" ] && echo 1 || echo 0)" <<'EOF' ||
import json, os, sys
out, copy, has_shared = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
problems = []
def cases(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        problems.append(f"{name} was not written")
        return []
    d = json.load(open(path))
    return [t for s in d["testsuites"] for t in s["testsuite"]]
pre = json.load(open(os.path.join(out, "preflight.json")))
if not pre["ok"] or pre["libraries_not_found"] or pre["inputs_missing"]:
    problems.append(f"preflight: {pre['libraries_not_found']} {pre['inputs_missing']}")
if pre["pvllm_shared_dir"] != (os.path.join(copy, "shared") if has_shared else ""):
    problems.append(f"preflight: PVLLM_SHARED_DIR was {pre['pvllm_shared_dir']}")
summary = json.load(open(os.path.join(out, "summary.json")))
names = [c["name"] for c in summary["commands"]]
for want in ["preflight", "cuda_kernels_test", "capi_test", "device_test", "engine_test",
             "fault_walk_test"]:
    if want not in names:
        problems.append(f"{want} did not run")
for c in summary["commands"]:
    if c["exit_code"] != 0:
        problems.append(f"{c['name']} exited {c['exit_code']}")
# The CUDA golden cases skip without a GPU (saying so); every other one must run.
golden = [t for t in cases("engine_test.json") if "Golden" in t["classname"] + t["name"]
          and "Cuda" not in t["classname"] + t["name"]]
ran = [t for t in golden if t.get("result") == "COMPLETED" and not t.get("failures")]
if has_shared and (not golden or len(ran) != len(golden)):
    problems.append(f"engine_test: {len(ran)} of {len(golden)} golden tests ran and passed")
exports = [t for t in cases("device_test.json") if t["name"] == "CudaModuleExportsOnlyItsFactory"]
if not exports or exports[0].get("result") != "COMPLETED":
    problems.append("device_test: the CUDA module's export test did not run")
kernels = cases("cuda_kernels_test.json")
print(f"gpu_bundle: verify: in the copy, engine_test ran {len(ran)} of {len(golden)} golden tests"
      f"{'' if has_shared else ' (no models in the bundle: they skip)'}; cuda_kernels_test "
      f"{len(kernels)} tests, {sum(t.get('result') == 'SKIPPED' for t in kernels)} skipped "
      f"without a GPU; LD_LIBRARY_PATH={pre['ld_library_path']}")
for p in problems:
    print("gpu_bundle: verify: FAIL " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
  fail "the copy's results (above)"
for py in "$copy"/scripts/*.py; do
  (cd "$tmp" && python3 -m py_compile "$py") 2>&1 || fail "$(basename "$py") does not compile"
done

[ $shared_missing = 0 ] ||
  echo "gpu_bundle: verify: NOTE the bundle has no models/goldens ($shared_missing inputs of steps 2 and 4 absent): their tests skip"
if [ ${#problems[@]} != 0 ]; then
  echo "gpu_bundle: verify FAILED (${#problems[@]} problems, $((SECONDS - start)) s)" >&2
  exit 1
fi
echo "gpu_bundle: verify passed in $((SECONDS - start)) s (the build aside): $(mib "$bytes"), $(tr '\n' ' ' < "$bundle/REQUIRES")"
