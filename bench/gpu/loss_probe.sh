#!/usr/bin/env bash
# bench/gpu/loss_probe.sh — build bench/gpu/loss_probe.cu under several compiler settings and source switches (in
# parallel) and run each on the reference shape, an odd batch and 17 atoms (SANITIZE=1: compute-sanitizer's
# synccheck, racecheck, initcheck and memcheck on the default build too). Logs under $OUT/probe; the summary on
# stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; P=$OUT/probe; mkdir -p $P
NV="nvcc -O3 -lineinfo --expt-relaxed-constexpr -std=c++17 -gencode=arch=compute_90,code=sm_90 -Ikernels -Inative/include"
# o3: as the library builds it; nofence: without the workaround of kernels/loss.cu (the ptxas miscompile);
# pO0: that at ptxas -O0 (right, slow); dbg: nofence with the first warp's intermediates dumped; nf*: nofence under
# other ptxas/cicc settings (which of them compile the kernel right without the workaround); nfnoexpf: the
# workaround without ptxas's expensive optimisations
declare -A FLAGS=([o3]="" [nofence]="-DFH_LOSS_HALF_NO_N_FENCE" [pO0]="-Xptxas -O0 -DFH_LOSS_HALF_NO_N_FENCE"
  [dbg]="-DFH_LOSS_HALF_DEBUG -DFH_LOSS_HALF_NO_N_FENCE"
  [nfO2]="-Xptxas -O2 -DFH_LOSS_HALF_NO_N_FENCE" [nfnoexp]="-Xptxas --allow-expensive-optimizations=false -DFH_LOSS_HALF_NO_N_FENCE"
  [nfnomerge]="-Xptxas --dont-merge-basicblocks -DFH_LOSS_HALF_NO_N_FENCE"
  [nfnoconst]="-Xptxas --disable-optimizer-constants -DFH_LOSS_HALF_NO_N_FENCE" [nfcicc1]="-Xcicc -O1 -DFH_LOSS_HALF_NO_N_FENCE"
  [nfnoexpf]="-Xptxas --allow-expensive-optimizations=false")
# fm<hex> (e.g. fm30): the compiled-in sizes kept constant but at the uses of mask <hex> (kernels/loss.cu, FH_HN)
for v in ${PROBE_RUNS:-o3 nofence}; do
  [[ $v == fm* ]] && FLAGS[$v]="-DFH_LOSS_HALF_FENCE_MASK=0x${v#fm}"
done
for v in ${PROBE_RUNS:-o3 nofence}; do
  ( $NV ${FLAGS[$v]} bench/gpu/loss_probe.cu -o $P/probe-$v >$P/build-$v.log 2>&1 || echo "build $v failed: $(head -3 $P/build-$v.log)" ) &
done
wait
for v in ${PROBE_RUNS:-o3 nofence}; do
  [ -x $P/probe-$v ] || continue
  for args in "16384 51 1" "63 51 0" "4096 17 1"; do
    timeout 60 $P/probe-$v $args >$P/run-$v-${args// /_}.log 2>&1; rc=$?
    echo "== $v ($args): rc $rc"
    grep -E '^(warp|packed|exact4|exact8|exact|generic|qexact|qgeneric) ' $P/run-$v-${args// /_}.log | cut -c1-110
    [ "$args" = "16384 51 1" ] && grep -E '^  (bad loss|dbg)' $P/run-$v-${args// /_}.log | head -24
  done
done
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in synccheck racecheck initcheck memcheck; do
    timeout 120 compute-sanitizer --tool $tool $P/probe-o3 256 51 1 exact4 packed >$P/san-$tool.log 2>&1
    echo "sanitizer $tool: $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' $P/san-$tool.log)"
  done
fi
rm -f $P/probe-*
