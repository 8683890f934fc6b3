#!/usr/bin/env bash
# bench/gpu/hlsrc.sh — where a training kernel stalls, by source line, on a GPU host (after `source .gpuhost/boot.sh`
# and a build): ncu (full set) on one launch of `native_check profile`, its duration and issue metrics, then
# bench/gpu/sass_lines.py's stall samples per source line (the instance's machine code from the library's cubins).
# HL_KERNEL: the kernel's name (default fh_heads_loss_kernel, the fused head outputs + loss of kernels/heads_loss.cu);
# HL_ENV: the switches it needs (default FH_HEADS_LOSS=1 for that kernel, none otherwise). Raw files under $OUT/hlsrc.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; E=$OUT/hlsrc; mkdir -p $E
source bench/gpu/rounds.sh
ab_native_check
K=${HL_KERNEL:-fh_heads_loss_kernel}
if [ -z "${HL_ENV+x}" ]; then HL_ENV=$([ "$K" = fh_heads_loss_kernel ] && echo FH_HEADS_LOSS=1); fi
t0=$(date +%s)
env $HL_ENV timeout ${NCU_TIMEOUT:-200} ncu --set full --import-source no -k regex:$K --launch-count 1 \
  -f -o $E/hl native/build/native_check profile native/build >$E/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s)-t0 )) s)"; grep -E '==PROF==|==ERROR==|profile epoch' $E/ncu.log | head -5
ncu -i $E/hl.ncu-rep --page source --csv --print-source sass >$E/sass.csv 2>$E/sass.err || tail -3 $E/sass.err
ncu -i $E/hl.ncu-rep --page details >$E/details.txt 2>&1
grep -E 'Duration|Executed Instructions  |Issue Slots Busy|Registers Per|Warp Cycles Per Issued|No Eligible|Local|Spill|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput' $E/details.txt | head -24
# the profiled instance's mangled name (a template kernel has several in the cubins)
mangled=$(ncu -i $E/hl.ncu-rep --page raw --csv --print-kernel-base mangled --metrics gpu__time_duration.sum 2>/dev/null |
  python3 -c 'import csv,sys; r=list(csv.reader(sys.stdin)); print(r[2][r[0].index("Kernel Name")] if len(r)>2 else "")')
echo "instance: ${mangled:-?}"
D=$(mktemp -d); (cd $D && cuobjdump -xelf all "$OLDPWD/native/build/libfoxhunt_cuda.so" >/dev/null 2>&1)
cub=$(grep -l "${mangled:-$K}" $D/*.cubin 2>/dev/null | head -1)
if [ -n "$cub" ]; then
  nvdisasm -g -c "$cub" >$E/lines.txt 2>$E/nvdisasm.err || tail -3 $E/nvdisasm.err
  python3 bench/gpu/sass_lines.py $E/sass.csv $E/lines.txt "${mangled:-$K}" >$E/summary.txt
  grep -E 'total (Instructions Executed|stall_[a-z_]+ \(Not Issued\))' $E/summary.txt | awk '$NF > 100'
  sed -n '/^by function/,$p' $E/summary.txt | head -${LINES_TOP:-70}
else
  echo "hlsrc: no cubin with ${mangled:-$K} in the library"
fi
rm -rf $D
