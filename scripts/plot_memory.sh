#!/usr/bin/env bash
# The memory study of docs/memory.md, reproduced: builds nothing, runs
# `pvllm bench` on a tiny random-weight model with an 8k context (and on
# stories260K when it is there), then draws the PNGs under docs/memory/
# with gnuplot (installed from Debian's gnuplot-nox if missing).
#
# Usage: scripts/plot_memory.sh
# Environment: PVLLM_BUILD_DIR (default build; needs tools/pvllm and
#   tests/pvllm_make_tiny_model), PVLLM_SHARED_DIR (default ../shared),
#   OUT (data folder, default $PVLLM_BUILD_DIR/memory), KV_MB (default 64),
#   QUICK=1 (fewer requests, for a smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${PVLLM_BUILD_DIR:-build}"
shared="${PVLLM_SHARED_DIR:-../shared}"
out="${OUT:-$build/memory}"
kv_mb="${KV_MB:-64}"
pvllm="$build/tools/pvllm"
make_model="$build/tests/pvllm_make_tiny_model"
docs=docs/memory

if ! command -v gnuplot >/dev/null; then
  echo "installing gnuplot-nox ..."
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get install -y gnuplot-nox >/dev/null || {
    $sudo_cmd apt-get update >/dev/null && $sudo_cmd apt-get install -y gnuplot-nox >/dev/null; }
fi
for f in "$pvllm" "$make_model"; do
  [ -x "$f" ] || { echo "missing $f: build first (scripts/build.sh)" >&2; exit 1; }
