#!/usr/bin/env bash
# bench/gpu/final.sh COMMIT — a closing call on a GPU host (after `source .gpuhost/boot.sh`) when device time is
# short, most important first: build, npm run test:gpu (every test/gpu file, sanitizers included), the reference
# bench, then AB_ENVS (';'-separated env assignments, "FH_NONE=1" for the defaults) as AB_ROUNDS (default 5) interleaved
# rounds of the reference bench with each variant's median epoch/train/eval ms (the machine's spread between bench
# runs is ~1-6 ms, so single runs do not decide), and with GEMM_SHAPES=1 bench/gpu/gemm_shapes.py; logs under
# $OUT/final. GPU_TESTS narrows the test run to the files it names (default: every test/gpu file); TEST_ENV is exported
# for the tests only (e.g. switches under test); TESTS_LAST=1 runs the tests after the rounds, with a timeout that
# ends them DEADLINE (default 560) seconds after the script's start. SKIP_BUILD=1: the library built already (by the caller).
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; F=$OUT/final; mkdir -p $F
set -uo pipefail
source bench/gpu/rounds.sh
export FOXHUNT_COMMIT=$1
T_START=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

run_tests() {
  local limit=${TEST_TIMEOUT:-330}
  if [ "${TESTS_LAST:-0}" = 1 ]; then limit=$(( ${DEADLINE:-560} - ($(date +%s) - T_START) )); fi
  if [ "$limit" -lt 30 ]; then echo "test:gpu skipped: ${limit} s left"; return; fi
  local t0=$(date +%s)
  env ${TEST_ENV:-} timeout $limit npx vitest run --config vitest.gpu.config.ts ${GPU_TESTS:-} > $F/test-gpu.log 2>&1
  echo "test:gpu rc $? ($(( $(date +%s)-t0 )) s of $limit; ${TEST_ENV:-defaults})"
  sed 's/\x1b\[[0-9;]*m//g' $F/test-gpu.log | grep -E "✓ test|×|Test Files|Tests  |FAIL|AssertionError|SUMMARY" | head -40
}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  t0=$(date +%s); FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda > $F/build.log 2>&1 || { tail -30 $F/build.log; exit 1; }
  echo "build $(( $(date +%s)-t0 )) s"
fi
[ "${TESTS_LAST:-0}" = 1 ] || run_tests
timeout 80 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 > $F/bench-ref.txt 2>$F/bench-ref.err
rc=$?; echo "bench rc $rc"; tail -16 $F/bench-ref.txt
# the defaults ran past the limit (a hang): the rounds and tests would only repeat it
if [ $rc = 124 ]; then echo "the reference bench hung at the defaults: rounds and tests skipped"; tail -5 $F/bench-ref.err; exit 3; fi
IFS=';' read -ra ab_env <<<"${AB_ENVS:-}"
ab_label=("${ab_env[@]}")
ab_rounds $F "${AB_ROUNDS:-5}" "epoch train eval"
[ "${TESTS_LAST:-0}" = 1 ] && run_tests
if [ "${GEMM_SHAPES:-0}" = 1 ]; then timeout 40 python3 bench/gpu/gemm_shapes.py 2>&1 | tail -8; fi
