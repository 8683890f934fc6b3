"""critical.py TRACE.csv[.gz] [A B] — the replay chain against the backward chain, from cupti_trace.cpp's CSV
(bench/gpu/trace.sh): for the train steps A..B (default 700..999; a step ends with its optimiser, as in timeline.py),
the median start and end of each replay-chain kernel and of the loss (µs from the previous step's optimiser end), the
optimiser's end, the next step's first GEMM, and how often the gather ends after the optimiser (the replay's chain
then sets the step)."""
import csv, gzip, statistics, sys

CHAIN = ['fh_c51_loss_half', 'fh_mean_block', 'leaves_zero', 'leaves_max', 'tree_rebuild', 'per_sample', 'per_weights',
         'replay_gather_pair']


def main():
    path = sys.argv[1]
    a, b = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (700, 999)
    op = gzip.open if path.endswith('.gz') else open
    with op(path, 'rt') as f:
        rows = sorted((int(r['Start (ns)']), int(r['Duration (ns)']), r['Name']) for r in csv.DictReader(f))
    opt = [i for i, r in enumerate(rows) if 'fh_optimise_kernel' in r[2]]
    if b + 1 >= len(opt) or a < 1:
        sys.exit(f'critical.py: steps {a}..{b} outside 1..{len(opt) - 2}')
    seen = {k: [] for k in CHAIN}
    ends, gemm, late = [], [], []
    for k in range(a, b + 1):
        i0, i1 = opt[k - 1], opt[k]
        t0 = rows[i0][0] + rows[i0][1]
        first = {}
        for s, d, n in rows[i0 + 1:i1 + 1]:
            for c in CHAIN:
                if c in n and c not in first:
                    first[c] = ((s - t0) / 1e3, (s + d - t0) / 1e3)
        for c, v in first.items():
            seen[c].append(v)
        end = (rows[i1][0] + rows[i1][1] - t0) / 1e3
        ends.append(end)
        nxt = next(((s - t0) / 1e3 for s, d, n in rows[i1 + 1:opt[k + 1]] if 'nvjet' in n), None)
        if nxt is not None:
            gemm.append(nxt)
        if 'replay_gather_pair' in first:
            late.append(first['replay_gather_pair'][1] - end)
    med = statistics.median
    print(f'steps {a}..{b}, medians, us from the previous optimiser end')
    print('| kernel | launches | start | end |\n| --- | ---: | ---: | ---: |')
    for c in CHAIN:
        if seen[c]:
            print(f'| {c} | {len(seen[c])} | {med(x for x, _ in seen[c]):.1f} | {med(y for _, y in seen[c]):.1f} |')
    print(f'optimiser end {med(ends):.1f}; next step first GEMM {med(gemm):.1f}' if gemm else f'optimiser end {med(ends):.1f}')
    if late:
        print(f'gather end - optimiser end: median {med(late):.1f} us; gather later in {sum(x > 0 for x in late) / len(late):.0%} of steps')


if __name__ == '__main__':
    main()