done
mkdir -p "$out" "$docs"
rm -f "$out"/*.tsv "$out"/*.md "$out"/*.json

# The benchmark model: 2 layers, hidden 64, 4 heads (2 KV heads), 8192 context.
model="$out/tiny8k"
[ -f "$model/config.json" ] || "$make_model" "$model" --max-position 8192 --hidden 64 --layers 2 >/dev/null

chat_n=300; nano_n=256
if [ "${QUICK:-0}" = 1 ]; then chat_n=60; nano_n=32; fi

bench() {  # label, args...
  local label=$1; shift
  echo "== $label: pvllm bench $*"
  "$pvllm" bench -q --model "$model" --kv-cache-mb "$kv_mb" --seed 1 --summary "$out/summary.tsv" \
    --label "$label" "$@"
}

# 1. Paged vs contiguous on the same budget.
bench chat --workload chat --num-requests "$chat_n" --kv-allocator both \
  --timeline "$out/chat_timeline.tsv" --markdown "$out/chat.md" --json "$out/chat.json"
bench nano --workload nano --num-requests "$nano_n" --kv-allocator both \
  --markdown "$out/nano.md" --json "$out/nano.json"
for pair in 128:128 512:128 1024:512; do
  bench "fixed ${pair}" --workload fixed --input-len "${pair%%:*}" --output-len "${pair##*:}" \
    --kv-allocator both --markdown "$out/fixed_${pair/:/x}.md"
done

# 2. Memory per request: prefix sharing, and n = 4 vs n = 1.
bench "prefix cache on" --workload shared-prefix --kv-allocator both \
  --markdown "$out/shared_prefix.md"
bench "prefix cache off" --workload shared-prefix --kv-allocator paged --no-prefix-caching
bench "parallel n=4" --workload parallel --n 4 --kv-allocator both --markdown "$out/parallel.md"
bench "parallel n=1" --workload parallel --n 1 --kv-allocator both

# 3. Block sizes (paged).
for bs in 8 16 32 64 128 256; do
  bench "chat bs=$bs" --workload chat --num-requests "$chat_n" --kv-allocator paged --block-size "$bs"
  bench "nano bs=$bs" --workload nano --num-requests $((nano_n / 4)) --kv-allocator paged \
    --block-size "$bs"
done

# 4. A trained model with a short context (512), workloads scaled to fit.
stories="$shared/models/stories260K/stories260K.bin"
if [ -f "$stories" ]; then
  echo "== stories260K"
  "$pvllm" bench -q --model "$stories" --kv-cache-mb 4 --seed 1 --workload chat \
    --num-requests "$chat_n" --kv-allocator both --markdown "$out/stories_chat.md" \
    --summary "$out/summary.tsv" --label "stories260K chat"
fi

# 5. Throughput where a step costs its weights: a 24M-parameter random model
# (95 MB of f32 weights, past the 32 MiB L3; 16 KiB of K/V per token, so a
# contiguous reservation of 4096 slots is 64 MiB). First the batch curve
# (decode tokens/s against sequences per step), then paged vs contiguous at
# budgets that seat 2, 4 and 8 contiguous sequences.
big="$out/m24m"
[ -f "$big/config.json" ] || "$make_model" "$big" --max-position 4096 --hidden 512 \
  --intermediate 1408 --layers 8 --heads 8 --kv-heads 4 >/dev/null
big_chat_n=100; big_fixed_n=32; budgets="128 256 512"
if [ "${QUICK:-0}" = 1 ]; then big_chat_n=20; big_fixed_n=8; budgets="128"; fi
bigbench() {  # label, args...
  local label=$1; shift
  echo "== $label: pvllm bench --model m24m $*"
  "$pvllm" bench -q --model "$big" --seed 1 --summary "$out/summary.tsv" --label "$label" "$@"
}
for c in 1 2 4 8 16 32 64; do
  bigbench "m24 batch $c" --workload fixed --input-len 16 --output-len 64 --num-requests "$c" \
    --kv-allocator paged --kv-cache-mb 256
done
for mb in $budgets; do
  bigbench "m24 chat ${mb}" --workload chat --num-requests "$big_chat_n" --kv-allocator both \
    --kv-cache-mb "$mb" --markdown "$out/m24_chat_${mb}.md"
  bigbench "m24 fixed ${mb}" --workload fixed --input-len 128 --output-len 512 \
    --num-requests "$big_fixed_n" --kv-allocator both --kv-cache-mb "$mb" \
    --markdown "$out/m24_fixed_${mb}.md"
done

# --- plots -----------------------------------------------------------------
s="$out/summary.tsv"
col() { head -1 "$s" | tr '\t' '\n' | grep -nx "$1" | cut -d: -f1; }
# Rows of the summary as "label<TAB>allocator<TAB>value of column $1".
pick() { awk -F'\t' -v c="$(col "$1")" 'NR > 1 { print $1 "\t" $3 "\t" $c }' "$s"; }

gnuplot <<GP
set terminal pngcairo size 1000,700 font ",11"
set output "$docs/chat_timeline.png"
set datafile separator "\t"
set multiplot layout 2,1 title "chat trace ($chat_n requests, KV budget $kv_mb MiB, block size 16)"
set ylabel "KV utilization (stored / reserved)"
set yrange [0:1.05]
set key bottom right
# Steps where nothing is reserved (the trace has drained) have no utilization.
plot "$out/chat_timeline.tsv" index 0 using 2:(\$8 > 0 ? \$9 : NaN) with lines lw 2 title "paged", \
     "" index 1 using 2:(\$8 > 0 ? \$9 : NaN) with lines lw 2 title "contiguous"
set ylabel "running sequences"
set xlabel "engine step"
set yrange [0:*]
set key top right
plot "$out/chat_timeline.tsv" index 0 using 2:4 with lines lw 2 title "paged", \
     "" index 1 using 2:4 with lines lw 2 title "contiguous", \
     "" index 1 using 2:5 with lines dt 2 title "contiguous: waiting"
unset multiplot
GP

# KV blocks per request at peak, paged: prefix sharing and parallel sampling.
{
  printf 'case\tblocks\n'
  pick kv_blocks_per_request_at_peak | awk -F'\t' '$2 == "paged" && ($1 ~ /^prefix cache/ || $1 ~ /^parallel/) { print $1 "\t" $3 }'
} > "$out/per_request.tsv"
gnuplot <<GP
set terminal pngcairo size 1000,500 font ",11"
set output "$docs/memory_per_request.png"
set datafile separator "\t"
set style data histograms
set style fill solid 0.7 border -1
set boxwidth 0.7
set ylabel "KV blocks per request at peak (block size 16)"
set title "Memory per request, paged: shared-prefix workload with the prefix cache on / off; parallel sampling n = 4 / n = 1"
set yrange [0:*]
set grid ytics
unset key
set xtics scale 0 font ",10"
plot "$out/per_request.tsv" skip 1 using 2:xtic(1) lc rgb "#4477aa", \
     "" skip 1 using 0:2:(sprintf("%.1f", \$2)) with labels offset 0,0.8 notitle
GP

# Block-size study.
{
  printf 'block_size\tchat_util\tchat_tps\tnano_util\tnano_tps\n'
  for bs in 8 16 32 64 128 256; do
    cu=$(pick kv_util_mean | awk -F'\t' -v l="chat bs=$bs" '$1 == l { print $3 }')
    ct=$(pick output_tokens_per_s | awk -F'\t' -v l="chat bs=$bs" '$1 == l { print $3 }')
    nu=$(pick kv_util_mean | awk -F'\t' -v l="nano bs=$bs" '$1 == l { print $3 }')
    nt=$(pick output_tokens_per_s | awk -F'\t' -v l="nano bs=$bs" '$1 == l { print $3 }')
    printf '%s\t%s\t%s\t%s\t%s\n' "$bs" "$cu" "$ct" "$nu" "$nt"
  done
} > "$out/block_size.tsv"
gnuplot <<GP
set terminal pngcairo size 900,500 font ",11"
set output "$docs/block_size.png"
set datafile separator "\t"
set logscale x 2
set xlabel "block size (tokens)"
set ylabel "KV utilization (stored / reserved)"
set y2label "output tokens/s"
set ytics nomirror
set y2tics
set yrange [0:1.05]
set y2range [0:*]
set key bottom left
set title "Paged KV: block size vs utilization and throughput"
plot "$out/block_size.tsv" skip 1 using 1:2 with linespoints lw 2 title "chat utilization", \
     "" skip 1 using 1:4 with linespoints lw 2 title "nano utilization", \
     "" skip 1 using 1:3 axes x1y2 with linespoints dt 2 title "chat tokens/s", \
     "" skip 1 using 1:5 axes x1y2 with linespoints dt 2 title "nano tokens/s"
GP

# Throughput on the 24M model: the batch curve, and paged vs contiguous.
{
  printf 'sequences\toutput_tps\n'
  for c in 1 2 4 8 16 32 64; do
    pick output_tokens_per_s | awk -F'\t' -v l="m24 batch $c" -v c="$c" '$1 == l { print c "\t" $3 }'
  done
} > "$out/m24_batch.tsv"
{
  printf 'case\tpaged\tcontiguous\n'
  for w in chat fixed; do
    for mb in $budgets; do
      pick output_tokens_per_s | awk -F'\t' -v l="m24 $w $mb" -v name="$w, $mb MiB" '
        $1 == l { v[$2] = $3 } END { print name "\t" v["paged"] "\t" v["contiguous"] }'
    done
  done
} > "$out/m24_budgets.tsv"
gnuplot <<GP
set terminal pngcairo size 1200,500 font ",11"
set output "$docs/weight_bound_throughput.png"
set datafile separator "\t"
set multiplot layout 1,2 title "24M-parameter model (f32 weights past the L3), 2-core CPU"
set logscale x 2
set xlabel "sequences per decode step"
set ylabel "output tokens/s"
set yrange [0:*]
set grid
unset key
set title "decode throughput vs batch (fixed 16:64, paged)"
plot "$out/m24_batch.tsv" skip 1 using 1:2 with linespoints lw 2 pt 7
unset logscale x
set title "paged vs contiguous on the same KV budget"
set xlabel ""
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.7 border -1
set key top left
set xtics rotate by -20 font ",10"
plot "$out/m24_budgets.tsv" skip 1 using 2:xtic(1) title "paged" lc rgb "#4477aa", \
     "" skip 1 using 3 title "contiguous" lc rgb "#cc6677"
unset multiplot
GP

echo "data in $out; plots in $docs:"
ls -1 "$docs"/*.png
