#!/usr/bin/env bash
# bench/gpu/knockout.sh — on a GPU host (after `source .gpuhost/boot.sh`): build, then what each part of
# the reference train step costs in place (native_check knockout at batch auto and 8192), and an ncu
# per-kernel table with warm caches (--cache-control none: closer to a graph replay than ncu's default
# flush). RACECHECK=1 runs bench/gpu/racecheck.sh first. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda >$OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check
if [ "${RACECHECK:-0}" = 1 ]; then bash bench/gpu/racecheck.sh; fi
for b in 0 ${KO_BATCH2:-8192}; do
  timeout 150 native/build/native_check knockout native/build ${KO_EPOCHS:-3} $b >$OUT/knockout-$b.txt 2>&1; echo "knockout batch $b rc $?"
  grep -E '^\|' $OUT/knockout-$b.txt
done
if [ "${NCU:-1}" = 1 ]; then
  timeout 150 ncu --clock-control none --cache-control none --profile-from-start off --launch-count ${NCU_LAUNCHES:-400} \
      --metrics gpu__time_duration.sum --csv native/build/native_check profile native/build >$OUT/ncu-warm.csv 2>$OUT/ncu.err
  echo "ncu rc $?"
  python3 bench/gpu/ncu_summary.py $OUT/ncu-warm.csv > $OUT/ncu_warm_summary.txt; head -42 $OUT/ncu_warm_summary.txt
fi
