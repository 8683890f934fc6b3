#!/usr/bin/env bash
# bench/gpu/loss_probe.sh — build bench/gpu/loss_probe.cu under several compiler settings (in parallel) and run
# each on the reference shape, the odd-batch shape and 17 atoms; compute-sanitizer's synccheck, racecheck,
# initcheck and memcheck on the default build. Logs under $OUT/probe.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; P=$OUT/probe; mkdir -p $P
NV="nvcc -O3 -lineinfo --expt-relaxed-constexpr -std=c++17 -gencode=arch=compute_90,code=sm_90 -Ikernels -Inative/include"
declare -A FLAGS=([o3]="" [pO1]="-Xptxas -O1" [pO0]="-Xptxas -O0" [hideN]="-DFH_LOSS_HALF_HIDE_N" [hideNB]="-DFH_LOSS_HALF_HIDE_NB" ${PROBE_EXTRA:-})
for v in "${!FLAGS[@]}"; do
  ( $NV ${FLAGS[$v]} bench/gpu/loss_probe.cu -o $P/probe-$v >$P/build-$v.log 2>&1; echo "build $v rc $?" ) &
done
wait
for v in o3 pO1 pO0 hideN hideNB ${PROBE_RUNS:-}; do
  [ -x $P/probe-$v ] || continue
  for args in "16384 51 1" "63 51 0" "4096 17 1"; do
    echo "== $v: $args"; timeout 60 $P/probe-$v $args; echo "rc $?"
  done
done
for tool in synccheck racecheck initcheck memcheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $P/probe-o3 256 51 1 exact4 packed >$P/san-$tool.log 2>&1
  echo "sanitizer $tool rc $?: $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' $P/san-$tool.log)"
  grep -m3 -E 'Invalid|Barrier|Uninitialized|divergent|hazard at' $P/san-$tool.log
done
cuobjdump -res-usage $P/probe-o3 2>/dev/null | grep -A1 half | grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste -sd' ' | head -c 400; echo
