"""ncu_summary.py CSV: per-kernel totals of an `ncu --csv --metrics gpu__time_duration.sum` log, largest
first, then the launch order (used by bench/gpu/net.sh profile)."""
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr, rows = rows[0], rows[1:]
ki, ui, vi, ii = hdr.index('Kernel Name'), hdr.index('Metric Unit'), hdr.index('Metric Value'), hdr.index('ID')
scale = {'nsecond': 1e-3, 'ns': 1e-3, 'usecond': 1.0, 'us': 1.0, 'msecond': 1e3, 'ms': 1e3, 'second': 1e6, 's': 1e6}
tot, cnt, seq = collections.defaultdict(float), collections.Counter(), []
for r in rows:
    us = float(r[vi].replace(',', '')) * scale.get(r[ui], 1.0)
    name = r[ki].split('(')[0][:70]
    tot[name] += us; cnt[name] += 1; seq.append((int(r[ii]), name, us))
print(f"kernels profiled: {len(seq)}, total {sum(tot.values()):.0f} us")
for name, us in sorted(tot.items(), key=lambda x: -x[1])[:40]:
    print(f"{us:10.1f} us  {cnt[name]:5d}x  {us / cnt[name]:8.2f} us/launch  {name}")
print("--- launch order (first 260)")
for i, name, us in seq[:260]:
    print(f"{i:5d} {us:8.2f} {name}")
