#!/usr/bin/env bash
# bench/gpu/evalc.sh COMMIT — the fused evaluation's cluster size, A/B on a GPU host (after `source
# .gpuhost/boot.sh`). Builds the library twice, with kernels/eval_fused.cu's EF_C = 8 (the default) and = 16 (a
# non-portable cluster size on Hopper: each block computes half the units of every layer), each copied into a folder
# of its own that FOXHUNT_NATIVE_DIR picks. On each build: `native_check evalfused` (the fused evaluation against the
# cuBLASLt loop, on the same inputs: FH_SEED) with the phase profile and the clusters that fit; the check lines are diffed
# (a unit's sums run in the same order at either size, so they should agree). Then AB_ROUNDS (default 4) interleaved
# rounds of the reference bench over the variants (EVALC_ENVS, ';'-separated, each naming its build by c8 or c16
# first), with each variant's median epoch/train/eval/collect ms. Logs under $OUT/evalc.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/gpu/rounds.sh
OUT=${OUT:-$PWD/gpu-out}; F=$OUT/evalc; mkdir -p $F
export FOXHUNT_COMMIT=${1:-unknown}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
L=$(mktemp -d)
build() { ab_build $L/c$1 $F/build-c$1.log "EF_C=$1"; }
build 8
cp kernels/eval_fused.cu $L/eval_fused.cu.orig
sed -i 's/^#define EF_C 8$/#define EF_C 16/' kernels/eval_fused.cu
grep -q '^#define EF_C 16$' kernels/eval_fused.cu || { echo "evalc: the EF_C define was not found"; exit 1; }
build 16
cp $L/eval_fused.cu.orig kernels/eval_fused.cu

ab_native_check $L/native_check
for c in 8 16; do
  FH_SEED=${FH_SEED:-20261206} FH_EVAL_FUSED_VERBOSE=1 FH_EVAL_FUSED_PROFILE=1 timeout 120 $L/native_check evalfused $L/c$c > $F/evalfused-c$c.log 2>&1
  echo "evalfused EF_C=$c rc $?: $(grep -c '^PASS' $F/evalfused-c$c.log) passed, $(grep -c '^FAIL' $F/evalfused-c$c.log) failed"
  grep -E "^eval_fused:|^FAIL" $F/evalfused-c$c.log | sort | uniq -c | head -8
  grep -E "fused profile" $F/evalfused-c$c.log | tail -2
done
# the check lines without their timings: identical when the two sizes give the same results
strip() { grep -E '^(PASS|FAIL)' "$1" | sed -E 's/[0-9.]+ ?(ms|us|µs)//g'; }
if diff <(strip $F/evalfused-c8.log) <(strip $F/evalfused-c16.log) > $F/evalfused.diff; then
  echo "evalfused: the check lines of EF_C=8 and 16 agree"
else
  echo "evalfused: the check lines differ ($(grep -c '^<' $F/evalfused.diff) lines)"; head -6 $F/evalfused.diff
fi

IFS=';' read -ra ab_label <<<"${EVALC_ENVS:-c8;c16;c16 FH_EVAL_WHOLE_SM=0}"
ab_env=()
for v in "${ab_label[@]}"; do
  read -r lib rest <<<"$v"
  ab_env+=("FOXHUNT_NATIVE_DIR=$L/$lib $rest")
done
ab_rounds $F "${AB_ROUNDS:-4}" "epoch train eval collect"
rm -rf $L
