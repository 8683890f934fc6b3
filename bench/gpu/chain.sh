#!/usr/bin/env bash
# bench/gpu/chain.sh [COMMIT] — the replay chain's opt-in reorders on a GPU host, in one call (after `source
# .gpuhost/boot.sh`): bench/gpu/final.sh (build, the whole `npm run test:gpu`, whose net case compares every
# combination of the switches with the old order bit for bit, then interleaved A/B rounds of the reference bench: the
# old order, the three reorders, the two branches' switches without the weights, the reorders with
# FH_SIDE_PRIORITY=high, and the reorders with four steps a graph: with the gather off the critical path, the gap
# between one step's graph and the next may be what is left), then `native_check graphs` with the reorders on, and a
# CUPTI trace with them on read by bench/gpu/critical.py. Logs under $OUT/final and $OUT/trace.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; export OUT
ON="FH_PER_EARLY_ZERO=1 FH_MEAN_BRANCH=1 FH_WEIGHTS_BRANCH=1"
AB_ENVS="FH_NONE=1;$ON;FH_PER_EARLY_ZERO=1 FH_MEAN_BRANCH=1;$ON FH_SIDE_PRIORITY=high;$ON FH_STEP_GROUP=4" \
  AB_ROUNDS=${AB_ROUNDS:-3} \
  TEST_TIMEOUT=${TEST_TIMEOUT:-300} bash bench/gpu/final.sh "${1:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check
env $ON timeout 60 native/build/native_check graphs native/build > $OUT/final/graphs-on.log 2>&1
echo "graphs (reorders on) rc $?: $(grep -c '^PASS' $OUT/final/graphs-on.log) pass, $(grep -c '^FAIL' $OUT/final/graphs-on.log) fail"
grep '^FAIL' $OUT/final/graphs-on.log | head
TRACE_ENV="$ON" timeout 100 bash bench/gpu/trace.sh > $OUT/final/trace.txt 2>&1; echo "trace rc $?"; head -1 $OUT/final/trace.txt
python3 bench/gpu/critical.py $OUT/trace/trace.csv.gz
