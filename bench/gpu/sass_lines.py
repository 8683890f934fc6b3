#!/usr/bin/env python3
"""sass_lines.py SASS_CSV LINES_TXT KERNEL — ncu's per-instruction source page joined with the source lines of the
machine code (bench/gpu/evalsrc.sh).

SASS_CSV  `ncu -i REP --page source --csv --print-source sass`: one row per instruction, an Address column, then
          metric columns (warp stall samples, instructions executed, ...).
LINES_TXT `nvdisasm -g -c CUBIN`: the machine code with `//## File "...", line N` before the instructions of a line.
KERNEL    the function whose section of LINES_TXT matches the CSV (a substring of its mangled name).

Prints the metric totals, then the source lines, and the enclosing functions, by the first stall-sampling column
(else the first metric column), with each line's share, and, for each stall-reason column, the top lines."""
import csv
import os
import re
import sys
from collections import defaultdict

FILE_RE = re.compile(r'//## File "([^"]+)", line (\d+)')
INSN_RE = re.compile(r'/\*([0-9a-f]{4,})\*/')
SECT_RE = re.compile(r'^\s*\.section\s+\.text\.(\S+?),|^\.text\.(\S+):')


def read_lines(path, kernel):
    """address (bytes from the function's start) -> (file, line), for the section whose name contains kernel."""
    amap, cur, inside = {}, None, False
    with open(path, errors='replace') as f:
        for row in f:
            m = SECT_RE.search(row)
            if m:
                inside = kernel in (m.group(1) or m.group(2) or '')
                cur = None
                continue
            if not inside:
                continue
            m = FILE_RE.search(row)
            if m:
                cur = (m.group(1), int(m.group(2)))
                continue
            m = INSN_RE.search(row)
            if m and cur:
                amap[int(m.group(1), 16)] = cur
    return amap


def read_csv(path):
    with open(path, newline='', errors='replace') as f:
        rows = list(csv.reader(f))
    start = next((i for i, r in enumerate(rows) if any(c.strip() == 'Address' for c in r)), None)
    if start is None:
        sys.exit('sass_lines: no Address column in %s' % path)
    head = [c.strip() for c in rows[start]]
    body = [r for r in rows[start + 1:] if len(r) == len(head)]
    ai = head.index('Address')
    metrics = []
    for j, h in enumerate(head):
        if j == ai or h in ('Source', '#'):
            continue
        try:
            [float(r[j].replace(',', '') or 0) for r in body[:50]]
            metrics.append(j)
        except ValueError:
            pass
    out = []
    for r in body:
        try:
            a = int(r[ai], 16) if r[ai].lower().startswith('0x') else int(r[ai])
        except ValueError:
            continue
        out.append((a, [float(r[j].replace(',', '') or 0) for j in metrics]))
    return [head[j] for j in metrics], out


def functions_of(path):
    """line -> name of the function whose definition starts last at or before it (column-0 definitions)."""
    names, cur = {}, '?'
    try:
        src = open(path, errors='replace').read().split('\n')
    except OSError:
        return names, []
    for i, s in enumerate(src, 1):
        m = re.match(r'^(?:template\s*<[^>]*>\s*)?(?:static\s+)?(?:__\w+__\s+)*(?:inline\s+)?[\w:<>,\s\*&]+?\b(\w+)\s*\(', s)
        if m and not s.startswith((' ', '\t', '#', '/', '}')) and not s.rstrip().endswith(';'):
            cur = m.group(1)
        names[i] = cur
    return names, src


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    names, rows = read_csv(sys.argv[1])
    amap = read_lines(sys.argv[2], sys.argv[3])
    if not rows or not amap:
        sys.exit('sass_lines: %d instructions in the CSV, %d mapped addresses' % (len(rows), len(amap)))
    base = min(a for a, _ in rows)
    key = next((i for i, n in enumerate(names) if 'Stall Sampling (All' in n),
               next((i for i, n in enumerate(names) if 'Sampling' in n), 0))
    per_line = defaultdict(lambda: [0.0] * len(names))
    unmapped = 0
    for a, v in rows:
        loc = amap.get(a - base)
        if loc is None:
            unmapped += 1
            loc = ('?', 0)
        acc = per_line[loc]
        for i, x in enumerate(v):
            acc[i] += x
    tot = [sum(v[i] for v in per_line.values()) for i in range(len(names))]
    print('%d instructions, %d without a source line; key metric: %s' % (len(rows), unmapped, names[key]))
    for n, t in zip(names, tot):
        if t:
            print('  total %-60s %14.0f' % (n[:60], t))
    srcs = {}

    def text(f, ln):
        if f not in srcs:
            p = f if os.path.exists(f) else os.path.join('kernels', os.path.basename(f))
            srcs[f] = functions_of(p)
        fn, src = srcs[f]
        return fn.get(ln, '?'), (src[ln - 1].strip() if 0 < ln <= len(src) else '')

    by_fn = defaultdict(float)
    for (f, ln), v in per_line.items():
        by_fn[(os.path.basename(f), text(f, ln)[0])] += v[key]
    print('\nby function (%s):' % names[key])
    for (f, fn), x in sorted(by_fn.items(), key=lambda kv: -kv[1])[:25]:
        print('  %6.2f%%  %s:%s' % (100 * x / max(tot[key], 1), f, fn))
    print('\nby source line (%s):' % names[key])
    for (f, ln), v in sorted(per_line.items(), key=lambda kv: -kv[1][key])[:int(os.environ.get('TOP', '45'))]:
        fn, s = text(f, ln)
        print('  %6.2f%%  %s:%d %s | %s' % (100 * v[key] / max(tot[key], 1), os.path.basename(f), ln, fn, s[:90]))
    for i, n in enumerate(names):
        if i == key or not tot[i] or 'stall' not in n.lower():
            continue
        top = sorted(per_line.items(), key=lambda kv: -kv[1][i])[:5]
        print('\n%s (total %.0f):' % (n, tot[i]) + ''.join(
            '\n  %6.2f%%  %s:%d' % (100 * v[i] / tot[i], os.path.basename(f), ln) for (f, ln), v in top))


if __name__ == '__main__':
    main()
