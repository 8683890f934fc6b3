#!/usr/bin/env bash
# bench/gpu/net.sh — everything the CUDA network/orchestration half needs on the GPU host, in one call:
# build (CPU + CUDA libraries), the native checks (CPU comparison, graph on/off, host syncs, checkpoint),
# compute-sanitizer memcheck + racecheck on a small config, the measured bf16 GEMM rate (the floor) and
# the reference-config benchmark. Logs under $OUT (or ./gpu-out); a short table last.
#   usage: bench/gpu/net.sh [all|check|bench|profile|sanitize|vitest]      (default all)
#   vitest: the Node suite test/gpu/net.test.ts; needs the packed runtime (the shared gpu-host pack script,
#   then run with carry [".gpuhost"]).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
what=${1:-all}
J=$(nproc)
summary=()
note() { summary+=("$1"); }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
git rev-parse --short HEAD 2>/dev/null | tee "$OUT/commit.txt"

t0=$(date +%s)
if cmake -S native -B native/build -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
   cmake --build native/build -j"$J" >>"$OUT/build.log" 2>&1 && [ -f native/build/libfoxhunt_cuda.so ]; then
  note "build: ok ($(( $(date +%s) - t0 )) s)"
else
  tail -40 "$OUT/build.log"; note "build: FAILED"; printf '%s\n' "${summary[@]}"; exit 1
fi
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check || { note "driver build FAILED"; }

if [ "$what" = all ] || [ "$what" = check ]; then
  timeout 180 native/build/native_check compare native/build 2>&1 | tee "$OUT/compare.log"
  note "compare vs CPU: $(grep -c '^PASS' "$OUT/compare.log") pass, $(grep -c '^FAIL' "$OUT/compare.log") fail"
  timeout 180 native/build/native_check graphs native/build 2>&1 | tee "$OUT/graphs.log"
  note "graphs/syncs/ckpt: $(grep -c '^PASS' "$OUT/graphs.log") pass, $(grep -c '^FAIL' "$OUT/graphs.log") fail"
fi
if [ "$what" = all ] || [ "$what" = check ] || [ "$what" = sanitize ] || [ "$what" = profile ]; then
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 native/build/native_check small native/build \
      >"$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    note "compute-sanitizer $tool: rc $rc; $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log")"
    grep -E '^(PASS|FAIL)|Error|error|hazard' "$OUT/sanitizer-$tool.log" | head -20
  done
fi

if [ "$what" = profile ]; then
  timeout 300 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
    native/build/native_check profile native/build >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  note "ncu rc $?"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu.csv" | tee "$OUT/ncu_summary.txt"
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
  PYTHONUNBUFFERED=1 timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/gemm_rate.txt"
import torch
def rate(m, n, k, reps=50):
    a = torch.randn(m, k, device='cuda', dtype=torch.bfloat16)
    b = torch.randn(n, k, device='cuda', dtype=torch.bfloat16)
    for _ in range(5): a @ b.T
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); s.record()
    for _ in range(reps): a @ b.T
    e.record(); torch.cuda.synchronize()
    return 2 * m * n * k * reps / (s.elapsed_time(e) / 1e3) / 1e12
print(f"bf16 GEMM 8192^3: {rate(8192, 8192, 8192, 20):.0f} TFLOP/s")
print(f"bf16 GEMM 16384x512x1032 (trunk 1 fwd): {rate(16384, 512, 1032):.0f} TFLOP/s")
print(f"bf16 GEMM 16384x256x512 (trunk 2 fwd): {rate(16384, 256, 512):.0f} TFLOP/s")
print(f"bf16 GEMM 4096x512x1032 (collect fwd): {rate(4096, 512, 1032):.0f} TFLOP/s")
PY
  timeout 240 native/build/native_check bench native/build 9 2>&1 | tee "$OUT/bench.log"
  note "bench: $(grep 'epoch total ms' "$OUT/bench.log")"
fi
if [ "$what" = vitest ]; then
  # shellcheck disable=SC1091
  source .gpuhost/boot.sh && timeout 400 npx vitest run --config vitest.gpu.config.ts test/gpu/net.test.ts 2>&1 |
    tee "$OUT/vitest.log"
  note "vitest net: $(grep -E 'Tests +[0-9]' "$OUT/vitest.log" | tail -1)"
fi

echo
echo "================ summary"
printf '%s\n' "${summary[@]}"
