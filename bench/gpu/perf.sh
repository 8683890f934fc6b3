#!/usr/bin/env bash
# bench/gpu/perf.sh — the performance loop on a GPU host, in one call (after `source .gpuhost/boot.sh`):
# build, npm run test:gpu, the reference benchmark at batch auto and 8192, and an ncu per-kernel profile
# of a short reference-shaped epoch (eager, kernels serialised). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export FOXHUNT_COMMIT=${FOXHUNT_COMMIT:-unknown}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda >$OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check
( timeout 200 npx vitest run --config vitest.gpu.config.ts >$OUT/test-gpu.log 2>&1; echo "test:gpu rc $?" ) 
sed 's/\x1b\[[0-9;]*m//g' $OUT/test-gpu.log | grep -E 'Test Files|Tests +[0-9]|FAIL|✗|×|AssertionError|Expected|Received|seed' | head -40
timeout 90 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 >$OUT/bench-ref.txt 2>$OUT/bench-ref.err; echo "bench rc $?"
cat $OUT/bench-ref.txt | tail -22
timeout 90 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 --set train.batch_size=8192 >$OUT/bench-8192.txt 2>$OUT/bench-8192.err; echo "bench8192 rc $?"
grep -E 'engine|batch|epoch ms|train ms|eval ms|samples' $OUT/bench-8192.txt | head -12
# A/B: an alternative kernel of the train step (default: the older shared-memory C51 loss)
AB_ENV=${PERF_AB_ENV:-FH_LOSS_KERNEL=general}
env $AB_ENV timeout 90 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 >$OUT/bench-ab.txt 2>$OUT/bench-ab.err; echo "bench $AB_ENV rc $?"
grep -E 'engine|batch|epoch ms|train ms|eval ms|samples' $OUT/bench-ab.txt | head -12
timeout 150 ncu --clock-control none --profile-from-start off --launch-count ${NCU_LAUNCHES:-400} --metrics gpu__time_duration.sum --csv \
    native/build/native_check profile native/build >$OUT/ncu.csv 2>$OUT/ncu.err; echo "ncu rc $?"
python3 bench/gpu/ncu_summary.py $OUT/ncu.csv > $OUT/ncu_summary.txt; head -45 $OUT/ncu_summary.txt
# one archive (the device tool brings back a limited number of files)
tar -czf $OUT/perf-logs.tgz -C $OUT --exclude perf-logs.tgz . 2>/dev/null
find $OUT -type f ! -name perf-logs.tgz -delete
