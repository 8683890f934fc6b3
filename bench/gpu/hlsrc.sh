#!/usr/bin/env bash
# bench/gpu/hlsrc.sh — where the fused head outputs + loss kernel (kernels/heads_loss.cu) stalls, by source line, on a
# GPU host (after `source .gpuhost/boot.sh` and a build): ncu (full set) on one fh_heads_loss_kernel launch of
# `native_check profile` with FH_HEADS_LOSS=1, its duration and issue metrics, then bench/gpu/sass_lines.py's stall
# samples per source line (the kernel's machine code from the library's cubins). Raw files under $OUT/hlsrc.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; E=$OUT/hlsrc; mkdir -p $E
source bench/gpu/rounds.sh
ab_native_check
t0=$(date +%s)
FH_HEADS_LOSS=1 timeout ${NCU_TIMEOUT:-200} ncu --set full --import-source no -k regex:fh_heads_loss_kernel --launch-count 1 \
  -f -o $E/hl native/build/native_check profile native/build >$E/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s)-t0 )) s)"; grep -E '==PROF==|==ERROR==|profile epoch' $E/ncu.log | head -5
ncu -i $E/hl.ncu-rep --page source --csv --print-source sass >$E/sass.csv 2>$E/sass.err || tail -3 $E/sass.err
ncu -i $E/hl.ncu-rep --page details >$E/details.txt 2>&1
grep -E 'Duration|Executed Instructions  |Issue Slots Busy|Registers Per|Warp Cycles Per Issued|No Eligible|Local|Spill|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput' $E/details.txt | head -24
D=$(mktemp -d); (cd $D && cuobjdump -xelf all "$OLDPWD/native/build/libfoxhunt_cuda.so" >/dev/null 2>&1)
cub=$(grep -l fh_heads_loss_kernel $D/*.cubin 2>/dev/null | head -1)
if [ -n "$cub" ]; then
  nvdisasm -g -c "$cub" >$E/lines.txt 2>$E/nvdisasm.err || tail -3 $E/nvdisasm.err
  python3 bench/gpu/sass_lines.py $E/sass.csv $E/lines.txt _Z20fh_heads_loss_kernel >$E/summary.txt; head -${LINES_TOP:-70} $E/summary.txt
else
  echo "hlsrc: no cubin with fh_heads_loss_kernel in the library"
fi
rm -rf $D
