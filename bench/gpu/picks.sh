#!/usr/bin/env bash
# bench/gpu/picks.sh [N] — on a GPU host (after `source .gpuhost/boot.sh`, the library built): N (default 12) bench
# processes of the reference (rounds.sh's ab_rounds, one variant: FH_GEMM_TUNE_LOG=1 and PICKS_ENV), so that the
# autotuner's picks (native/src/cuda/gemm_cublaslt.cpp, pick_algo: timed once a process) can be set beside the
# process's epoch. Prints one line a process: its epoch and train ms and its pick for every shape whose pick is not
# the same in all N processes (`shape=#index`), then, for each such shape and pick, the median epoch of the processes
# that made it. A pick that comes only with slow epochs is the one to look at (bench/RESULTS.md, thirty-second
# session). Logs under $OUT/picks.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; P=$OUT/picks; mkdir -p $P
source bench/gpu/rounds.sh
n=${1:-12}
ab_env=("FH_GEMM_TUNE_LOG=1 ${PICKS_ENV:-}")
ab_label=("picks")
ab_rounds $P "$n" "epoch train" >&2
python3 - "$P" "$n" <<'EOF'
import os, re, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
runs = []
for i in range(1, n + 1):
    if not os.path.exists(f'{d}/ab-0-{i}.txt'):  # ab_rounds leaves out the rounds after a hung one
        continue
    ms, picks, seen = {}, {}, {}
    for line in open(f'{d}/ab-0-{i}.txt', errors='replace'):
        m = re.match(r'^(epoch|train) ms +([0-9.]+)', line)
        if m:
            ms[m.group(1)] = float(m.group(2))
        m = re.match(r'gemm tune (.*?): \d+ candidates.*best #(\d+)', line)
        if m:
            # a shape tuned more than once a process (two GEMMs of one key, e.g. two heads of one width) is numbered
            seen[m.group(1)] = seen.get(m.group(1), 0) + 1
            picks[f'{m.group(1)} [{seen[m.group(1)]}]'] = int(m.group(2))
    runs.append((ms, picks))
shapes = sorted({s for _, p in runs for s in p})
varying = [s for s in shapes if len({p.get(s) for _, p in runs}) > 1]
short = {s: re.sub(r' (lda|ldb|ldc)=\d+', '', s) for s in varying}
for i, (ms, p) in enumerate(runs, 1):
    print(f"process {i}: epoch {ms.get('epoch', float('nan')):.2f} train {ms.get('train', float('nan')):.2f} | " +
          ' '.join(f'{short[s]}=#{p.get(s, "-")}' for s in varying))
print(f'{len(shapes)} shapes tuned, {len(varying)} with picks that differ between processes')
for s in varying:
    by = {}
    for ms, p in runs:
        if 'epoch' in ms:
            by.setdefault(p.get(s), []).append(ms['epoch'])
    print(f'{short[s]}: ' + ', '.join(f'#{k} median {statistics.median(v):.2f} ({len(v)})' for k, v in sorted(by.items(), key=lambda kv: str(kv[0]))))
EOF
