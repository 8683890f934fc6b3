#!/usr/bin/env bash
# bench/gpu/iterate.sh — one performance iteration on a GPU host (after `source .gpuhost/boot.sh`):
# build; the GPU tests named by TESTS (vitest files, default the network suite); the knockout table of
# the reference step (`native_check knockout`: each part of the captured train step left out in turn,
# FH_PROFILE_KNOCKOUT) at the batches in KO_BATCHES (default "0" = auto; KO_MASKS picks rows) and A/B
# runs of the full step under AB_ENVS; ncu's full section set for the kernels matching NCU_KERNELS, and
# with NCU_WARM=1 an ncu per-kernel time table with warm caches (--cache-control none: closer to a graph
# replay than ncu's default flush); the fused evaluation against the cuBLASLt loop with its phase
# profile (EVALFUSED=1: `native_check evalfused`); NCU_SRC="kernel regex|native_check mode|launches to
# skip": ncu's full set of one launch with its per-SASS-instruction source page ($OUT/src_sass.csv); racecheck (RACECHECK=1); the reference bench (BENCH=1).
# Logs under $OUT, the long ones archived in $OUT/iterate.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/i"
L=$OUT/i
export FOXHUNT_COMMIT=${FOXHUNT_COMMIT:-unknown}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
t0=$(date +%s)
FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda >$L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check
if [ -n "${TESTS-test/gpu/net.test.ts}" ]; then
  t0=$(date +%s); timeout ${TEST_TIMEOUT:-240} npx vitest run --config vitest.gpu.config.ts ${TESTS-test/gpu/net.test.ts} >$L/test-gpu.log 2>&1
  echo "test:gpu ($TESTS) rc $? ($(( $(date +%s)-t0 )) s)"
  sed 's/\x1b\[[0-9;]*m//g' $L/test-gpu.log | grep -E '✓|×|Test Files|Tests +[0-9]|FAIL|AssertionError|Expected|Received|seed' | head -50
fi
if [ "${KO:-1}" = 1 ]; then
  for b in ${KO_BATCHES:-0}; do
    timeout 150 native/build/native_check knockout native/build 3 $b >$L/knockout-$b.txt 2>&1; echo "knockout batch $b rc $?"
    grep -E '^\||FAIL|engine' $L/knockout-$b.txt
  done
fi
# AB_ENVS: ';'-separated env assignments, each an A/B run of the full step (knockout mask 0)
IFS=';' read -ra abs <<<"${AB_ENVS:-}"
for i in "${!abs[@]}"; do
  env ${abs[$i]} KO_MASKS=0 timeout 60 native/build/native_check knockout native/build 3 0 >$L/ab$i.txt 2>&1
  echo "A/B ${abs[$i]} rc $?: $(grep -E '^\| none|FAIL' $L/ab$i.txt)"
done
if [ -n "${NCU_KERNELS:-}" ]; then
  timeout 200 ncu --clock-control none --set full -k "regex:$NCU_KERNELS" --launch-count ${NCU_COUNT:-4} \
      native/build/native_check profile native/build >$L/ncu-full.txt 2>&1; echo "ncu full rc $?"
  grep -E '^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issue Slots Busy|Executed Ipc Active|No Eligible|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Block Limit Reg|Executed Instructions  ' $L/ncu-full.txt | head -90
  grep -iE 'est\. speedup|stall' $L/ncu-full.txt | head -30
fi
if [ "${NCU_WARM:-0}" = 1 ]; then
  timeout 150 ncu --clock-control none --cache-control none --profile-from-start off --launch-count ${NCU_LAUNCHES:-400} \
      --metrics gpu__time_duration.sum --csv native/build/native_check profile native/build >$L/ncu-warm.csv 2>$L/ncu-warm.err
  echo "ncu warm rc $?"
  python3 bench/gpu/ncu_summary.py $L/ncu-warm.csv > $L/ncu_warm_summary.txt; head -42 $L/ncu_warm_summary.txt
fi
if [ "${EVALFUSED:-0}" = 1 ]; then
  FH_EVAL_FUSED_PROFILE=1 timeout 150 native/build/native_check evalfused native/build >$L/evalfused.log 2>&1
  echo "evalfused rc $?: $(grep -c '^PASS' $L/evalfused.log) pass, $(grep -c '^FAIL' $L/evalfused.log) fail"
  grep -E '^(FAIL|INFO)|profile|S [0-9]+, steps|fused path|cuBLASLt path' $L/evalfused.log | cut -c1-300
fi
if [ -n "${NCU_SRC:-}" ]; then
  IFS='|' read -r sk smode sskip <<<"$NCU_SRC"
  timeout 240 ncu --set full --import-source no -k "regex:$sk" --launch-skip ${sskip:-0} --launch-count 1 -f -o $L/src \
      native/build/native_check $smode native/build >$L/ncu-src.log 2>&1; echo "ncu source rc $?"
  ncu -i $L/src.ncu-rep --page source --csv --print-source sass >$OUT/src_sass.csv 2>$L/ncu-src.err || tail -3 $L/ncu-src.err
  ncu -i $L/src.ncu-rep --page details >$L/src-details.txt 2>&1
  grep -E 'Duration|Executed Instructions  |Issue Slots Busy|Registers Per|Warp Cycles Per Issued|Achieved Occupancy' $L/src-details.txt | head
  grep -iE 'stall|est\. speedup' $L/src-details.txt | head -20
fi
if [ "${RACECHECK:-0}" = 1 ]; then OUT=$L bash bench/gpu/racecheck.sh; fi
if [ "${BENCH:-0}" = 1 ]; then
  timeout 90 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 >$L/bench-ref.txt 2>$L/bench-ref.err; echo "bench rc $?"
  tail -24 $L/bench-ref.txt
fi
tar -czf $OUT/iterate.tgz -C $OUT i && rm -rf $L
