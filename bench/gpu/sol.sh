#!/usr/bin/env bash
# bench/gpu/sol.sh — speed of light per kernel of one serialised reference-shaped train step, on a GPU host (after
# `source .gpuhost/boot.sh` and a build): ncu on `native_check profile` (FH_PROFILE_STEPS=1, no graphs), per launch
# its duration, DRAM and SM throughput (% of peak), issue-slot use and achieved occupancy, largest first. Kernels of
# the collection and the evaluation are in the list too (their launches are tiny at the profile's shapes). KERNELS
# narrows ncu to a regex. Raw CSV under $OUT/sol.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; E=$OUT/sol; mkdir -p $E
source bench/gpu/rounds.sh
ab_native_check
m=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
m=$m,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes.sum
t0=$(date +%s)
FH_PROFILE_STEPS=1 timeout ${NCU_TIMEOUT:-200} ncu --csv --metrics $m ${KERNELS:+-k regex:$KERNELS} --profile-from-start off \
  native/build/native_check profile native/build >$E/sol.csv 2>$E/ncu.err
echo "ncu rc $? ($(( $(date +%s)-t0 )) s)"; grep -E '==ERROR==|profile epoch' $E/sol.csv $E/ncu.err | head -5
python3 - $E/sol.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr, rows = rows[0], rows[1:]
ki, ii, ni, ui, vi = (hdr.index(h) for h in ('Kernel Name', 'ID', 'Metric Name', 'Metric Unit', 'Metric Value'))
k = collections.defaultdict(dict)
for r in rows:
    v = float(r[vi].replace(',', '') or 0)
    if r[ni] == 'gpu__time_duration.sum':
        v *= {'nsecond': 1e-3, 'usecond': 1.0, 'msecond': 1e3}.get(r[ui], 1.0)
    if r[ni] == 'dram__bytes.sum':
        v *= {'byte': 1e-6, 'Kbyte': 1e-3, 'Mbyte': 1.0, 'Gbyte': 1e3}.get(r[ui], 1.0)
    k[int(r[ii])][r[ni]] = v
    k[int(r[ii])]['name'] = r[ki].split('(')[0][:64]
L = sorted(k.values(), key=lambda d: -d.get('gpu__time_duration.sum', 0))
print(f"{'us':>8} {'dram%':>6} {'sm%':>6} {'issue%':>7} {'occ%':>6} {'MB':>7}  kernel   ({len(L)} launches)")
for d in L[:45]:
    print(f"{d.get('gpu__time_duration.sum',0):8.1f} {d.get('dram__throughput.avg.pct_of_peak_sustained_elapsed',0):6.1f} "
          f"{d.get('sm__throughput.avg.pct_of_peak_sustained_elapsed',0):6.1f} {d.get('sm__inst_issued.avg.pct_of_peak_sustained_active',0):7.1f} "
          f"{d.get('sm__warps_active.avg.pct_of_peak_sustained_active',0):6.1f} {d.get('dram__bytes.sum',0):7.1f}  {d['name']}")
PY
