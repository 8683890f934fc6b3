#!/usr/bin/env bash
# bench/gpu/check.sh COMMIT — a closing check on a GPU host (after `source .gpuhost/boot.sh`): build, the graph /
# prefetch / resume checks (`native_check graphs`), the reference benchmark, npm run test:gpu (every test/gpu
# file: sanitizers included); logs archived to $OUT/final.tgz.
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
set -uo pipefail
export FOXHUNT_COMMIT=$1
OUTD=$OUT; mkdir -p $OUTD/f
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
t0=$(date +%s); FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda > $OUTD/f/build.log 2>&1 || { tail -30 $OUTD/f/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"; grep CMAKE_CUDA_ARCHITECTURES native/build/CMakeCache.txt
timeout 80 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 > $OUTD/f/bench-ref.txt 2>$OUTD/f/bench-ref.err; echo "bench rc $?"; cat $OUTD/f/bench-ref.txt
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check
timeout 90 native/build/native_check graphs native/build > $OUTD/f/graphs.log 2>&1; echo "native_check graphs rc $?"; grep -E "^(PASS|FAIL)" $OUTD/f/graphs.log
t0=$(date +%s); timeout ${TEST_TIMEOUT:-470} npx vitest run --config vitest.gpu.config.ts > $OUTD/f/test-gpu.log 2>&1; echo "test:gpu rc $? ($(( $(date +%s)-t0 )) s)"
sed 's/\x1b\[[0-9;]*m//g' $OUTD/f/test-gpu.log | grep -E "✓|×|Test Files|Tests  |FAIL|AssertionError|SUMMARY" | head -40
tar -czf $OUTD/final.tgz -C $OUTD f && rm -rf $OUTD/f
