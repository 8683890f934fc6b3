#!/usr/bin/env bash
# bench/gpu/gemm_probe.sh — build bench/gpu/gemm_probe.cu against the library's cuBLASLt wrapper and print its table
# of the train step's GEMMs (µs per launch, with and without the ReLU mask output). GPU host only; the build log
# under $OUT/gemm_probe.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; P=$OUT/gemm_probe; mkdir -p $P
nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Ikernels -Inative/include -Inative/src \
  bench/gpu/gemm_probe.cu native/src/cuda/gemm_cublaslt.cpp kernels/gemm_ref.cu kernels/cuda_common.cu kernels/heads_out.cu \
  -lcublasLt -o $P/gemm_probe >$P/build.log 2>&1 || { echo "gemm_probe build failed"; tail -20 $P/build.log; exit 1; }
timeout 120 $P/gemm_probe "${1:-16384}"; rc=$?
rm -f $P/gemm_probe
exit $rc
