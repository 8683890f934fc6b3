#!/usr/bin/env bash
# bench/gpu/e2e.sh — the whole product on a GPU host, in one call (after `source .gpuhost/boot.sh`):
#   1. build the CPU + CUDA libraries;  2. the reference benchmark;  3. the fleet end to end: Redis, `foxhunt-worker --gpus all` on the GPU(s), `foxhunt enqueue`,
#      and a check that every epoch's scalars landed in Redis exactly once;  4. npm run test:gpu.
# Logs under $OUT (or ./gpu-out); a short summary last.   usage: bench/gpu/e2e.sh [epochs]
# E2E_FLEET_ONLY=1 skips the benchmark and test:gpu (after bench/gpu/perf.sh in the same call).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
EPOCHS=${1:-3}
export FOXHUNT_COMMIT=${FOXHUNT_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
if FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda >"$OUT/build.log" 2>&1; then
  note "build: ok ($(( $(date +%s) - t0 )) s)"
else
  tail -30 "$OUT/build.log"; note "build: FAILED"; printf '%s\n' "${summary[@]}"; exit 1
fi

if [ "${E2E_FLEET_ONLY:-0}" != 1 ]; then
  timeout 80 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 >"$OUT/bench-reference.txt" 2>"$OUT/bench-reference.err"
  note "bench reference: rc $?"
  grep -v '^{' "$OUT/bench-reference.txt" | tail -25
fi

# The fleet end to end on the GPU: a worker per visible GPU, a run of EPOCHS epochs, scalars in Redis.
# (node, not npx: npx answers SIGTERM with its own exit 143 instead of the worker's 0)
export FOXHUNT_PREFIX=fhgpu REDIS_URL=redis://127.0.0.1:6379
node bin/foxhunt-worker.js --gpus all --health-port 0 >"$OUT/worker.log" 2>&1 &
wpid=$!
sleep 3
t0=$(date +%s)
timeout ${E2E_TIMEOUT:-240} npx foxhunt enqueue --config config/runs/reference.toml --epochs "$EPOCHS" --run-id gpu-e2e --follow \
  >"$OUT/enqueue.txt" 2>"$OUT/enqueue.err"
note "enqueue --follow reference x$EPOCHS: rc $? ($(( $(date +%s) - t0 )) s wall, incl. market prep and checkpoints)"
cat "$OUT/enqueue.txt"
npx foxhunt show gpu-e2e --json >"$OUT/show.json" 2>"$OUT/show.err"
n=$(redis-cli XLEN fhgpu:run:gpu-e2e:epochs 2>/dev/null)
note "stream entries for gpu-e2e: ${n:-?} (want $EPOCHS); keys: $(redis-cli --scan --pattern 'fhgpu:run:gpu-e2e*' | head -5 | tr '\n' ' ')"
kill -TERM "$wpid"; wait "$wpid"; note "worker exit after SIGTERM: $?"
grep -E 'backend|cuda|quarantin|GPU' "$OUT/worker.log" | head -8
if [ "${E2E_FLEET_ONLY:-0}" != 1 ]; then
  t0=$(date +%s)
  timeout ${GPU_TEST_TIMEOUT:-300} npx vitest run --config vitest.gpu.config.ts >"$OUT/test-gpu.log" 2>&1
  rc=$?
  note "npm run test:gpu: rc $rc ($(( $(date +%s) - t0 )) s): $(grep -E 'Tests +[0-9]' "$OUT/test-gpu.log" | tail -1 | sed 's/\x1b\[[0-9;]*m//g')"
fi

echo; printf '%s\n' "${summary[@]}"
