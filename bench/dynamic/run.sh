#!/usr/bin/env bash
# A dynamic batch (exercise 7.6): one library compiled for batch = 1..MAX (`opfuse compile
# --dim batch=1..MAX`, functions at 1, 2, 4 serving any size by slices) against static
# libraries compiled for each size alone (weights in a file as the dynamic one's, and
# embedded, opfuse compile's default), at the same sizes; runs alternated ROUNDS times, each
# the median of REPS calls; the medians over rounds and their ratios (dynamic / static).
# Each library's first run is checked against the reference executor. Then the JIT's shape
# cache: first-call latency at new sizes with and without prediction (GAP_MS between calls).
# Usage: bench/dynamic/run.sh [BUILD_DIR] [OUT_DIR] [ROUNDS] [NETWORK ...]
#   NETWORK: a corpus network (tests/frontend/networks.h), default resnet18 gpt2_block.
#   SIZES (env): the batch sizes, default "1 3 8". MAX (env): the dynamic range, default 16.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$here/build}"
out="${2:-$here/bench-dynamic}"
rounds="${3:-3}"
shift $(( $# < 3 ? $# : 3 ))
nets=("$@")
[ ${#nets[@]} -eq 0 ] && nets=(resnet18 gpt2_block)
sizes=(${SIZES:-1 3 8})
max="${MAX:-16}"
reps="${REPS:-10}"
opfuse="$build/tools/opfuse"
run="$build/tools/opfuse-run"
mkdir -p "$out/models" "$out/lib"
time_of() {  # CHECK MODEL ARGS...: the median ms of one `opfuse run --library` (checked if CHECK=1)
  local log check=()
  [ "$1" = 1 ] && check=(--check)
  shift
  log=$("$run" "$@" "${check[@]}" --reps "$reps")
  if [ ${#check[@]} -gt 0 ] && ! grep -q "reference: match" <<< "$log"; then
    echo "$log" >&2; echo "mismatch: $*" >&2; exit 1
  fi
  sed -n 's/^time: median \([0-9.]*\) ms.*/\1/p' <<< "$log"
}
median() { tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "%-12s %5s %12s %12s %12s %10s %10s\n" network batch "dynamic ms" "static-file" "static-emb" "dyn/file" "dyn/emb"
for net in "${nets[@]}"; do
  "$build/tests/frontend/write_networks" --dynamic-batch "$out/models" 224 "$net" > /dev/null
  dyn="$out/models/${net}_dynamo_dynbatch.onnx"
  t0=$(date +%s.%N)
  "$opfuse" compile "$dyn" --dim "batch=1..$max" --out "$out/lib" --name "${net}_dyn" --shared > "$out/lib/${net}_dyn.log"
  t1=$(date +%s.%N)
  echo "# $net: dynamic library (batch 1..$max) compiled in $(echo "$t1 - $t0" | bc) s" >&2
  for b in "${sizes[@]}"; do
    "$opfuse" compile "$dyn" --dim "batch=$b" --weights file --out "$out/lib" --name "${net}_b${b}_file" --shared > /dev/null
    "$opfuse" compile "$dyn" --dim "batch=$b" --weights embed --out "$out/lib" --name "${net}_b${b}_embed" --shared > /dev/null
    d=() f=() e=()
    for r in $(seq "$rounds"); do
      c=$([ "$r" = 1 ] && echo 1 || echo 0)
      d+=("$(time_of "$c" "$dyn" --dim "batch=$b" --library "$out/lib/${net}_dyn.so")")
      f+=("$(time_of "$c" "$dyn" --dim "batch=$b" --library "$out/lib/${net}_b${b}_file.so")")
      e+=("$(time_of "$c" "$dyn" --dim "batch=$b" --library "$out/lib/${net}_b${b}_embed.so")")
    done
    md=$(echo "${d[*]}" | median) mf=$(echo "${f[*]}" | median) me=$(echo "${e[*]}" | median)
    printf "%-12s %5s %12.2f %12.2f %12.2f %10.3f %10.3f\n" "$net" "$b" "$md" "$mf" "$me" \
      "$(echo "$md / $mf" | bc -l)" "$(echo "$md / $me" | bc -l)"
  done
done | tee "$out/dynamic.txt"
# The JIT's shape cache on the first network: first-call latency at sizes not seen before, with
# the predicted bucket compiled ahead during the idle time between calls, and without.
net="${nets[0]}"
for p in "" --no-predict; do
  echo "# JIT --serve ${p:-(predicting)}: $net, batch 1,1,2,2,4,4, ${GAP_MS:-15000} ms between calls"
  "$run" "$out/models/${net}_dynamo_dynbatch.onnx" --serve batch=1,1,2,2,4,4 \
    --gap-ms "${GAP_MS:-15000}" $p | grep -v "^channels"
done | tee -a "$out/dynamic.txt"
