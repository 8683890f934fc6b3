#!/usr/bin/env bash
# bench/gpu/l1g.sh COMMIT — the gathering first layer's GPU call (after `source .gpuhost/boot.sh`), most important
# first: build; its GPU test and the paired layout's (test/gpu/l1gather.test.ts, pair.test.ts); the probe's weight
# gradient (`dw`) and cluster runs (bench/gpu/gather_gemm.sh); then ROUNDS (default 2) interleaved rounds of the
# reference bench: the defaults against FH_L1_GATHER=1 (blocks), =2 and =3 (clusters of two, four). Logs under $OUT/l1g.
# SKIP_PROBE=1 leaves the probe out, SKIP_CLUSTER=1 its cluster run; VARIANTS (default "1 2 3") the variants rounded.
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; F=$OUT/l1g; mkdir -p $F
set -uo pipefail
source bench/gpu/rounds.sh
export FOXHUNT_COMMIT=$1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
t0=$(date +%s); FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda > $F/build.log 2>&1 || { tail -30 $F/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
t0=$(date +%s)
timeout ${TEST_TIMEOUT:-170} npx vitest run --config vitest.gpu.config.ts test/gpu/l1gather.test.ts test/gpu/pair.test.ts \
  > $F/test.log 2>&1
echo "tests rc $? ($(( $(date +%s)-t0 )) s)"
sed 's/\x1b\[[0-9;]*m//g' $F/test.log | grep -E "✓|×|Test Files|Tests  |FAIL|AssertionError|Error:|expected" | head -30
if [ "${SKIP_PROBE:-0}" != 1 ]; then
  export GG_REUSE=1
  GG_TIMEOUT=60 bash bench/gpu/gather_gemm.sh 16384 dw
  [ "${SKIP_CLUSTER:-0}" = 1 ] || GG_TIMEOUT=40 bash bench/gpu/gather_gemm.sh 32768 cluster
  rm -f $OUT/gather_gemm/gather_gemm_probe
fi
ab_env=("FH_NONE=1"); ab_label=("defaults")
for v in ${VARIANTS:-1 2 3}; do ab_env+=("FH_L1_GATHER=$v"); ab_label+=("FH_L1_GATHER=$v"); done
ab_rounds $F "${ROUNDS:-2}" "epoch train eval"
grep -ho "L1 gathering[^,]*,[^,]*" $F/ab-*-1.txt 2>/dev/null | head -3; exit 0
