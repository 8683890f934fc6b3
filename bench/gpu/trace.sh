#!/usr/bin/env bash
# bench/gpu/trace.sh — a kernel (and memory copy/set) trace of the reference bench on a GPU host without nsys
# (after a native build and `source .gpuhost/boot.sh`): builds bench/gpu/cupti_trace.cpp, runs `npm run bench --
# --config reference --backend cuda --epochs 3 --warmup 1` under it (CUDA_INJECTION64_PATH) and prints
# bench/gpu/timeline.py's tables: the longest stretches without a kernel over the whole run, each kernel's launches
# and GPU time per step over the third epoch's steps 700..1000, and the kernels of steps 852 and 853 (start,
# duration, stream; bubbles and stream overlap).
# Extra env for the bench: TRACE_ENV (e.g. "FH_STEP_GROUP=2"). The trace is kept gzipped under $OUT/trace.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; T=$OUT/trace; mkdir -p $T
C=$(dirname "$(dirname "$(command -v nvcc)")")
g++ -O2 -std=c++17 -shared -fPIC -I$C/include -I$C/extras/CUPTI/include bench/gpu/cupti_trace.cpp \
  -L$C/lib64 -L$C/lib -L$C/extras/CUPTI/lib64 -lcupti -Wl,-rpath,$C/lib64:$C/lib:$C/extras/CUPTI/lib64 \
  -o $T/libfh_cupti_trace.so >$T/build.log 2>&1 || { echo "cupti_trace build failed"; tail -20 $T/build.log; exit 1; }
env ${TRACE_ENV:-} CUDA_INJECTION64_PATH=$T/libfh_cupti_trace.so FH_TRACE_OUT=$T/trace.csv timeout 180 \
  npm run -s bench -- --config reference --backend cuda --epochs 3 --warmup 1 >$T/bench.txt 2>$T/bench.err
echo "traced bench rc $?: $(grep -E '^(train|eval|epoch) ms +[0-9]' $T/bench.txt | tr -s ' ' | tr '\n' ';') $(grep cupti_trace $T/bench.err)"
python3 bench/gpu/timeline.py $T/trace.csv --bubbles 852 853
python3 bench/gpu/timeline.py $T/trace.csv --sum 700 1000
gzip -f $T/trace.csv; rm -f $T/libfh_cupti_trace.so
