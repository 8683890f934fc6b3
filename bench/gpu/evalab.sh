#!/usr/bin/env bash
# bench/gpu/evalab.sh COMMIT OLD_EVAL_FUSED_CU — the fused evaluation against an older kernels/eval_fused.cu on the same
# GPU host (after `source .gpuhost/boot.sh`; OLD_EVAL_FUSED_CU: an untracked copy of the older file, e.g. from
# `git show REV:kernels/eval_fused.cu`). Builds the tree, then the tree with the older file in its place (each into a
# folder of its own that FOXHUNT_NATIVE_DIR picks; native/build ends with the tree's own build). On the tree's build:
# `native_check evalfused` with the phase profile, for each FH_EVAL_XASYNC; a short guard bench (a hung evaluation
# ends the call here). Then bench/gpu/final.sh (SKIP_BUILD=1) with AB_ENVS extended by "old" (the older file's
# build): GPU_TESTS, TEST_ENV, TESTS_LAST and DEADLINE pass through. Logs under $OUT/evalab and $OUT/final.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; E=$OUT/evalab; mkdir -p $E
export FOXHUNT_COMMIT=${1:?commit}
OLD=${2:?older eval_fused.cu}
source bench/gpu/rounds.sh
L=$(mktemp -d)
build() { ab_build $L/$1 $E/build-$1.log $1; }
build new
cp kernels/eval_fused.cu $L/eval_fused.cu.new
cp "$OLD" kernels/eval_fused.cu
build old
cp $L/eval_fused.cu.new kernels/eval_fused.cu
cp $L/new/*.so native/build/
ab_native_check
for x in 1 0; do
  FH_EVAL_XASYNC=$x FH_SEED=7 FH_EVAL_FUSED_PROFILE=1 timeout 60 native/build/native_check evalfused native/build \
    > $E/evalfused-xa$x.log 2>&1
  echo "evalfused FH_EVAL_XASYNC=$x rc $?: $(grep -c '^PASS' $E/evalfused-xa$x.log) passed," \
    "$(grep -c '^FAIL' $E/evalfused-xa$x.log) failed"
  grep -E '^FAIL|fused profile' $E/evalfused-xa$x.log | cut -c1-330 | head -2
done
timeout 40 npm run -s bench -- --config reference --backend cuda --epochs 2 --warmup 1 > $E/guard.txt 2>&1
rc=$?; echo "guard bench rc $rc: $(grep -E '^(epoch|eval) ms ' $E/guard.txt | tr -s ' ' | tr '\n' ';')"
[ $rc = 0 ] || { tail -5 $E/guard.txt; exit 3; }
SKIP_BUILD=1 AB_ENVS="${AB_ENVS:-FH_NONE=1;FH_EVAL_XASYNC=0};FOXHUNT_NATIVE_DIR=$L/old" bash bench/gpu/final.sh $FOXHUNT_COMMIT
rm -rf $L
