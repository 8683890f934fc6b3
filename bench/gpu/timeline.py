#!/usr/bin/env python3
"""timeline.py CSV [--bubbles] [STEP ...] — one train step's kernels on the GPU's clock, from an nsys cuda_gpu_trace
CSV (`nsys stats --report cuda_gpu_trace --format csv`) of `FH_PROFILE_GRAPHS=1 native_check profile` traced with
`--cuda-graph-trace=node`, or from bench/gpu/cupti_trace.cpp's CSV of the same columns (bench/gpu/trace.sh).
--bubbles first lists the longest stretches of the whole trace without any kernel running. `timeline.py CSV --sum A B`:
each kernel's launches and GPU time per step, averaged over the train steps A..B.

A step ends with its fused optimiser (fh_optimise_kernel); step k's window runs from the end of step k-1's
optimiser to the end of its own. For each step asked for (default: the middle one) it prints every kernel with
its start offset, duration and stream, then the window's length, the time with at least one kernel running
(the union of the kernels' intervals), the bubbles (no kernel running at all) and the time with kernels of two
or more streams running together.
"""
import csv
import gzip
import re
import sys


def load(path):
    """The trace's kernels as (start, end, stream, name [grid]) sorted by start, ns; path may be gzipped."""
    with (gzip.open if path.endswith('.gz') else open)(path, 'rt', newline='') as f:
        lines = f.read().splitlines()
    head = next(i for i, l in enumerate(lines) if 'Start' in l and 'Duration' in l)
    rows = list(csv.DictReader(lines[head:]))
    col = {k: next(c for c in rows[0] if c.startswith(k)) for k in ('Start', 'Duration', 'Strm', 'Name')}
    gcol = next((c for c in rows[0] if c.startswith('Grid')), None)  # cupti_trace.cpp's grid column
    out = []
    for r in rows:
        try:
            s, d = float(r[col['Start']]), float(r[col['Duration']])
        except (ValueError, TypeError):
            continue
        name = r[col['Name']]
        if not name or name.startswith('[CUDA mem'):
            continue
        grid = r.get(gcol, '') if gcol else ''
        out.append((s, s + d, r[col['Strm']], f'{name} [{grid}]' if grid else name))
    out.sort()
    return out


def short(name):
    grid = re.search(r' \[[0-9x]+\]$', name)
    n = name[:grid.start()] if grid else name
    n = re.sub(r'\(.*$', '', n)
    n = re.sub(r'<.*>', '<>', n)
    n = re.sub(r'^void ', '', n)
    return n[:70] + (grid.group(0) if grid else '')


def union(iv):
    tot, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


def overlap2(ks):
    """Time with kernels of at least two streams running together."""
    ev = []
    for s, e, st, _ in ks:
        ev.append((s, 1, st))
        ev.append((e, -1, st))
    ev.sort(key=lambda x: (x[0], x[1]))
    live, t0, tot = {}, None, 0.0
    for t, d, st in ev:
        if t0 is not None and sum(1 for v in live.values() if v > 0) >= 2:
            tot += t - t0
        live[st] = live.get(st, 0) + d
        t0 = t
    return tot


def bubbles(ks, most=12, min_us=20.0):
    """The longest stretches of the whole trace with no kernel running, with the kernels on either side."""
    gaps, end, last = [], None, None
    for s, e, st, n in ks:
        if end is not None and s - end >= min_us * 1e3:
            gaps.append((s - end, end, last, n))
        if end is None or e > end:
            end, last = e, n
    t0 = ks[0][0] if ks else 0.0
    idle = sum(g for g, _, _, _ in gaps)
    print(f'bubbles of >= {min_us:.0f} us over the whole trace ({(end - t0) / 1e6:.1f} ms): {len(gaps)}, '
          f'{idle / 1e6:.2f} ms in all; the longest:')
    print('| at ms | idle us | after | before |\n| ---: | ---: | --- | --- |')
    for g, at, a, b in sorted(gaps, reverse=True)[:most]:
        print(f'| {(at - t0) / 1e6:.2f} | {g / 1e3:.1f} | {short(a)} | {short(b)} |')
    print()


def summed(ks, ends, a, b):
    """Per kernel (short name): launches and GPU time per step, averaged over the steps a..b (in place: real clocks,
    with the other streams running beside it)."""
    n = b - a + 1
    agg = {}
    for s, e, st, name in ks:
        if s >= ends[a - 1] and s < ends[b]:
            k = short(name)
            c, t = agg.get(k, (0, 0.0))
            agg[k] = (c + 1, t + (e - s))
    tot = sum(t for _, t in agg.values())
    print(f'steps {a}..{b}: {(ends[b] - ends[a - 1]) / n / 1e3:.1f} us a step, kernel time summed {tot / n / 1e3:.1f} us')
    print('| kernel | launches a step | us a launch | us a step |\n| --- | ---: | ---: | ---: |')
    for k, (c, t) in sorted(agg.items(), key=lambda x: -x[1][1]):
        print(f'| {k} | {c / n:.2f} | {t / c / 1e3:.1f} | {t / n / 1e3:.1f} |')
    print()


def main():
    if len(sys.argv) > 4 and sys.argv[2] == '--sum':
        ks = load(sys.argv[1])
        ends = [e for s, e, st, n in ks if 'fh_optimise_kernel' in n]
        a, b = int(sys.argv[3]), int(sys.argv[4])
        if not (1 <= a <= b < len(ends)):
            print(f'timeline: steps {a}..{b} outside 1..{len(ends) - 1}')
            return 1
        summed(ks, ends, a, b)
        return 0
    if len(sys.argv) > 2 and sys.argv[2] == '--bubbles':
        ks = load(sys.argv[1])
        bubbles(ks)
        sys.argv[2:3] = []
    else:
        ks = load(sys.argv[1])
    ends = [e for s, e, st, n in ks if 'fh_optimise_kernel' in n]
    if len(ends) < 2:
        print('timeline: fewer than two optimiser launches in the trace')
        return 1
    steps = [int(a) for a in sys.argv[2:]] or [len(ends) // 2]
    for k in steps:
        if k < 1 or k >= len(ends):
            continue
        w0, w1 = ends[k - 1], ends[k]
        sel = [x for x in ks if x[0] >= w0 and x[0] < w1]
        print(f'step {k}: {len(sel)} kernels')
        print('| start us | dur us | stream | kernel |\n| ---: | ---: | --- | --- |')
        for s, e, st, n in sel:
            print(f'| {(s - w0) / 1e3:.1f} | {(e - s) / 1e3:.1f} | {st} | {short(n)} |')
        busy = union([(max(s, w0), min(e, w1)) for s, e, _, _ in sel])
        print(f'window {(w1 - w0) / 1e3:.1f} us: a kernel running {busy / 1e3:.1f} us, no kernel running '
              f'{(w1 - w0 - busy) / 1e3:.1f} us, two or more streams at once {overlap2(sel) / 1e3:.1f} us, '
              f'kernel time summed {sum(e - s for s, e, _, _ in sel) / 1e3:.1f} us\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
