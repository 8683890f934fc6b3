#!/usr/bin/env bash
# bench/gpu/win_then_suite.sh COMMIT VARIANT — on a GPU host (after `source .gpuhost/boot.sh`, the library built):
# interleaved rounds of the reference bench, the defaults against VARIANT (one env assignment, e.g. FH_HEADS_OUT=1,
# AB_ROUNDS rounds, default 3, through bench/gpu/final.sh), then, only where VARIANT's median epoch is the lower,
# the whole GPU suite (npm run test:gpu's files) with VARIANT exported, cut off SUITE_TIMEOUT (default 330) seconds
# in: the suite that a new default must pass, spent only on a variant that wins. Logs under $OUT/final.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p $OUT/final
commit=$1 variant=$2
SKIP_BUILD=1 AB_ENVS="FH_NONE=1;$variant" AB_ROUNDS=${AB_ROUNDS:-3} GPU_TESTS=none TESTS_LAST=1 DEADLINE=1 \
  bash bench/gpu/final.sh "$commit" > $OUT/final/rounds.txt 2>&1
grep -vE "^round |test:gpu skipped" $OUT/final/rounds.txt
base=$(awk '/^FH_NONE=1: epoch ms median/ {print $5}' $OUT/final/rounds.txt)
var=$(awk -v v="$variant: epoch ms median" 'index($0, v) == 1 {print $(NF-6)}' $OUT/final/rounds.txt)
echo "defaults ${base:-?} ms, $variant ${var:-?} ms"
if [ -z "$base" ] || [ -z "$var" ] || ! awk -v a="$var" -v b="$base" 'BEGIN { exit !(a < b) }'; then
  echo "no win: the suite is not run"; exit 0
fi
t0=$(date +%s)
env $variant timeout ${SUITE_TIMEOUT:-330} npx vitest run --config vitest.gpu.config.ts > $OUT/final/test-gpu.log 2>&1
echo "test:gpu rc $? ($(( $(date +%s)-t0 )) s; $variant)"
sed 's/\x1b\[[0-9;]*m//g' $OUT/final/test-gpu.log | grep -E "✓ test|×|Test Files|Tests  |FAIL|AssertionError|SUMMARY" | head -40
