#!/usr/bin/env python3
"""timeline.py CSV [STEP ...] — one train step's kernels on the GPU's clock, from an nsys cuda_gpu_trace CSV
(`nsys stats --report cuda_gpu_trace --format csv`) of `FH_PROFILE_GRAPHS=1 native_check profile` traced with
`--cuda-graph-trace=node`.

A step ends with its fused optimiser (fh_optimise_kernel); step k's window runs from the end of step k-1's
optimiser to the end of its own. For each step asked for (default: the middle one) it prints every kernel with
its start offset, duration and stream, then the window's length, the time with at least one kernel running
(the union of the kernels' intervals), the bubbles (no kernel running at all) and the time with kernels of two
or more streams running together.
"""
import csv
import re
import sys


def load(path):
    with open(path, newline='') as f:
        lines = f.read().splitlines()
    head = next(i for i, l in enumerate(lines) if 'Start' in l and 'Duration' in l)
    rows = list(csv.DictReader(lines[head:]))
    col = {k: next(c for c in rows[0] if c.startswith(k)) for k in ('Start', 'Duration', 'Strm', 'Name')}
    out = []
    for r in rows:
        try:
            s, d = float(r[col['Start']]), float(r[col['Duration']])
        except (ValueError, TypeError):
            continue
        name = r[col['Name']]
        if not name or name.startswith('[CUDA mem'):
            continue
        out.append((s, s + d, r[col['Strm']], name))
    out.sort()
    return out


def short(name):
    n = re.sub(r'\(.*$', '', name)
    n = re.sub(r'<.*>', '<>', n)
    n = re.sub(r'^void ', '', n)
    return n[:70]


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


def main():
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
