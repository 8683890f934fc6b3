#!/usr/bin/env bash
# bench/gpu/env.sh — build and run the checks and timings of the CUDA env / replay / eval half on a
# GPU host (needs nvcc; no cuBLAS, no Node). Logs go to $OUT (default /tmp/fh-env-out).
#   bench/gpu/env.sh            build + bench/gpu/env_check (bit-exactness vs the host, PER chi-square
#                               at 2^21, eval metrics, collection/PER/eval timings)
#   bench/gpu/env.sh sanitize   also compute-sanitizer memcheck + racecheck on the small config
#   bench/gpu/env.sh all        sanitize, then build the libraries (CMake) and run this half's vitest
#                               GPU tests (test/gpu/{env,per,eval}.test.ts); needs .gpuhost carried
#                               (the shared gpu-host pack script) for node and node_modules
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fh-env-out}
mkdir -p "$OUT"
BIN=${TMPDIR:-/tmp}/fh_env_check
SRC="bench/gpu/env_check.cu kernels/env.cu kernels/per.cu kernels/collect.cu kernels/eval.cu kernels/cuda_common.cu
     native/src/cuda/collect_alloc.cu native/src/cuda/replay_alloc.cu native/src/cuda/eval_host.cu
     native/src/cuda/test_entry.cu"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee -a "$OUT/gpu.txt"
t0=$(date +%s)
OBJ=${TMPDIR:-/tmp}/fh_env_obj
mkdir -p "$OBJ"
NVCC="nvcc -gencode=arch=compute_90,code=sm_90 -O3 -fmad=false -std=c++17 -lineinfo -I native/src/cuda -I native/src/common -I kernels -I native/include"
objs=()
for f in $SRC; do
  o="$OBJ/$(echo "$f" | tr / _).o"
  objs+=("$o")
  $NVCC -c "$f" -o "$o" > "$o.log" 2>&1 &
done
wait
cat "$OBJ"/*.log | grep -v "Remark\|20040\|^ *\^\|__attribute__" | tee "$OUT/build.log"
$NVCC "${objs[@]}" -o "$BIN" 2>&1 | tee -a "$OUT/build.log"
[[ -x $BIN ]] || { echo "build failed"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
"$BIN" 2>&1 | tee "$OUT/env_check.log"
rc=${PIPESTATUS[0]}
if [[ ${1:-} == sanitize || ${1:-} == all ]]; then
  for tool in memcheck racecheck; do
    FH_ENV_CHECK_SMALL=1 compute-sanitizer --tool $tool --print-limit 20 "$BIN" > "$OUT/sanitize_$tool.log" 2>&1
    echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
  done
fi
if [[ ${1:-} == all ]]; then
  t1=$(date +%s)
  if cmake -S native -B native/build -DCMAKE_BUILD_TYPE=Release > "$OUT/lib_build.log" 2>&1 &&
     cmake --build native/build -j"$(nproc)" >> "$OUT/lib_build.log" 2>&1 && [[ -f native/build/libfoxhunt_cuda.so ]]; then
    echo "library build: ok ($(( $(date +%s) - t1 )) s)"
    # shellcheck disable=SC1091
    source .gpuhost/boot.sh > /dev/null
    npx vitest run --config vitest.gpu.config.ts test/gpu/env.test.ts test/gpu/per.test.ts test/gpu/eval.test.ts \
      > "$OUT/vitest_gpu.log" 2>&1
    vrc=$?
    echo "vitest (env, per, eval): rc=$vrc"
    grep -E "✓|✗|×|FAIL|Tests |Test Files|Error" "$OUT/vitest_gpu.log" | head -30
    [[ $vrc == 0 ]] || rc=$vrc
  else
    echo "library build: FAILED"; tail -30 "$OUT/lib_build.log"; rc=1
  fi
fi
echo "---- summary ----"
grep -E "^\s+\[(PASS|FAIL)\]|^TABLE|^RESULT" "$OUT/env_check.log"
exit $rc
