#!/usr/bin/env bash
# bench/gpu/racecheck.sh — compute-sanitizer racecheck of native_check small, one run per kernel group
# (the project's network/optimiser kernels "fh_", and the env/replay/eval kernels), run side by side;
# prints the sanitizer's kernel-filter options first. Logs under $OUT. The GEMMs run the project's reference
# kernel (FH_GEMM_REFERENCE=1, in the "fh_" group): cuBLASLt's Hopper kernels break racecheck.
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
compute-sanitizer --help | grep -i -A3 'kernel-name\|kernel-regex' | head -30
[ -f native/build/libfoxhunt_cuda.so ] || FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda >"$OUT/build.log" 2>&1
g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o native/build/native_check
run() {
  FH_EVAL_FUSED=0 FH_GEMM_REFERENCE=1 timeout 400 compute-sanitizer --tool racecheck --error-exitcode 9 \
    --kernel-name "$2" \
    native/build/native_check small native/build >"$OUT/racecheck-$1.log" 2>&1
  echo "racecheck $1 ($2): rc $? $(grep -m1 'RACECHECK SUMMARY' "$OUT/racecheck-$1.log")"
}
run net 'kns=fh_' &
run env 'regex=env_|eval_|per_|replay_|tree_|leaves_|collect_' &  # kns= is a plain substring: no alternation
wait
for f in "$OUT"/racecheck-*.log; do echo "== $f"; grep -v '^\s*$' "$f" | tail -12; done
