#!/usr/bin/env bash
# bench/gpu/chain.sh — the replay chain's reorders on a GPU host (carry [".gpuhost"]), in one call: build,
# `native_check graphs` with the three switches on, interleaved A/B rounds of the reference bench (the reorders
# against the old order and against FH_SIDE_PRIORITY=high; medians), a CUPTI trace with them on, then the whole
# `npm run test:gpu` (its new net case compares every combination with the old order bit for bit). Logs: $OUT/l.tgz,
# $OUT/trace.csv.gz, $OUT/test-gpu.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p $OUT/l
source .gpuhost/boot.sh > $OUT/boot.log 2>&1
ON="FH_PER_EARLY_ZERO=1 FH_MEAN_BRANCH=1 FH_WEIGHTS_BRANCH=1"
t0=$(date +%s); FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda > $OUT/l/build.log 2>&1 || { tail -30 $OUT/l/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check
env $ON timeout 60 native/build/native_check graphs native/build > $OUT/l/graphs.log 2>&1
echo "graphs (reorders on) rc $?: $(grep -c '^PASS' $OUT/l/graphs.log) pass, $(grep -c '^FAIL' $OUT/l/graphs.log) fail"; grep '^FAIL' $OUT/l/graphs.log | head
abs=("FH_NONE=1" "$ON" "FH_PER_EARLY_ZERO=1 FH_MEAN_BRANCH=1" "$ON FH_SIDE_PRIORITY=high")
for r in 1 2 3 4; do for i in "${!abs[@]}"; do
  env ${abs[$i]} timeout 40 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 > $OUT/l/ab-$i-$r.txt 2>&1
  echo "round $r ${abs[$i]} rc $?: $(grep -E '^(collect|train|eval|epoch) ms ' $OUT/l/ab-$i-$r.txt | tr -s ' ' | tr '\n' ';')"
done; done
for i in "${!abs[@]}"; do for k in epoch train eval; do
  grep -hE "^$k ms +[0-9]" $OUT/l/ab-$i-*.txt | awk '{print $3}' | sort -n | awk -v n="${abs[$i]}" -v k=$k '{v[NR]=$1} END {if (NR) printf "%s: %s ms median %.2f (min %.2f, max %.2f, %d runs)\n", n, k, (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2), v[1], v[NR], NR}'
done; done
tail -16 $OUT/l/ab-1-1.txt
OUT=$OUT/l TRACE_ENV="$ON" timeout 90 bash bench/gpu/trace.sh > $OUT/l/trace.txt 2>&1; echo "trace rc $?"; head -1 $OUT/l/trace.txt
python3 bench/gpu/critical.py $OUT/l/trace/trace.csv 2>/dev/null || python3 bench/gpu/critical.py $OUT/l/trace/trace.csv.gz
cp $OUT/l/trace/trace.csv.gz $OUT/trace.csv.gz 2>/dev/null; rm -rf $OUT/l/trace
(cd $OUT && tar czf l.tgz l && rm -rf l)
t0=$(date +%s); timeout 290 npx vitest run --config vitest.gpu.config.ts > $OUT/test-gpu.log 2>&1; echo "test:gpu rc $? ($(( $(date +%s)-t0 )) s)"
sed 's/\x1b\[[0-9;]*m//g' $OUT/test-gpu.log | grep -E "✓ test|×|Test Files|Tests  |FAIL|AssertionError" | head -30
