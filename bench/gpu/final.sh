#!/usr/bin/env bash
# bench/gpu/final.sh COMMIT — a closing call on a GPU host (after `source .gpuhost/boot.sh`) when device time is
# short, most important first: build, npm run test:gpu (every test/gpu file, sanitizers included), the reference
# bench, then bench/gpu/gemm_shapes.py; logs under $OUT/final.
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; F=$OUT/final; mkdir -p $F
set -uo pipefail
export FOXHUNT_COMMIT=$1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
t0=$(date +%s); FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda > $F/build.log 2>&1 || { tail -30 $F/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
t0=$(date +%s); timeout ${TEST_TIMEOUT:-330} npx vitest run --config vitest.gpu.config.ts > $F/test-gpu.log 2>&1; echo "test:gpu rc $? ($(( $(date +%s)-t0 )) s)"
sed 's/\x1b\[[0-9;]*m//g' $F/test-gpu.log | grep -E "✓ test|×|Test Files|Tests  |FAIL|AssertionError|SUMMARY" | head -40
timeout 80 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 > $F/bench-ref.txt 2>$F/bench-ref.err; echo "bench rc $?"; tail -16 $F/bench-ref.txt
timeout 40 python3 bench/gpu/gemm_shapes.py 2>&1 | tail -8
