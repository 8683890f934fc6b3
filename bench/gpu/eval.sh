#!/usr/bin/env bash
# bench/gpu/eval.sh — the fused greedy evaluation on a GPU host, in one call (needs the packed runtime:
# run with carry [".gpuhost"]): build, the fused-vs-cuBLASLt evaluation checks (native_check evalfused),
# the reference benchmark with FH_EVAL_FUSED=0 and =1, the GPU test suite and the graph/sync checks.
# Logs under $OUT (or ./gpu-out); a short summary last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
summary=()
note() { summary+=("$1"); }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
# shellcheck disable=SC1091
source .gpuhost/boot.sh >"$OUT/eval-boot.log" 2>&1
t0=$(date +%s)
if FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda >"$OUT/build.log" 2>&1; then
  note "build: ok ($(( $(date +%s) - t0 )) s)"
else
  tail -40 "$OUT/build.log"; echo "build FAILED"; exit 1
fi
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check || note "native_check build FAILED"

FH_EVAL_FUSED_PROFILE=1 timeout 50 native/build/native_check evalfused native/build >"$OUT/evalfused.log" 2>&1
note "evalfused rc $?: $(grep -c '^PASS' "$OUT/evalfused.log") pass, $(grep -c '^FAIL' "$OUT/evalfused.log") fail"
grep -E '^(PASS|FAIL|INFO)|segment|S [0-9]|profile' "$OUT/evalfused.log" | cut -c1-260

for f in 0 1; do
  FH_EVAL_FUSED=$f timeout 45 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 \
    >"$OUT/bench-fused$f.txt" 2>"$OUT/eval-bench-fused$f.err"
  note "bench FH_EVAL_FUSED=$f rc $?: $(grep -E 'eval ms' "$OUT/bench-fused$f.txt" | tr -s ' ')"
done
grep -E 'epoch|collect|train ms|eval|GPU|commit|segments' "$OUT/bench-fused1.txt" | head -14

timeout 55 npx vitest run --config vitest.gpu.config.ts >"$OUT/test-gpu.log" 2>&1
note "test:gpu rc $?: $(grep -E 'Tests +[0-9]' "$OUT/test-gpu.log" | sed 's/\x1b\[[0-9;]*m//g' | tail -1)"
grep -E 'FAIL|✗|×|AssertionError|expected' "$OUT/test-gpu.log" | sed 's/\x1b\[[0-9;]*m//g' | head -14

timeout 20 native/build/native_check graphs native/build >"$OUT/graphs.log" 2>&1
note "graphs/syncs/ckpt rc $?: $(grep -c '^PASS' "$OUT/graphs.log") pass, $(grep -c '^FAIL' "$OUT/graphs.log") fail"
grep -E '^FAIL' "$OUT/graphs.log" | head

timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 native/build/native_check small native/build \
  >"$OUT/eval-memcheck.log" 2>&1
note "compute-sanitizer memcheck (small config, fused evaluation): rc $?; $(grep -m1 'ERROR SUMMARY' "$OUT/eval-memcheck.log")"
grep -E '^(PASS|FAIL)|Invalid|Error' "$OUT/eval-memcheck.log" | head -8

echo
echo "================ summary"
printf '%s\n' "${summary[@]}"
