#!/usr/bin/env bash
# bench/gpu/gather_gemm.sh — build bench/gpu/gather_gemm_probe.cu (sm_90a: warpgroup MMA) against the library's
# cuBLASLt wrapper and print its checks and its table: the first layer through the materialised block against a
# GEMM that gathers its own rows. Arguments: B (default 16384), and `cluster` for the cluster variants alone.
# `dw`: the first layer's market weight gradient alone (cuBLASLt on the block against dw_kernel gathering its
# rows). NCU_KERNEL (a kernel-name regex; NCU_SKIP launches skipped): one launch profiled by ncu instead. GPU host
# only; the build log (and ncu.txt) under $OUT/gather_gemm.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; P=$OUT/gather_gemm; mkdir -p $P
# GG_REUSE=1: keep the binary for the next run, and reuse one a previous GG_REUSE=1 run kept
if [ "${GG_REUSE:-0}" = 1 ] && [ -x $P/gather_gemm_probe ]; then :; else
nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -Inative/include -Inative/src -Xptxas -v \
  bench/gpu/gather_gemm_probe.cu kernels/l1_gather.cu native/src/cuda/gemm_cublaslt.cpp kernels/gemm_ref.cu kernels/cuda_common.cu \
  -lcublasLt -o $P/gather_gemm_probe >$P/build.log 2>&1 || { echo "gather_gemm_probe build failed"; tail -20 $P/build.log; exit 1; }
fi
grep -A3 -E "Compiling entry.*(gg_kernel|fwd_kernel|dw_kernel)" $P/build.log | grep -E "registers|spill"
if [ -n "${NCU_KERNEL:-}" ]; then
  # NCU_KERNEL=regex: one launch of the matching kernel (after NCU_SKIP matching ones) under ncu's speed-of-light,
  # warp-state and memory sections instead of the tables (e.g. NCU_KERNEL=fh_l1g_fwd_kernel NCU_SKIP=3: the
  # persistent gathering forward of the default run; NCU_KERNEL=fh_l1g_dw_kernel with `dw`)
  timeout ${GG_TIMEOUT:-120} ncu --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    -k "regex:$NCU_KERNEL" --launch-skip "${NCU_SKIP:-0}" -c 1 $P/gather_gemm_probe "${1:-16384}" ${2:-} \
    > $P/ncu.txt 2>&1; rc=$?
  grep -E "fh_l1g|Duration|Throughput|Hit Rate|Warp Cycles|Stall|Busy|Bandwidth" $P/ncu.txt | head -60
else
  timeout ${GG_TIMEOUT:-120} $P/gather_gemm_probe "${1:-16384}" ${2:-}; rc=$?
fi
[ "${GG_REUSE:-0}" = 1 ] || rm -f $P/gather_gemm_probe
exit $rc
