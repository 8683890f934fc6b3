#!/usr/bin/env bash
# bench/gpu/evalsrc.sh — where the fused evaluation's warps stall, by source line, on a GPU host (after `source
# .gpuhost/boot.sh` and a build: final.sh or iterate.sh first). ncu samples the warp states of one reference-shaped
# eval_fused_kernel launch (`native_check profile`: a reference-shaped trainer, its short evaluation); nvdisasm maps
# the kernel's machine code to source lines (-lineinfo); bench/gpu/sass_lines.py joins the two and prints the stall
# samples per source line, per function and per stall reason. The raw files are kept gzipped under $OUT/evalsrc.
# Another instance: its switch in the environment (e.g. FH_EVAL_NSPLIT=0) and EF_INSTANCE=its mangled name's start
# (eval_fused_kernelILb1ELi0 for the K split).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; E=$OUT/evalsrc; mkdir -p $E
source bench/gpu/rounds.sh
ab_native_check
t0=$(date +%s)
timeout ${NCU_TIMEOUT:-200} ncu --set full --import-source no -k regex:eval_fused_kernel --launch-count 1 -f -o $E/ef \
  native/build/native_check profile native/build >$E/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s)-t0 )) s)"; grep -E '==PROF==|==ERROR==|profile epoch' $E/ncu.log | head -5
ncu -i $E/ef.ncu-rep --page source --csv --print-source sass >$E/sass.csv 2>$E/sass.err || tail -3 $E/sass.err
ncu -i $E/ef.ncu-rep --page details >$E/details.txt 2>&1
grep -E 'Duration|Executed Instructions  |Issue Slots Busy|Registers Per|Warp Cycles Per Issued|No Eligible' $E/details.txt | head
# the kernel's machine code with its source lines (the default instance, eval_fused_kernel<true, 2>), from the library's embedded cubins
D=$(mktemp -d); (cd $D && cuobjdump -xelf all "$OLDPWD/native/build/libfoxhunt_cuda.so" >/dev/null 2>&1)
cub=$(grep -l eval_fused_kernel $D/*.cubin 2>/dev/null | head -1)
if [ -n "$cub" ]; then
  nvdisasm -g -c "$cub" >$E/lines.txt 2>$E/nvdisasm.err || tail -3 $E/nvdisasm.err
  python3 bench/gpu/sass_lines.py $E/sass.csv $E/lines.txt ${EF_INSTANCE:-eval_fused_kernelILb1ELi2} >$E/summary.txt; head -${LINES_TOP:-90} $E/summary.txt
else
  echo "evalsrc: no cubin with eval_fused_kernel in the library"
fi
rm -rf $D
gzip -f $E/sass.csv $E/lines.txt 2>/dev/null; rm -f $E/ef.ncu-rep
