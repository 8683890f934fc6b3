"""critical.py TRACE.csv[.gz] [A B] — the replay chain against the backward chain, from a trace that timeline.py reads
(bench/gpu/trace.sh's CUPTI CSV): for the train steps A..B (default 700..999; a step ends with its optimiser, as in
timeline.py), the median start and end of the loss and of each replay-chain kernel (µs from the previous step's
optimiser end), the optimiser's end, the next step's first GEMM, and how often the gather ends after the optimiser
(the replay's chain then sets the step). Then the other kernels from the loss's start to the optimiser's end (the
backward's chain and what runs beside it): each (kernel, stream, n-th launch of it in the step) with its median start,
end and duration, in order of start, and how long no kernel at all ran in that stretch (a graph's replay runs its
kernels on streams of the driver's choosing, so a stream id is not the captured stream). Last, where in the whole step
nothing ran (no kernel, and no copy or set where the trace has them): the gaps of at least 0.5 us, grouped by the
kernels on either side, largest total first."""
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timeline import load, short  # noqa: E402

CHAIN = ['fh_c51_loss_half', 'fh_mean_block', 'leaves_zero', 'leaves_max', 'tree_rebuild', 'per_sample', 'per_weights',
         'replay_gather_pair']


def main():
    a, b = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (700, 999)
    ks = load(sys.argv[1])
    opt = [i for i, k in enumerate(ks) if 'fh_optimise_kernel' in k[3]]
    if a < 1 or b + 1 >= len(opt):
        sys.exit(f'critical.py: steps {a}..{b} outside 1..{len(opt) - 2}')
    seen = {c: [] for c in CHAIN}
    ends, gemm, late = [], [], []
    rest, idle = {}, []
    gaps = collections.defaultdict(list)
    for k in range(a, b + 1):
        t0 = ks[opt[k - 1]][1]
        first = {}
        for s, e, _, n in ks[opt[k - 1] + 1:opt[k] + 1]:
            for c in CHAIN:
                if c in n and c not in first:
                    first[c] = ((s - t0) / 1e3, (e - t0) / 1e3)
        for c, v in first.items():
            seen[c].append(v)
        end = (ks[opt[k]][1] - t0) / 1e3
        ends.append(end)
        nxt = next(((s - t0) / 1e3 for s, _, _, n in ks[opt[k] + 1:opt[k + 1]] if 'nvjet' in n), None)
        if nxt is not None:
            gemm.append(nxt)
        if 'replay_gather_pair' in first:
            late.append(first['replay_gather_pair'][1] - end)
        step_gaps(ks, t0, ks[opt[k]][1], gaps)
        if 'fh_c51_loss_half' in first:
            backward(ks[opt[k - 1] + 1:opt[k] + 1], t0, first['fh_c51_loss_half'][0], rest, idle)
    med = statistics.median
    print(f'steps {a}..{b}, medians, us from the previous optimiser end')
    print('| kernel | launches | start | end |\n| --- | ---: | ---: | ---: |')
    for c in CHAIN:
        if seen[c]:
            print(f'| {c} | {len(seen[c])} | {med(x for x, _ in seen[c]):.1f} | {med(y for _, y in seen[c]):.1f} |')
    print(f'optimiser end {med(ends):.1f}' + (f'; next step first GEMM {med(gemm):.1f}' if gemm else ''))
    if late:
        print(f'gather end - optimiser end: median {med(late):.1f} us; '
              f'gather later in {sum(x > 0 for x in late) / len(late):.0%} of steps')
    n = b - a + 1
    if rest:
        print(f'\nfrom the loss to the optimiser (kernels in at least half of the {n} steps; no kernel running for '
              f'{med(idle):.1f} us of that stretch, median)')
        print('| kernel | stream | steps | start | end | us |\n| --- | --- | ---: | ---: | ---: | ---: |')
        rows = [(med(x for x, _ in v), med(y for _, y in v), len(v), key) for key, v in rest.items() if 2 * len(v) >= n]
        for s0, e0, cnt, (name, strm, i) in sorted(rows):
            label = name if i == 0 else f'{name} #{i + 1}'
            print(f'| {label} | {strm} | {cnt} | {s0:.1f} | {e0:.1f} | {med(y - x for x, y in rest[(name, strm, i)]):.1f} |')
    rows = sorted(((sum(g for _, g in v) / n, len(v), med(x for x, _ in v), med(g for _, g in v), key)
                   for key, v in gaps.items()), reverse=True)
    print(f'\nnothing running (gaps >= 0.5 us): {sum(r[0] for r in rows):.1f} us a step in all')
    print('| us a step | steps | at | median gap | after | before |\n| ---: | ---: | ---: | ---: | --- | --- |')
    for per, cnt, at, g, (after, before) in rows[:12]:
        print(f'| {per:.1f} | {cnt} | {at:.1f} | {g:.1f} | {after} | {before} |')


def step_gaps(ks, t0, t1, gaps):
    """The stretches of [t0, t1] (ns) where no record of the trace runs, into gaps[(kernel before, kernel after)] as
    (offset, length) in us."""
    seq = sorted((max(s, t0), min(e, t1), n) for s, e, _, n in ks if e > t0 and s < t1)
    last, last_name = t0, 'the step start'
    for s, e, n in seq:
        if s > last + 500:
            gaps[(short(last_name)[:60], short(n)[:60])].append(((last - t0) / 1e3, (s - last) / 1e3))
        if e > last:
            last, last_name = e, n


def backward(step, t0, loss_start, rest, idle):
    """One step's kernels from the loss's start on, except the replay chain's, into rest[(name, stream, n-th)] as
    (start, end) in us from t0; idle: the time in that stretch with no kernel running on any stream."""
    count = {}
    busy = []
    for s, e, strm, n in step:
        st = (s - t0) / 1e3
        if st < loss_start:
            continue
        busy.append((st, (e - t0) / 1e3))
        if any(c in n for c in CHAIN):
            continue
        name = short(n)
        i = count.get((name, strm), 0)
        count[(name, strm)] = i + 1
        rest.setdefault((name, strm, i), []).append((st, (e - t0) / 1e3))
    gap, last = 0.0, loss_start
    for s, e in sorted(busy):
        if s > last:
            gap += s - last
        last = max(last, e)
    idle.append(gap)


if __name__ == '__main__':
    main()
